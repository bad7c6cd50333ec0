"""Piecewise-constant element-wise ops: sign, floor, ceil. Their derivative is zero wherever
it exists, so no gradient flows through them (MXNet's backward gives zeros)."""
from __future__ import annotations

import numpy as np

from ._ew_util import cast, same_shape
from .registry import OpDef, register
from .tdl_helpers import elementwise

_ROUNDING = {
    "sign": (np.sign, "-1, 0 or 1 by the sign of each element (0 for 0)."),
    "floor": (np.floor, "Largest integer not above each element."),
    "ceil": (np.ceil, "Smallest integer not below each element."),
}

for _name, (_fn, _doc) in _ROUNDING.items():
    register(OpDef(
        name=_name,
        infer_shape=(lambda name: lambda attrs, s: same_shape(name, ["data"], s))(_name),
        forward=(lambda fn: lambda attrs, ins, ctx: [cast(fn(ins[0]), ins[0])])(_fn),
        gradient=lambda ctx: [None],
        tdl=(lambda name: lambda attrs, i, o: elementwise(i, o[0], name, ["data"]))(_name),
        elementwise=True,
        doc=_doc,
    ))
