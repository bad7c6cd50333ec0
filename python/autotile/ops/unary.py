"""Standalone element-wise unary ops (MXNet 1.x names): negative, exp, log, sqrt, square, abs,
sigmoid, tanh, relu, clip, zeros_like, ones_like, _copy/identity, BlockGrad/stop_gradient,
and the `_backward_<op>` ops their gradients use."""
from __future__ import annotations

import numpy as np

from ._ew_util import cast, same_shape
from .registry import OpDef, Param, alias, register
from .tdl_helpers import elementwise


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # no overflow for large |x|


# name -> (forward kernel, gradient builder (ctx, dy, x, y) -> Symbol or None)
_UNARY = {
    "negative": (np.negative, lambda ctx, dy, x, y: ctx.op("negative", dy)),
    "exp": (np.exp, lambda ctx, dy, x, y: ctx.op("elemwise_mul", dy, y)),
    "log": (np.log, lambda ctx, dy, x, y: ctx.op("elemwise_div", dy, x)),
    "sqrt": (np.sqrt, lambda ctx, dy, x, y: ctx.op("_backward_sqrt", dy, y)),
    "square": (np.square, lambda ctx, dy, x, y: ctx.op("_backward_square", dy, x)),
    "abs": (np.abs, lambda ctx, dy, x, y: ctx.op("_backward_abs", dy, x)),
    "sigmoid": (_sigmoid, lambda ctx, dy, x, y: ctx.op("_backward_sigmoid", dy, y)),
    "tanh": (np.tanh, lambda ctx, dy, x, y: ctx.op("_backward_tanh", dy, y)),
    "relu": (lambda x: np.maximum(x, 0), lambda ctx, dy, x, y: ctx.op("_backward_relu", dy, y)),
    "reciprocal": (np.reciprocal, lambda ctx, dy, x, y: ctx.op("_backward_reciprocal", dy, x)),
    # no gradient: the input's values never reach the output (BlockGrad stops it on purpose)
    "zeros_like": (np.zeros_like, None),
    "ones_like": (np.ones_like, None),
    "_copy": (lambda x: x.copy(), lambda ctx, dy, x, y: dy),
    "BlockGrad": (lambda x: x.copy(), None),
}


def _unary_shape(name):
    return lambda attrs, s: same_shape(name, ["data"], s)


def _make_gradient(grad):
    if grad is None:
        return lambda ctx: [None]
    return lambda ctx: [grad(ctx, ctx.out_grads[0], ctx.inputs[0], ctx.outputs[0])]


for _name, (_fn, _grad) in _UNARY.items():
    register(OpDef(
        name=_name,
        infer_shape=_unary_shape(_name),
        forward=(lambda fn: lambda attrs, ins, ctx: [cast(fn(ins[0]), ins[0])])(_fn),
        gradient=_make_gradient(_grad),
        tdl=(lambda name: lambda attrs, i, o: elementwise(i, o[0], name.strip("_"), ["data"]))(_name),
        elementwise=True,
        doc=f"Element-wise {_name.strip('_')} of the input (MXNet's {_name}).",
    ))

alias("identity", "_copy")
alias("stop_gradient", "BlockGrad")

# ----------------------------------------------------------------------------- clip

_CLIP_PARAMS = {"a_min": Param("float", required=True), "a_max": Param("float", required=True)}

register(OpDef(
    name="clip",
    params=_CLIP_PARAMS,
    infer_shape=_unary_shape("clip"),
    forward=lambda attrs, ins, ctx: [cast(np.minimum(np.maximum(ins[0], attrs["a_min"]), attrs["a_max"]), ins[0])],
    gradient=lambda ctx: [ctx.op("_backward_clip", ctx.out_grads[0], ctx.inputs[0],
                                 a_min=ctx.attrs["a_min"], a_max=ctx.attrs["a_max"])],
    tdl=lambda attrs, i, o: elementwise(i, o[0], "clip", ["data"]),
    elementwise=True,
    doc="clip(x, a_min, a_max) = max(min(x, a_max), a_min), element-wise.",
))

# ----------------------------------------------------------------------------- backward ops

# name -> (second input name, kernel (dy, v, attrs) -> dx)
_BACKWARD = {
    "_backward_sqrt": ("output", lambda dy, y, a: dy / (2.0 * y)),
    "_backward_square": ("data", lambda dy, x, a: 2.0 * x * dy),
    "_backward_abs": ("data", lambda dy, x, a: dy * np.sign(x)),
    "_backward_sigmoid": ("output", lambda dy, y, a: dy * y * (1.0 - y)),
    "_backward_tanh": ("output", lambda dy, y, a: dy * (1.0 - y * y)),
    "_backward_relu": ("output", lambda dy, y, a: dy * (y > 0)),
    "_backward_reciprocal": ("data", lambda dy, x, a: -dy / (x * x)),
    # MXNet passes the gradient where a_min <= x <= a_max (bounds included)
    "_backward_clip": ("data", lambda dy, x, a: dy * ((x >= a["a_min"]) & (x <= a["a_max"]))),
}

for _name, (_second, _kernel) in _BACKWARD.items():
    register(OpDef(
        name=_name,
        params=_CLIP_PARAMS if _name == "_backward_clip" else {},
        arguments=(lambda second: lambda attrs: ["dy", second])(_second),
        infer_shape=(lambda name, second: lambda attrs, s: same_shape(name, ["dy", second], s))(_name, _second),
        forward=(lambda k: lambda attrs, ins, ctx: [cast(k(ins[0], ins[1], attrs), ins[0])])(_kernel),
        tdl=(lambda name, second: lambda attrs, i, o: elementwise(i, o[0], name[1:], ["dy", second]))(_name, _second),
        elementwise=True,
    ))
