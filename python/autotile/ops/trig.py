"""Element-wise sine and cosine (ONNX Sin / Cos: the sinusoidal timestep embeddings of
diffusion UNets and transformers' position encodings), and the `_backward_<op>` ops their
gradients use: d sin(x) = cos(x) dy, d cos(x) = -sin(x) dy, from dy and the forward input."""
from __future__ import annotations

import numpy as np

from ._ew_util import cast, same_shape
from .registry import OpDef, register
from .tdl_helpers import elementwise

# name -> (f, f', doc)
_TRIG = {
    "sin": (np.sin, np.cos, "Element-wise sine of the input (radians)."),
    "cos": (np.cos, lambda x: -np.sin(x), "Element-wise cosine of the input (radians)."),
}


def _gradient(name):
    return lambda ctx: [ctx.op(f"_backward_{name}", ctx.out_grads[0], ctx.inputs[0])]


for _name, (_fn, _deriv, _doc) in _TRIG.items():
    register(OpDef(
        name=_name,
        infer_shape=(lambda name: lambda attrs, s: same_shape(name, ["data"], s))(_name),
        forward=(lambda fn: lambda attrs, ins, ctx: [cast(fn(ins[0]), ins[0])])(_fn),
        gradient=_gradient(_name),
        tdl=(lambda name: lambda attrs, i, o: elementwise(i, o[0], name, ["data"]))(_name),
        elementwise=True,
        doc=_doc,
    ))
    _bwd = f"_backward_{_name}"
    register(OpDef(
        name=_bwd,
        arguments=lambda attrs: ["dy", "data"],
        infer_shape=(lambda name: lambda attrs, s: same_shape(name, ["dy", "data"], s))(_bwd),
        forward=(lambda d: lambda attrs, ins, ctx: [cast(ins[0] * d(ins[1]), ins[0])])(_deriv),
        tdl=(lambda name: lambda attrs, i, o: elementwise(i, o[0], name[1:], ["dy", "data"]))(_bwd),
        elementwise=True,
        doc=f"Gradient of {_name}: dy * {_name}'(data).",
    ))
