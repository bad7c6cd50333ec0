"""Turn what a user names as a model (Symbol, file path, zoo name) into a Symbol."""
from __future__ import annotations

import os

from .errors import Error


def as_symbol(model, batch=None):
    """A Symbol from a Symbol, an ``.onnx`` path, an MXNet ``-symbol.json`` path or a zoo name
    (``"vgg16"``, ``"wresnet-152-10"``, ``"rnn-10-8k"``); `batch` sizes zoo models and ONNX inputs."""
    from .symbol.symbol import Symbol

    if isinstance(model, Symbol):
        return model
    if not isinstance(model, (str, os.PathLike)):
        raise Error(f"model must be a Symbol, a model path or a zoo name, got {type(model).__name__}")
    text = os.fspath(model)
    if text.endswith(".onnx"):
        from . import onnx as _onnx

        return _onnx.load(text, batch_size=batch)
    if text.endswith(".json"):
        from .symbol import load

        return load(text)
    if os.path.exists(text):
        raise Error(f"'{text}': unknown model file type (expected .onnx or -symbol.json)")
    from . import models

    return models.get(text, batch=batch)
