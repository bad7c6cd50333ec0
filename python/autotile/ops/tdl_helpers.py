"""Small builders of TDL text (docs/tdl.md) shared by op families."""
from __future__ import annotations

from typing import Sequence

VARS = "abcdefghijklmnopqrstuvwxyz"


def index_vars(rank: int, prefix: str = "i") -> list:
    return [f"{prefix}{d}" for d in range(rank)]


def header(inputs: Sequence[str], outputs: Sequence[str]) -> str:
    return f"{', '.join(inputs)} -> {', '.join(outputs)}"


def access(name: str, idx: Sequence[str]) -> str:
    return f"{name}[{', '.join(idx)}]"


def elementwise(in_shapes: Sequence[Sequence[int]], out_shape: Sequence[int], fn: str = "f",
                inputs: Sequence[str] = None, output: str = "out") -> str:
    """out[i...] = fn(in0[i...], in1[i...], ...), with NumPy broadcasting: an input of lower
    rank reads the trailing variables; a size-1 dim where the output is larger reads index 0."""
    inputs = list(inputs or [f"in{k}" for k in range(len(in_shapes))])
    ov = index_vars(len(out_shape))
    args = []
    for name, shape in zip(inputs, in_shapes):
        off = len(out_shape) - len(shape)
        idx = ["0" if shape[d] == 1 and out_shape[off + d] != 1 else ov[off + d] for d in range(len(shape))]
        args.append(access(name, idx))
    return f"{header(inputs, [output])}: {access(output, ov)} = {fn}({', '.join(args)})"
