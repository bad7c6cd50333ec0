"""broadcast_mod: remainder of lhs / rhs with NumPy broadcasting. fmod=False (default) is
Python/NumPy `mod` (the result takes the sign of rhs: a - floor(a / b) * b); fmod=True is C
fmod (sign of lhs: a - trunc(a / b) * b). Gradient (away from the jumps): d/da = 1,
d/db = -floor(a / b) (or -trunc(a / b)), each summed over the dims broadcasting expanded."""
from __future__ import annotations

import numpy as np

from ._ew_util import cast, multi_elementwise
from .broadcast_binary import _backward_shape, reduce_grad
from .compare import binary_tdl, broadcast_infer
from .registry import OpDef, Param, register

_PARAMS = {"fmod": Param("bool", False)}


def _mod(a, b, fmod):
    return np.fmod(a, b) if fmod else np.mod(a, b)


def _gradient(ctx):
    dy = ctx.out_grads[0]
    rhs = ctx.op("_backward_broadcast_mod_rhs", dy, ctx.inputs[0], ctx.inputs[1], fmod=ctx.attrs["fmod"])
    return [reduce_grad(ctx, dy, 0), reduce_grad(ctx, rhs, 1)]


register(OpDef(
    name="broadcast_mod",
    params=_PARAMS,
    arguments=lambda attrs: ["lhs", "rhs"],
    infer_shape=broadcast_infer("broadcast_mod"),
    forward=lambda attrs, ins, ctx: [cast(_mod(ins[0], ins[1], attrs["fmod"]), ins[0])],
    gradient=_gradient,
    tdl=binary_tdl("mod"),
    doc="lhs mod rhs with NumPy broadcasting (fmod=True: C fmod, the sign of lhs).",
))


def _rhs_grad(attrs, ins, ctx):
    dy, a, b = ins
    q = a / b
    q = np.trunc(q) if attrs["fmod"] else np.floor(q)
    return [cast(np.broadcast_to(-dy * q, dy.shape), dy)]


register(OpDef(
    name="_backward_broadcast_mod_rhs",
    params=_PARAMS,
    arguments=lambda attrs: ["dy", "lhs", "rhs"],
    infer_shape=_backward_shape("_backward_broadcast_mod_rhs"),
    forward=_rhs_grad,
    tdl=lambda attrs, i, o: multi_elementwise(i, o[0], ["backward_broadcast_mod_rhs"], ["dy", "lhs", "rhs"],
                                              ["out"]),
    doc="-dy * floor(lhs / rhs) (trunc with fmod=True), of the broadcast shape (before reduction).",
))
