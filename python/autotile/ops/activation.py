"""Activation (relu, sigmoid, tanh, softrelu, softsign) and its backward op."""
from __future__ import annotations

import numpy as np

from .registry import OpDef, Param, register
from .tdl_helpers import elementwise

_KINDS = ("relu", "sigmoid", "tanh", "softrelu", "softsign")


def act(kind, x, xp=np):
    """The activation `kind` of x with array module `xp` (numpy, or cupy on a GPU)."""
    if kind == "relu":
        return xp.maximum(x, 0)
    if kind == "sigmoid":
        return 1.0 / (1.0 + xp.exp(-x))
    if kind == "tanh":
        return xp.tanh(x)
    if kind == "softrelu":
        return xp.logaddexp(0, x)
    return x / (1.0 + xp.abs(x))


def act_grad(kind, y, dy, xp=np):
    """Gradient from the output y alone (as MXNet's backward: the input need not be kept, so
    the forward can overwrite it in place)."""
    if kind == "relu":
        return dy * (y > 0)
    if kind == "sigmoid":
        return dy * y * (1 - y)
    if kind == "tanh":
        return dy * (1 - y * y)
    if kind == "softrelu":  # y = log(1 + e^x): dy/dx = sigmoid(x) = 1 - e^-y
        return dy * -xp.expm1(-y)
    return dy * xp.square(1.0 - xp.abs(y))  # softsign: 1 / (1 + |x|)^2 = (1 - |y|)^2


def _same_shape(attrs, s):
    return [s[0]], [s[0]]


register(OpDef(
    name="Activation",
    params={"act_type": Param("str", required=True, choices=_KINDS)},
    infer_shape=_same_shape,
    forward=lambda attrs, ins, ctx: [act(attrs["act_type"], ins[0], ctx.xp or np).astype(ins[0].dtype, copy=False)],
    gradient=lambda ctx: [ctx.op("_backward_Activation", ctx.out_grads[0], ctx.outputs[0],
                                 act_type=ctx.attrs["act_type"])],
    tdl=lambda attrs, i, o: elementwise(i, o[0], attrs["act_type"], ["data"]),
    elementwise=True,
    doc="Element-wise activation function.",
))

register(OpDef(
    name="_backward_Activation",
    params={"act_type": Param("str", required=True, choices=_KINDS)},
    arguments=lambda attrs: ["dy", "output"],
    infer_shape=lambda attrs, s: ([s[0], s[0]], [s[0]]),
    forward=lambda attrs, ins, ctx: [act_grad(attrs["act_type"], ins[1], ins[0], ctx.xp or np)
                                     .astype(ins[0].dtype, copy=False)],
    tdl=lambda attrs, i, o: elementwise(i, o[0], "dact", ["dy", "output"]),
    elementwise=True,
))
