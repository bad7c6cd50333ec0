"""The values constant folding carries besides NumPy numbers: an unknown dimension
(:class:`SymDim`) and the signal that a node cannot be folded (:class:`NotFoldable`). Kept
apart from onnx_fold so the fold-size rules (onnx_fold_size) and the folders share them
without importing each other."""
from __future__ import annotations


class NotFoldable(Exception):
    """The node cannot be evaluated at import time (the importer then converts it)."""


class SymDim:
    """A dimension whose value is unknown at import time, named by ONNX's dim_param."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name or "?"

    def __eq__(self, other):
        return isinstance(other, SymDim) and other.name == self.name

    def __hash__(self):
        return hash(("SymDim", self.name))

    def __repr__(self):
        return f"<{self.name}>"

    def _no_math(self, *args):
        raise NotFoldable(f"arithmetic on the unknown dimension '{self.name}'")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _no_math
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __neg__ = _no_math
    __lt__ = __le__ = __gt__ = __ge__ = __int__ = __index__ = _no_math
