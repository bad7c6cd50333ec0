"""Turn what a user names as a model (Symbol, file path, zoo name) into a Symbol."""
from __future__ import annotations

import os

from .errors import Error


def as_symbol(model, batch=None, trainable=None):
    """A Symbol from a Symbol, an ``.onnx`` path, an MXNet ``-symbol.json`` path or a zoo name
    (``"vgg16"``, ``"wresnet-152-10"``, ``"rnn-10-8k"``); `batch` sizes zoo models and ONNX inputs;
    `trainable` (ONNX only) picks the weights, as :func:`autotile.onnx.load` takes it."""
    from .symbol.symbol import Symbol

    text = os.fspath(model) if isinstance(model, (str, os.PathLike)) else None
    if trainable is not None and not (text or "").endswith(".onnx"):
        raise Error("trainable= picks the weights of an ONNX model imported from an .onnx path; for a Symbol, "
                    "pass it to at.onnx.load(..., trainable=...)")
    if isinstance(model, Symbol):
        return model
    if text is None:
        raise Error(f"model must be a Symbol, a model path or a zoo name, got {type(model).__name__}")
    if text.endswith(".onnx"):
        from . import onnx as _onnx

        return _onnx.load(text, batch_size=batch, trainable=trainable)
    if text.endswith(".json"):
        from .symbol import load

        return load(text)
    if os.path.exists(text):
        raise Error(f"'{text}': unknown model file type (expected .onnx or -symbol.json)")
    from . import models

    return models.get(text, batch=batch)
