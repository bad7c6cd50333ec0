"""Element-wise binary ops on same-shape inputs (elemwise_add/sub/mul/div, MXNet's `_Plus`...)
and the variadic sum add_n / ElementWiseSum."""
from __future__ import annotations

import numpy as np

from ..errors import Error
from ._ew_util import cast, same_shape
from .registry import OpDef, Param, alias, out_array, register
from .tdl_helpers import elementwise

_BINARY = {
    "elemwise_add": (np.add, "add", lambda ctx, dy, a, b: [dy, dy]),
    "elemwise_sub": (np.subtract, "sub", lambda ctx, dy, a, b: [dy, ctx.op("negative", dy)]),
    "elemwise_mul": (np.multiply, "mul", lambda ctx, dy, a, b: [ctx.op("elemwise_mul", dy, b),
                                                                 ctx.op("elemwise_mul", dy, a)]),
    "elemwise_div": (np.divide, "div", lambda ctx, dy, a, b: [ctx.op("elemwise_div", dy, b),
                                                               ctx.op("_backward_div_rhs", dy, a, b)]),
}

_ALIASES = {"elemwise_add": ["_Plus", "_plus", "_add"], "elemwise_sub": ["_Minus", "_minus", "_sub"],
            "elemwise_mul": ["_Mul", "_mul"], "elemwise_div": ["_Div", "_div"]}


def _binary_shape(name):
    return lambda attrs, s: same_shape(name, ["lhs", "rhs"], s)


def _check_same(name, arrays):
    """Kernels never broadcast silently (the executor names the node on this ValueError)."""
    for x in arrays[1:]:
        if x.shape != arrays[0].shape:
            raise ValueError(f"{name}: inputs of shapes {arrays[0].shape} and {x.shape} differ")


def _same_float_out(ctx, ins, reads_after=()):
    """ctx's output buffer when all inputs share one float dtype (the plain expression's
    result dtype, so writing there changes no bits), else None."""
    x = ins[0]
    if x.dtype.kind != "f" or any(i.dtype != x.dtype for i in ins):
        return None
    return out_array(ctx, 0, x.shape, x.dtype, reads_after=reads_after)


def _binary_forward(name, fn):
    def forward(attrs, ins, ctx):
        _check_same(name, ins)
        out = _same_float_out(ctx, ins)
        if out is not None:
            return [fn(ins[0], ins[1], out=out)]
        return [cast(fn(ins[0], ins[1]), ins[0])]

    return forward


for _name, (_fn, _tag, _grad) in _BINARY.items():
    register(OpDef(
        name=_name,
        arguments=lambda attrs: ["lhs", "rhs"],
        infer_shape=_binary_shape(_name),
        forward=_binary_forward(_name, _fn),
        gradient=(lambda g: lambda ctx: g(ctx, ctx.out_grads[0], ctx.inputs[0], ctx.inputs[1]))(_grad),
        tdl=(lambda tag: lambda attrs, i, o: elementwise(i, o[0], tag, ["lhs", "rhs"]))(_tag),
        elementwise=True,
        doc=f"Element-wise {_tag} of two arrays of the same shape.",
    ))
    for _other in _ALIASES[_name]:
        alias(_other, _name)

# d(a / b)/db = -a / b^2
register(OpDef(
    name="_backward_div_rhs",
    arguments=lambda attrs: ["dy", "lhs", "rhs"],
    infer_shape=lambda attrs, s: same_shape("_backward_div_rhs", ["dy", "lhs", "rhs"], s),
    forward=lambda attrs, ins, ctx: [cast(-ins[0] * ins[1] / (ins[2] * ins[2]), ins[0])],
    tdl=lambda attrs, i, o: elementwise(i, o[0], "div_rhs_grad", ["dy", "lhs", "rhs"]),
    elementwise=True,
))

# ----------------------------------------------------------------------------- add_n


def _add_n_args(attrs):
    return [f"arg{k}" for k in range(attrs["num_args"])]


def _add_n_shape(attrs, in_shapes):
    if attrs["num_args"] < 1:
        raise Error(f"add_n: num_args must be at least 1, got {attrs['num_args']}")
    return same_shape("add_n", _add_n_args(attrs), in_shapes)


def _add_n_forward(attrs, ins, ctx):
    _check_same("add_n", ins)
    # ins[0] + ins[1] first, then += the rest, as the sum below: an output buffer that is one
    # of the first two is safe; one of the rest would be overwritten before it is added
    out = _same_float_out(ctx, ins, reads_after=ins[2:])
    if out is not None:
        if len(ins) == 1:
            np.copyto(out, ins[0])
            return [out]
        np.add(ins[0], ins[1], out=out)
        for x in ins[2:]:
            out += x
        return [out]
    total = ins[0].copy()
    for x in ins[1:]:
        total += x
    return [total]


register(OpDef(
    name="add_n",
    params={"num_args": Param("int", required=True)},
    arguments=_add_n_args,
    infer_shape=_add_n_shape,
    forward=_add_n_forward,
    gradient=lambda ctx: [ctx.out_grads[0]] * len(ctx.inputs),
    tdl=lambda attrs, i, o: elementwise(i, o[0], "add", _add_n_args(attrs)),
    elementwise=True,
    variadic="num_args",
    doc="Sum of all inputs (same shapes), element-wise.",
))
alias("ElementWiseSum", "add_n")
