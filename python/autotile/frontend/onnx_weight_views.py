"""One trainable ONNX initializer, one Variable, whatever the orientation of its readers.

Converters derive a weight's layout from the node that reads it: ``MatMul`` wants B^T as a
FullyConnected weight, ``Gemm(transB=1)`` reads B as stored, a converter may reshape a scale
to broadcast. Each derived value used to become its own Variable (``W`` and ``W_T``), so a
weight read in two orientations trained as two tensors, each on part of the gradient
(issue 31). Here the first reader's layout of a weight is its Variable (the *canonical*
one); a later reader that wants the same values in another layout (the weight itself, its
transpose, or a reshape of it) gets an op on that Variable (transpose / Reshape), so the
gradients of all readers sum into one tensor. A derived value that is a relayout times a
scalar attribute of its reader (Gemm's alpha on B, beta on C) is the relayout times that scalar
at run time (``_mul_scalar`` on the Variable): a scaled copy would be the tensor that trains,
on the copy's gradient, and an SGD step would move alpha * W. Only constants (not weights) are
still folded into copies.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np

#: a relayout of weight W: ("id",), ("T",) for the 2-D transpose, ("reshape", shape), and
#: ("bcast", shape) for a one-element W broadcast (never the layout a Variable holds)
Layout = Tuple


def _layouts(value: np.ndarray, weight: np.ndarray):
    """The relayouts of `weight` that have `value`'s shape."""
    shape = tuple(int(d) for d in value.shape)
    if value.shape == weight.shape:
        yield ("id",)
    if weight.ndim == 2 and value.shape == weight.shape[::-1]:
        yield ("T",)
    if value.size == weight.size and value.shape != weight.shape:
        yield ("reshape", shape)
    if weight.size == 1 and value.size > 1:  # a scalar bias broadcast to the output's width
        yield ("bcast", shape)


def scaled_layout_of(value: np.ndarray, weight: np.ndarray, scales) -> Optional[Tuple[Layout, float]]:
    """(layout, scale) with `value` equal to ``relayout(weight, layout) * scale`` computed in
    `value`'s dtype, exactly; scale 1.0 is tried first, then each of `scales`. None otherwise."""
    if value.dtype != weight.dtype:
        return None
    tries = [1.0]
    if np.issubdtype(value.dtype, np.floating):
        tries += [float(s) for s in scales if np.isfinite(s) and float(s) not in (0.0, 1.0)]
    for layout in _layouts(value, weight):
        base = relayout(weight, layout)
        for s in tries:
            with np.errstate(all="ignore"):
                if np.array_equal(value, base if s == 1.0 else (base * s).astype(value.dtype)):
                    return layout, s
    return None


def relayout(weight: np.ndarray, layout: Layout) -> np.ndarray:
    """`weight` in `layout` (as a NumPy value)."""
    if layout == ("id",):
        return weight
    if layout == ("T",):
        return np.ascontiguousarray(weight.T)
    if layout[0] == "bcast":
        return np.broadcast_to(weight.reshape(-1), layout[1])
    return weight.reshape(layout[1])


class WeightViews:
    """The canonical Variable of each weight source and the layout it stores."""

    def __init__(self):
        self.canonical: Dict[str, Tuple[Layout, object]] = {}  # ONNX source -> (layout, Variable)

    def record(self, source: str, layout: Layout, sym) -> None:
        """`sym` is weight `source`'s Variable, holding it in `layout` (the first reader's)."""
        self.canonical.setdefault(source, (layout, sym))

    def derive(self, source: str, value: np.ndarray, weight: np.ndarray, scales, op, make):
        """`value`, a reader's derivation of weight `source`, as ops on the weight's one Variable:
        the relayout, then ``_mul_scalar`` by the reader's scale (Gemm's alpha) at run time.
        ``make(layout, scale)`` creates the Variable (holding the unscaled relayout) when the
        weight has none yet. None when `value` is no scaled relayout of the weight."""
        found = scaled_layout_of(value, weight, scales)
        if found is None:
            return None
        layout, scale = found
        sym = self.view(source, weight, layout, op)
        if sym is None:  # the first reader: its layout is the Variable's (a broadcast is not)
            have = ("id",) if layout[0] == "bcast" else layout
            self.record(source, have, make(have, scale))
            sym = self.view(source, weight, layout, op)
        if scale != 1.0:
            sym = op("_mul_scalar", sym, scalar=scale, suffix="weight_scale")
        return sym

    def view(self, source: str, weight: np.ndarray, want: Layout, op):
        """Weight `source` in layout `want`, as ops (``op(op_name, x, suffix=..., **attrs)``)
        on its canonical Variable; None when the weight has no Variable yet (the caller makes
        one and records it)."""
        if source not in self.canonical:
            return None
        have, sym = self.canonical[source]
        if have == want:
            return sym
        if want[0] == "bcast":  # one element: any layout reshapes to all-ones dims
            sym = op("Reshape", sym, shape=(1,) * len(want[1]), suffix="weight_reshape")
            return op("broadcast_to", sym, shape=tuple(want[1]), suffix="weight_bcast")
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
