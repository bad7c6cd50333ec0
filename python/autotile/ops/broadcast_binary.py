"""Broadcasting binary ops (broadcast_add/sub/mul/div/maximum/minimum/power, MXNet 1.x) and
their gradients: a full-shape element-wise backward op where one is needed, then
`_backward_broadcast_reduce`, which sums over the dims broadcasting expanded."""
from __future__ import annotations

import numpy as np

from ..errors import Error
from ._ew_util import broadcast_shape, cast, fmt, multi_elementwise, reduce_tdl, reduce_to
from .registry import OpDef, Param, alias, register


def _binary_shape(name):
    def infer(attrs, in_shapes):
        lhs, rhs = in_shapes
        if lhs is None or rhs is None:
            return [lhs, rhs], [None]  # broadcasting cannot deduce a missing operand
        return [lhs, rhs], [broadcast_shape(name, lhs, rhs)]

    return infer


def _tdl(fn):
    def tdl(attrs, in_shapes, out_shapes):
        return multi_elementwise(in_shapes, out_shapes[0], [fn], ["lhs", "rhs"], ["out"])

    return tdl


def reduce_grad(ctx, g, k):
    """`g` (of the output's shape) summed down to input k's shape; `g` itself when no dim of
    input k was broadcast. Uses the shapes autodiff passes in ctx; without them the reduce
    op reads its target shape from the input itself (`like`)."""
    in_shapes = ctx.in_shapes or []
    out_shapes = ctx.out_shapes or []
    if k < len(in_shapes) and in_shapes[k] is not None and out_shapes and out_shapes[0] is not None:
        shape = tuple(in_shapes[k])
        if shape == tuple(out_shapes[0]):
            return g
        return ctx.op("_backward_broadcast_reduce", g, shape=shape)
    return ctx.op("_backward_broadcast_reduce", g, ctx.inputs[k])


# name -> (kernel, gradient(ctx, dy, lhs, rhs) -> [full-shape lhs grad, full-shape rhs grad])
_BROADCAST = {
    "broadcast_add": (np.add, lambda ctx, dy, a, b: [dy, dy]),
    "broadcast_sub": (np.subtract, lambda ctx, dy, a, b: [dy, ctx.op("negative", dy)]),
    "broadcast_mul": (np.multiply, lambda ctx, dy, a, b: [ctx.op("broadcast_mul", dy, b),
                                                          ctx.op("broadcast_mul", dy, a)]),
    "broadcast_div": (np.divide, lambda ctx, dy, a, b: [ctx.op("broadcast_div", dy, b),
                                                        ctx.op("_backward_broadcast_div_rhs", dy, a, b)]),
    "broadcast_maximum": (np.maximum, lambda ctx, dy, a, b: [ctx.op("_backward_broadcast_maximum_lhs", dy, a, b),
                                                             ctx.op("_backward_broadcast_maximum_rhs", dy, a, b)]),
    "broadcast_minimum": (np.minimum, lambda ctx, dy, a, b: [ctx.op("_backward_broadcast_minimum_lhs", dy, a, b),
                                                             ctx.op("_backward_broadcast_minimum_rhs", dy, a, b)]),
    "broadcast_power": (np.power, lambda ctx, dy, a, b: [ctx.op("_backward_broadcast_power_lhs", dy, a, b),
                                                         ctx.op("_backward_broadcast_power_rhs", dy, a, b)]),
}


def _gradient(full):
    def gradient(ctx):
        grads = full(ctx, ctx.out_grads[0], ctx.inputs[0], ctx.inputs[1])
        return [reduce_grad(ctx, g, k) for k, g in enumerate(grads)]

    return gradient


for _name, (_fn, _full) in _BROADCAST.items():
    register(OpDef(
        name=_name,
        arguments=lambda attrs: ["lhs", "rhs"],
        infer_shape=_binary_shape(_name),
        forward=(lambda fn: lambda attrs, ins, ctx: [cast(fn(ins[0], ins[1]), ins[0])])(_fn),
        gradient=_gradient(_full),
        tdl=_tdl(_name[len("broadcast_"):]),
        doc=f"Element-wise {_name[len('broadcast_'):]} with NumPy broadcasting of the two operands.",
    ))
alias("broadcast_plus", "broadcast_add")
alias("broadcast_minus", "broadcast_sub")

# ----------------------------------------------------------------------------- backward ops

# Output: the gradient before reduction, of the broadcast (output) shape. MXNet sends ties of
# maximum/minimum to the lhs.
_BACKWARD = {
    "_backward_broadcast_div_rhs": lambda dy, a, b: -dy * a / (b * b),
    "_backward_broadcast_maximum_lhs": lambda dy, a, b: dy * (a >= b),
    "_backward_broadcast_maximum_rhs": lambda dy, a, b: dy * (a < b),
    "_backward_broadcast_minimum_lhs": lambda dy, a, b: dy * (a <= b),
    "_backward_broadcast_minimum_rhs": lambda dy, a, b: dy * (a > b),
    "_backward_broadcast_power_lhs": lambda dy, a, b: dy * b * np.power(a, b - 1.0),
    "_backward_broadcast_power_rhs": lambda dy, a, b: dy * np.power(a, b) * np.log(a),
}


def _backward_shape(name):
    def infer(attrs, in_shapes):
        dy, lhs, rhs = in_shapes
        if lhs is None or rhs is None:
            return [dy, lhs, rhs], [None]
        out = broadcast_shape(name, lhs, rhs)
        if dy is not None and tuple(dy) != out:
            raise Error(f"{name}: dy has shape {fmt(dy)} but the operands broadcast to {fmt(out)}")
        return [out, lhs, rhs], [out]

    return infer


def _backward_forward(kernel):
    def forward(attrs, ins, ctx):
        dy, a, b = ins
        return [cast(np.broadcast_to(kernel(dy, a, b), dy.shape), dy)]

    return forward


for _name, _kernel in _BACKWARD.items():
    register(OpDef(
        name=_name,
        arguments=lambda attrs: ["dy", "lhs", "rhs"],
        infer_shape=_backward_shape(_name),
        forward=_backward_forward(_kernel),
        tdl=(lambda name: lambda attrs, i, o: multi_elementwise(i, o[0], [name[1:]], ["dy", "lhs", "rhs"],
                                                                ["out"]))(_name),
    ))

# ----------------------------------------------------------------------------- reduction


def _reduce_args(attrs):
    return ["dy"] if attrs["shape"] is not None else ["dy", "like"]


def _reduce_shape(attrs, in_shapes):
    dy = in_shapes[0]
    target = attrs["shape"] if attrs["shape"] is not None else in_shapes[1]
    if dy is None or target is None:
        return list(in_shapes), [target]
    target = tuple(target)
    if len(target) > len(dy) or broadcast_shape("_backward_broadcast_reduce", dy, target) != tuple(dy):
        raise Error(f"_backward_broadcast_reduce: a tensor of shape {fmt(dy)} is not a broadcast of "
                    f"shape {fmt(target)}")
    return list(in_shapes), [target]


register(OpDef(
    name="_backward_broadcast_reduce",
    params={"shape": Param("optional_shape", None)},
    arguments=_reduce_args,
    infer_shape=_reduce_shape,
    forward=lambda attrs, ins, ctx: [cast(reduce_to(ins[0], attrs["shape"] if attrs["shape"] is not None
                                                    else ins[1].shape), ins[0])],
    tdl=lambda attrs, i, o: reduce_tdl(i[0], o[0], _reduce_args(attrs)),
    doc="Sums dy over the dims that broadcasting expanded, down to `shape` (or the shape of `like`).",
))
