"""TDL text for ops that only reinterpret a tensor's shape (Reshape, Flatten, expand_dims ...).

The row-major element order is unchanged, so the dims of input and output fall into *blocks*
of equal size (size-1 dims aside): ``(2, 3, 4) -> (6, 4)`` has blocks ``{2,3}->{6}`` and
``{4}->{4}``. Per block, with `flat` the block's row-major offset in output variables:

- one input dim (identity, or an output-side split of the dim): the input index is `flat`,
  an exact affine index (``data[4*i1 + i2]`` for ``(8,) -> (2, 4)``);
- several input dims (a merge): the first input dim is read at ``flat / stride`` (affine
  divided by a constant, exact for splits aligned with it) and the others with ``:`` (whole
  dim), as NumPy's ``%`` is not affine. This over-approximates, so splitting a merged
  dim is costed as reading whole rows, while preserved dims (the batch) split exactly.

Size-1 input dims read index 0; size-1 output dims are not referenced by any input.
"""
from __future__ import annotations

from typing import List, Sequence

from .tdl_helpers import access, header, index_vars


def _affine(terms: List[tuple]) -> str:
    parts = [v if c == 1 else f"{c}*{v}" for c, v in terms]
    return " + ".join(parts) if parts else "0"


def reshape_indices(in_shape: Sequence[int], out_shape: Sequence[int], out_vars: Sequence[str]) -> List[str]:
    """Index expressions into the input, one per input dim, in terms of the output variables."""
    in_shape, out_shape = list(in_shape), list(out_shape)
    if 0 in in_shape or 0 in out_shape:
        return [":"] * len(in_shape)
    idx = ["0" if s == 1 else ":" for s in in_shape]
    ins = [d for d, s in enumerate(in_shape) if s != 1]
    outs = [d for d, s in enumerate(out_shape) if s != 1]
    a = b = 0
    while a < len(ins) and b < len(outs):
        p, q = [ins[a]], [outs[b]]
        a, b = a + 1, b + 1
        pin, pout = in_shape[p[0]], out_shape[q[0]]
        while pin != pout:
            if pin < pout:
                p.append(ins[a])
                pin *= in_shape[ins[a]]
                a += 1
            else:
                q.append(outs[b])
                pout *= out_shape[outs[b]]
                b += 1
        terms, stride = [], 1
        for d in reversed(q):
            terms.append((stride, out_vars[d]))
            stride *= out_shape[d]
        terms.reverse()
        flat = _affine(terms)
        if len(p) == 1:
            idx[p[0]] = flat
        else:
            inner = 1
            for d in p[1:]:
                inner *= in_shape[d]
            idx[p[0]] = f"{flat} / {inner}" if flat.isidentifier() else f"({flat}) / {inner}"
    return idx


def reshape_tdl(in_shape: Sequence[int], out_shape: Sequence[int], inputs: Sequence[str] = ("data",),
                output: str = "out") -> str:
    """TDL of ``output = reshape(inputs[0], out_shape)``; extra inputs (reshape_like's rhs)
    appear in the header only: they supply a shape, yet a header name with no access is
    read in full, so callers should keep such inputs out where they can."""
    ov = index_vars(len(out_shape))
    idx = reshape_indices(in_shape, out_shape, ov)
    return f"{header(inputs, [output])}: {access(output, ov)} = {access(inputs[0], idx)}"
