"""``autotile.onnx``: import ONNX models as autotile Symbols.

    sym = at.onnx.load("model.onnx", batch_size=32)
    sym.params          # initializers and folded constant subgraphs: name -> numpy array
    sym.onnx_names      # ONNX tensor name -> autotile variable / output name

Needs the optional ``onnx`` package (``pip install autotile[onnx]``).
"""
from __future__ import annotations

from typing import Optional

from .errors import Error, install_hint

__all__ = ["load"]


def load(path_or_model, batch_size: Optional[int] = None, shapes: Optional[dict] = None, trainable=None):
    """Import an ONNX model (a ``.onnx`` path, serialized bytes or an ``onnx.ModelProto``).

    Returns a Symbol whose outputs are the graph outputs in order. Initializers (and constant
    subgraphs such as ConstantOfShape weights) become parameters carried in ``sym.params``;
    the other graph inputs are data Variables. ``batch_size`` sets the first dimension of every
    data input (replacing a symbolic or fixed one: for an export traced at a fixed batch, the
    Reshape constants that hold that batch in front are rewritten, and a constant that cannot
    be, such as an Expand's shape or a stored tensor of the old batch, is named in the Error
    the import then ends in); ``shapes`` (input name -> shape) sets whole
    input shapes and binds the symbolic dimensions they fix (``sequence``) in every input.
    Graph inputs that are not initializers are data whatever their names. Which initializers
    training updates: ``trainable`` (a name or ``fnmatch`` glob pattern, or a list of them,
    matched against ONNX initializer names) picks the weights exactly; without it the
    exporter's mark decides (the dynamo exporter's PARAMETER / BUFFER / CONSTANT_TENSOR), then
    a float initializer is a weight unless it only feeds positions no gradient is wanted at
    (shape and index arithmetic, a Where's condition, a uniform fill value such as
    ``masked_fill``'s ``-inf``); docs/onnx.md gives the whole rule. Constants (Constant nodes,
    masks, buffers) carry ``__const__`` and are not trained.
    The model's own input names are kept (only names with whitespace, quotes or control
    characters are sanitised), the op computing a graph output takes the output's name, and
    ``sym.onnx_names`` maps each ONNX tensor name to its autotile entry name; every Variable
    carries its ONNX name in the ``__onnx_name__`` attribute.

    External weight data is read only for a model given by path, from files inside the
    model's directory, after each tensor's declared bytes are checked against its ``length``
    and the file's size; bytes or a ModelProto that still name external data are refused
    (they have no directory: pass the path, or a ModelProto ``onnx.load`` filled in).
    Constant subgraphs fold at import time only up to 2^28 elements per result, checked
    before the result is built.

    Raises :class:`autotile.Error` for a file that is missing, truncated or not ONNX, for an
    opset below 7, for operators autotile does not support (all of them listed, each with a
    node name), for attributes whose semantics autotile cannot reproduce, and for a
    ``trainable`` pattern that matches no initializer.
    """
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise Error(f"at.onnx.load needs the onnx package: {install_hint('onnx')}") from None
    from .frontend.onnx_import import import_model

    return import_model(path_or_model, batch_size=batch_size, shapes=shapes, trainable=trainable)
