"""Activation (relu, sigmoid, tanh, softrelu, softsign) and its backward op."""
from __future__ import annotations

import numpy as np

from .registry import OpDef, Param, out_array, register
from .tdl_helpers import elementwise

_KINDS = ("relu", "sigmoid", "tanh", "softrelu", "softsign")


def act(kind, x, xp=np, out=None):
    """The activation `kind` of x with array module `xp` (numpy, or cupy on a GPU); with
    `out` (an array of x's shape and dtype, possibly x itself) the result is written there,
    computed by the same operations in the same order."""
    if out is not None:
        return _act_into(kind, x, out)
    if kind == "relu":
        return xp.maximum(x, 0)
    if kind == "sigmoid":
        return 1.0 / (1.0 + xp.exp(-x))
    if kind == "tanh":
        return xp.tanh(x)
    if kind == "softrelu":
        return xp.logaddexp(0, x)
    return x / (1.0 + xp.abs(x))


def _act_into(kind, x, out):
    if kind == "relu":
        return np.maximum(x, 0, out=out)
    if kind == "sigmoid":
        t = np.negative(x, out=out)
        np.exp(t, out=t)
        np.add(1.0, t, out=t)
        return np.divide(1.0, t, out=t)
    if kind == "tanh":
        return np.tanh(x, out=out)
    if kind == "softrelu":
        return np.logaddexp(0, x, out=out)
    # softsign reads x again after 1 + |x|: a buffer that is x itself needs a temporary
    t = np.abs(x) if np.may_share_memory(out, x) else np.abs(x, out=out)
    np.add(1.0, t, out=t)
    return np.divide(x, t, out=out)


def act_grad(kind, y, dy, xp=np, out=None):
    """Gradient from the output y alone (as MXNet's backward: the input need not be kept, so
    the forward can overwrite it in place). With `out` (possibly y or dy itself) the result
    is written there, by the same operations in the same order."""
    if out is not None:
        return _act_grad_into(kind, y, dy, out)
    if kind == "relu":
        return dy * (y > 0)
    if kind == "sigmoid":
        return dy * y * (1 - y)
    if kind == "tanh":
        return dy * (1 - y * y)
    if kind == "softrelu":  # y = log(1 + e^x): dy/dx = sigmoid(x) = 1 - e^-y
        return dy * -xp.expm1(-y)
    return dy * xp.square(1.0 - xp.abs(y))  # softsign: 1 / (1 + |x|)^2 = (1 - |y|)^2


def _act_grad_into(kind, y, dy, out):
    if kind == "relu":
        return np.multiply(dy, y > 0, out=out)
    if kind == "sigmoid":
        t = np.subtract(1, y)
        np.multiply(dy, y, out=out)
        return np.multiply(out, t, out=out)
    # the factor of dy goes into `out` unless out is dy, which the last product still reads
    t = np.empty_like(out) if np.may_share_memory(out, dy) else out
    if kind == "tanh":
        np.multiply(y, y, out=t)
        np.subtract(1, t, out=t)
    elif kind == "softrelu":
        np.negative(y, out=t)
        np.expm1(t, out=t)
        np.negative(t, out=t)
    else:
        np.abs(y, out=t)
        np.subtract(1.0, t, out=t)
        np.square(t, out=t)
    return np.multiply(dy, t, out=out)


def _act_out(ctx, ins):
    """ctx's buffer for the output when every input has one float dtype (else the plain
    expression's promotion and cast decide the bits), else None."""
    x = ins[0]
    if x.dtype.kind != "f" or any(i.dtype != x.dtype for i in ins):
        return None
    return out_array(ctx, 0, x.shape, x.dtype)


def _same_shape(attrs, s):
    return [s[0]], [s[0]]


register(OpDef(
    name="Activation",
    params={"act_type": Param("str", required=True, choices=_KINDS)},
    infer_shape=_same_shape,
    forward=lambda attrs, ins, ctx: [act(attrs["act_type"], ins[0], ctx.xp or np, _act_out(ctx, ins))
                                     .astype(ins[0].dtype, copy=False)],
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
    forward=lambda attrs, ins, ctx: [act_grad(attrs["act_type"], ins[1], ins[0], ctx.xp or np, _act_out(ctx, ins))
                                     .astype(ins[0].dtype, copy=False)],
    tdl=lambda attrs, i, o: elementwise(i, o[0], "dact", ["dy", "output"]),
    elementwise=True,
))
