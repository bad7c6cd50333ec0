"""Helpers shared by the element-wise, broadcast, softmax, loss and optimizer op families:
shape rules (same shape, NumPy broadcasting), multi-output element-wise TDL, dtype casts."""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..errors import Error
from .tdl_helpers import access, header, index_vars

Shape = Tuple[int, ...]


def fmt(shape) -> str:
    """A shape as MXNet prints it: (2, 3)."""
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def same_shape(op: str, names: Sequence[str], in_shapes: Sequence[Optional[Shape]], n_out: int = 1):
    """Shape rule of element-wise ops: every input and output has one shape. Unknown inputs
    take it from the known ones; two different known shapes raise Error naming both."""
    known = None
    known_name = None
    for name, s in zip(names, in_shapes):
        if s is None:
            continue
        s = tuple(s)
        if known is None:
            known, known_name = s, name
        elif s != known:
            raise Error(f"{op}: input '{known_name}' has shape {fmt(known)} but input '{name}' has shape {fmt(s)}; "
                        f"element-wise inputs must have the same shape")
    return [known] * len(in_shapes), [known] * n_out


def broadcast_shape(op: str, lhs: Shape, rhs: Shape) -> Shape:
    """NumPy/MXNet broadcasting of two shapes (aligned on the right; a dim is 1 or equal)."""
    rank = max(len(lhs), len(rhs))
    a = (1,) * (rank - len(lhs)) + tuple(lhs)
    b = (1,) * (rank - len(rhs)) + tuple(rhs)
    out = []
    for d, (x, y) in enumerate(zip(a, b)):
        if x != y and x != 1 and y != 1:
            raise Error(f"{op}: operand shapes {fmt(lhs)} and {fmt(rhs)} cannot be broadcast together "
                        f"(dim {d} of the aligned shapes: {x} vs {y})")
        out.append(y if x == 1 else x)
    return tuple(out)


def multi_elementwise(in_shapes: Sequence[Shape], out_shape: Shape, fns: Sequence[str],
                      inputs: Sequence[str], outputs: Sequence[str]) -> str:
    """TDL of an op whose outputs all have `out_shape` and read every input element-wise
    (NumPy broadcasting as in tdl_helpers.elementwise): one statement per output."""
    ov = index_vars(len(out_shape))
    args = []
    for name, shape in zip(inputs, in_shapes):
        off = len(out_shape) - len(shape)
        idx = ["0" if shape[d] == 1 and out_shape[off + d] != 1 else ov[off + d] for d in range(len(shape))]
        args.append(access(name, idx))
    statements = [f"{access(o, ov)} = {fn}({', '.join(args)})" for o, fn in zip(outputs, fns)]
    return f"{header(inputs, outputs)}: " + "; ".join(statements)


def cast(y, like):
    """`y` as an array of `like`'s dtype (NumPy scalars and Python floats promote otherwise)."""
    return y.astype(like.dtype, copy=False) if hasattr(y, "astype") else np.asarray(y, dtype=like.dtype)


def normalize_axis(op: str, axis: int, rank: int) -> int:
    """`axis` in [0, rank); Error naming the op when it is out of range."""
    if not -rank <= axis < rank:
        raise Error(f"{op}: axis {axis} is out of range for an input of rank {rank}")
    return axis % rank


def reduce_to(dy, shape: Shape):
    """Sums `dy` over the dims that broadcasting expanded to reach it from `shape`: its extra
    leading dims and the dims where `shape` is 1. Other dims keep dy's size, so the kernel
    also runs on a tile of dy (a partitioned run) with the full operand's `shape`."""
    shape = tuple(shape)
    lead = dy.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + d for d, n in enumerate(shape) if n == 1)
    out = dy.sum(axis=axes, keepdims=True) if axes else dy
    return out.reshape(tuple(1 if n == 1 else dy.shape[lead + d] for d, n in enumerate(shape)))


def reduce_tdl(dy_shape: Shape, shape: Shape, inputs: List[str]) -> str:
    """TDL of summing a dy of `dy_shape` down to a broadcast operand of `shape`."""
    ov = index_vars(len(shape))
    lead = len(dy_shape) - len(shape)
    red, idx = [], []
    for d in range(len(dy_shape)):
        t = d - lead
        if t < 0 or (shape[t] == 1 and dy_shape[d] != 1):
            red.append(f"r{d}")
            idx.append(f"r{d}")
        else:
            idx.append(ov[t])
    body = access("dy", idx)
    rhs = f"sum({', '.join(red)}) {{ {body} }}" if red else body
    return f"{header(inputs, ['out'])}: {access('out', ov)} = {rhs}"


def register_unary_without_gradient(table) -> None:
    """Registers each ``name: (numpy function, doc)`` of `table` as an element-wise op whose
    output keeps the input's dtype and through which no gradient flows (predicates such as
    isnan, piecewise-constant functions such as floor)."""
    from .registry import OpDef, register
    from .tdl_helpers import elementwise

    for name, (fn, doc) in table.items():
        register(OpDef(
            name=name,
            infer_shape=(lambda name: lambda attrs, s: same_shape(name, ["data"], s))(name),
            forward=(lambda fn: lambda attrs, ins, ctx: [cast(fn(ins[0]), ins[0])])(fn),
            gradient=lambda ctx: [None],
            tdl=(lambda name: lambda attrs, i, o: elementwise(i, o[0], name, ["data"]))(name),
            elementwise=True,
            doc=doc,
        ))
