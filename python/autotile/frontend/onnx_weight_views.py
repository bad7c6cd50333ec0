"""One trainable ONNX initializer, one Variable, whatever the orientation of its readers.

Converters derive a weight's layout from the node that reads it: ``MatMul`` wants B^T as a
FullyConnected weight, ``Gemm(transB=1)`` reads B as stored, a converter may reshape a scale
to broadcast. Each derived value used to become its own Variable (``W`` and ``W_T``), so a
weight read in two orientations trained as two tensors, each on part of the gradient
(issue 31). Here the first reader's layout of a weight is its Variable (the *canonical*
one); a later reader that wants the same values in another layout (the weight itself, its
transpose, or a reshape of it) gets an op on that Variable (transpose / Reshape), so the
gradients of all readers sum into one tensor. A derived value that is not a pure relayout
(scaled by Gemm's alpha, a broadcast bias) stays a copy, as before.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np

#: a relayout of weight W: ("id",), ("T",) for the 2-D transpose, ("reshape", shape)
Layout = Tuple


def layout_of(value: np.ndarray, weight: np.ndarray) -> Optional[Layout]:
    """How `value` is `weight` laid out again, or None when its values differ."""
    if value.dtype != weight.dtype or value.size != weight.size:
        return None
    if value.shape == weight.shape:
        return ("id",) if np.array_equal(value, weight) else None
    if weight.ndim == 2 and value.shape == weight.shape[::-1] and np.array_equal(value, weight.T):
        return ("T",)
    if np.array_equal(value.ravel(), weight.ravel()):
        return ("reshape", tuple(int(d) for d in value.shape))
    return None


class WeightViews:
    """The canonical Variable of each weight source and the layout it stores."""

    def __init__(self):
        self.canonical: Dict[str, Tuple[Layout, object]] = {}  # ONNX source -> (layout, Variable)

    def record(self, source: str, layout: Layout, sym) -> None:
        """`sym` is weight `source`'s Variable, holding it in `layout` (the first reader's)."""
        self.canonical.setdefault(source, (layout, sym))

    def view(self, source: str, weight: np.ndarray, want: Layout, op):
        """Weight `source` in layout `want`, as ops (``op(op_name, x, suffix=..., **attrs)``)
        on its canonical Variable; None when the weight has no Variable yet (the caller makes
        one and records it)."""
        if source not in self.canonical:
            return None
        have, sym = self.canonical[source]
        if have == want:
            return sym
        # back to the weight's own layout, then on to the one wanted
        if have == ("T",):
            sym = op("transpose", sym, axes=(1, 0), suffix="weight")
        elif have[0] == "reshape":
            sym = op("Reshape", sym, shape=tuple(int(d) for d in weight.shape), suffix="weight")
        if want == ("id",):
            return sym
        if want == ("T",):
            return op("transpose", sym, axes=(1, 0), suffix="weight_T")
        return op("Reshape", sym, shape=tuple(want[1]), suffix="weight_reshape")
