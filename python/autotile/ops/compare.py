"""Broadcasting comparisons (MXNet 1.x): broadcast_equal, broadcast_not_equal,
broadcast_lesser, broadcast_lesser_equal, broadcast_greater, broadcast_greater_equal.
NumPy broadcasting of lhs and rhs; the output has the lhs dtype with values 0/1 (MXNet's
convention, so masks multiply and add like data); no gradient flows through them."""
from __future__ import annotations

import numpy as np

from ._ew_util import broadcast_shape, cast, multi_elementwise
from .registry import OpDef, register


def broadcast_infer(name):
    """Shape rule of a broadcasting binary op: output = NumPy broadcast of lhs and rhs
    (Error naming the op and both shapes when they do not broadcast)."""

    def infer(attrs, in_shapes):
        lhs, rhs = in_shapes
        if lhs is None or rhs is None:
            return [lhs, rhs], [None]  # broadcasting cannot deduce a missing operand
        return [lhs, rhs], [broadcast_shape(name, lhs, rhs)]

    return infer


def binary_tdl(fn):
    """TDL of a broadcasting binary op: out[i...] = fn(lhs[...], rhs[...])."""
    return lambda attrs, i, o: multi_elementwise(i, o[0], [fn], ["lhs", "rhs"], ["out"])


def register_predicates(table, doc):
    """Registers broadcasting binary ops whose 0/1 output takes lhs's dtype (no gradient)."""
    for name, fn in table.items():
        register(OpDef(
            name=name,
            arguments=lambda attrs: ["lhs", "rhs"],
            infer_shape=broadcast_infer(name),
            forward=(lambda fn: lambda attrs, ins, ctx: [cast(fn(ins[0], ins[1]), ins[0])])(fn),
            gradient=lambda ctx: [None, None],
            tdl=binary_tdl(name[len("broadcast_"):]),
            doc=doc.format(name[len("broadcast_"):]),
        ))


register_predicates({
    "broadcast_equal": np.equal,
    "broadcast_not_equal": np.not_equal,
    "broadcast_lesser": np.less,
    "broadcast_lesser_equal": np.less_equal,
    "broadcast_greater": np.greater,
    "broadcast_greater_equal": np.greater_equal,
}, "1 where lhs {} rhs else 0 (NumPy broadcasting; lhs's dtype).")
