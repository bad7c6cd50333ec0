"""where(condition, x, y): x where condition is nonzero, else y, with NumPy broadcasting of
all three. The output has x's dtype. Gradients flow to x and y (dy masked by the condition,
then summed over the dims broadcasting expanded); the condition gets none."""
from __future__ import annotations

import numpy as np

from ..errors import Error
from ._ew_util import broadcast_shape, cast, fmt, multi_elementwise
from .broadcast_binary import reduce_grad
from .registry import OpDef, Param, register

_NAMES = ["condition", "x", "y"]


def _infer(attrs, in_shapes):
    if any(s is None for s in in_shapes):
        return list(in_shapes), [None]  # broadcasting cannot deduce a missing operand
    try:
        out = broadcast_shape("where", broadcast_shape("where", in_shapes[0], in_shapes[1]), in_shapes[2])
    except Error:
        shown = ", ".join(f"{n} {fmt(s)}" for n, s in zip(_NAMES, in_shapes))
        raise Error(f"where: shapes {shown} cannot be broadcast together") from None
    return list(in_shapes), [out]


def _infer_type(attrs, in_dtypes):
    cond, x, y = in_dtypes
    if x is not None and y is not None and x != y:
        raise Error(f"where: x has dtype {x} but y has dtype {y}; they must match")
    value = x or y
    return [cond or value, value, value], [value or "float32"]


def _gradient(ctx):
    dy, cond = ctx.out_grads[0], ctx.inputs[0]
    gx = ctx.op("_backward_where", dy, cond, branch="x")
    gy = ctx.op("_backward_where", dy, cond, branch="y")
    return [None, reduce_grad(ctx, gx, 1), reduce_grad(ctx, gy, 2)]


register(OpDef(
    name="where",
    arguments=lambda attrs: list(_NAMES),
    infer_shape=_infer,
    infer_type=_infer_type,
    forward=lambda attrs, ins, ctx: [cast(np.where(ins[0] != 0, ins[1], ins[2]), ins[1])],
    gradient=_gradient,
    tdl=lambda attrs, i, o: multi_elementwise(i, o[0], ["where"], _NAMES, ["out"]),
    doc="x where condition is nonzero, else y (NumPy broadcasting of all three; x's dtype).",
))


def _backward_infer(attrs, in_shapes):
    dy, cond = in_shapes
    if dy is not None and cond is not None and broadcast_shape("_backward_where", dy, cond) != tuple(dy):
        raise Error(f"_backward_where: condition of shape {fmt(cond)} does not broadcast to dy's shape {fmt(dy)}")
    return [dy, cond], [dy]


def _backward_forward(attrs, ins, ctx):
    dy, cond = ins
    keep = (cond != 0) if attrs["branch"] == "x" else (cond == 0)
    return [cast(np.where(keep, dy, 0), dy)]


register(OpDef(
    name="_backward_where",
    params={"branch": Param("str", required=True, choices=("x", "y"))},
    arguments=lambda attrs: ["dy", "condition"],
    infer_shape=_backward_infer,
    infer_type=lambda attrs, t: (list(t), [t[0] or "float32"]),
    forward=_backward_forward,
    tdl=lambda attrs, i, o: multi_elementwise(i, o[0], [f"where_{attrs['branch']}"], ["dy", "condition"], ["out"]),
    doc="dy where the condition selects `branch` (x: nonzero, y: zero), else 0; dy's shape.",
))
