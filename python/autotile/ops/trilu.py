"""trilu(data, upper=True, k=0) (ONNX Trilu) on the last two axes of data (rank >= 2):
upper keeps the elements with column - row >= k (np.triu), lower those with
column - row <= k (np.tril); the rest become 0. Its gradient is trilu of dy.

The mask depends on an element's position, which the TDL passes to the opaque function
(``trilu(data[.., i, j], j - i)``); a tile's kernel shifts k by its offsets (tile hook)."""
from __future__ import annotations

import numpy as np

from ..errors import Error
from ._ew_util import fmt
from .registry import OpDef, Param, register
from .tdl_helpers import access, header, index_vars

_PARAMS = {"upper": Param("bool", True), "k": Param("int", 0)}


def _infer(attrs, in_shapes):
    shape = in_shapes[0]
    if shape is not None and len(shape) < 2:
        raise Error(f"trilu: data of shape {fmt(shape)} has rank {len(shape)}; it needs rank >= 2 "
                    f"(the mask is over the last two axes)")
    return [shape], [shape]


def _forward(attrs, ins, ctx):
    x = ins[0]
    fn = np.triu if attrs["upper"] else np.tril
    return [fn(x, attrs["k"])]


def _tdl(attrs, in_shapes, out_shapes):
    ov = index_vars(len(in_shapes[0]))
    return f"{header(['data'], ['out'])}: {access('out', ov)} = trilu({access('data', ov)}, {ov[-1]} - {ov[-2]})"


def _tile(attrs, ins, outs, in_shapes, out_shapes):
    # global column - row = local column - local row + (col_lo - row_lo)
    lo = outs[0][0]
    return {**attrs, "k": attrs["k"] + int(lo[-2]) - int(lo[-1])}


register(OpDef(
    name="trilu",
    params=_PARAMS,
    infer_shape=_infer,
    forward=_forward,
    gradient=lambda ctx: [ctx.op("trilu", ctx.out_grads[0], upper=ctx.attrs["upper"], k=ctx.attrs["k"])],
    tdl=_tdl,
    extra={"tile_attrs": _tile},
    doc="Upper (column - row >= k) or lower (column - row <= k) triangle of the last two axes; zeros elsewhere.",
))
