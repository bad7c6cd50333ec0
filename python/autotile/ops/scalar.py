"""Array-scalar ops (attribute `scalar`), which Symbol arithmetic builds: _plus_scalar,
_minus_scalar, _rminus_scalar, _mul_scalar, _div_scalar, _rdiv_scalar, _power_scalar,
_rpower_scalar, _maximum_scalar, _minimum_scalar, and their backward ops."""
from __future__ import annotations

import numpy as np

from ._ew_util import cast, same_shape
from .registry import OpDef, Param, alias, register
from .tdl_helpers import elementwise

_PARAMS = {
    "scalar": Param("float", 1.0),
    "is_int": Param("bool", True),  # MXNet 1.9: only decides the output dtype of integer arrays
}


def _scalar_op(ctx, name, dy, **extra):
    return ctx.op(name, dy, scalar=ctx.attrs["scalar"], **extra)


# name -> (kernel(x, s), gradient(ctx, dy, x, y) -> Symbol)
_SCALAR = {
    "_plus_scalar": (lambda x, s: x + s, lambda ctx, dy, x, y: dy),
    "_minus_scalar": (lambda x, s: x - s, lambda ctx, dy, x, y: dy),
    "_rminus_scalar": (lambda x, s: s - x, lambda ctx, dy, x, y: ctx.op("negative", dy)),
    "_mul_scalar": (lambda x, s: x * s, lambda ctx, dy, x, y: _scalar_op(ctx, "_mul_scalar", dy)),
    "_div_scalar": (lambda x, s: x / s, lambda ctx, dy, x, y: _scalar_op(ctx, "_div_scalar", dy)),
    "_rdiv_scalar": (lambda x, s: s / x,
                     lambda ctx, dy, x, y: ctx.op("_backward_rdiv_scalar", dy, x, scalar=ctx.attrs["scalar"])),
    "_power_scalar": (lambda x, s: np.power(x, s),
                      lambda ctx, dy, x, y: ctx.op("_backward_power_scalar", dy, x, scalar=ctx.attrs["scalar"])),
    "_rpower_scalar": (lambda x, s: np.power(s, x),
                       lambda ctx, dy, x, y: ctx.op("_backward_rpower_scalar", dy, y, scalar=ctx.attrs["scalar"])),
    "_maximum_scalar": (lambda x, s: np.maximum(x, s),
                        lambda ctx, dy, x, y: ctx.op("_backward_maximum_scalar", dy, x, scalar=ctx.attrs["scalar"])),
    "_minimum_scalar": (lambda x, s: np.minimum(x, s),
                        lambda ctx, dy, x, y: ctx.op("_backward_minimum_scalar", dy, x, scalar=ctx.attrs["scalar"])),
}

_ALIASES = {"_plus_scalar": "_PlusScalar", "_minus_scalar": "_MinusScalar", "_rminus_scalar": "_RMinusScalar",
            "_mul_scalar": "_MulScalar", "_div_scalar": "_DivScalar", "_rdiv_scalar": "_RDivScalar",
            "_power_scalar": "_PowerScalar", "_rpower_scalar": "_RPowerScalar",
            "_maximum_scalar": "_MaximumScalar", "_minimum_scalar": "_MinimumScalar"}

for _name, (_kernel, _grad) in _SCALAR.items():
    register(OpDef(
        name=_name,
        params=_PARAMS,
        infer_shape=(lambda name: lambda attrs, s: same_shape(name, ["data"], s))(_name),
        forward=(lambda k: lambda attrs, ins, ctx: [cast(k(ins[0], attrs["scalar"]), ins[0])])(_kernel),
        gradient=(lambda g: lambda ctx: [g(ctx, ctx.out_grads[0], ctx.inputs[0], ctx.outputs[0])])(_grad),
        tdl=(lambda name: lambda attrs, i, o: elementwise(i, o[0], name.strip("_"), ["data"]))(_name),
        elementwise=True,
        doc=f"Element-wise {_name.strip('_').replace('_', ' ')} with the attribute `scalar`.",
    ))
    alias(_ALIASES[_name], _name)

# ----------------------------------------------------------------------------- backward ops

# name -> (second input, kernel(dy, v, s))
_BACKWARD = {
    "_backward_rdiv_scalar": ("data", lambda dy, x, s: -dy * s / (x * x)),
    "_backward_power_scalar": ("data", lambda dy, x, s: dy * s * np.power(x, s - 1.0)),
    "_backward_rpower_scalar": ("output", lambda dy, y, s: dy * y * np.log(s)),
    # MXNet routes the gradient to x where x >= s (maximum) / x <= s (minimum), ties included
    "_backward_maximum_scalar": ("data", lambda dy, x, s: dy * (x >= s)),
    "_backward_minimum_scalar": ("data", lambda dy, x, s: dy * (x <= s)),
}

for _name, (_second, _kernel) in _BACKWARD.items():
    register(OpDef(
        name=_name,
        params=_PARAMS,
        arguments=(lambda second: lambda attrs: ["dy", second])(_second),
        infer_shape=(lambda name, second: lambda attrs, s: same_shape(name, ["dy", second], s))(_name, _second),
        forward=(lambda k: lambda attrs, ins, ctx: [cast(k(ins[0], ins[1], attrs["scalar"]), ins[0])])(_kernel),
        tdl=(lambda name, second: lambda attrs, i, o: elementwise(i, o[0], name[1:], ["dy", second]))(_name, _second),
        elementwise=True,
    ))
