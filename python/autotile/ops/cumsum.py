"""cumsum(data, axis, exclusive=False, reverse=False): running sums along `axis` (ONNX
CumSum). exclusive leaves the element itself out; reverse sums from the end. The gradient is
the cumsum of dy in the opposite direction (same `exclusive`).

TDL: ``out[.., i, ..] = sum(r) { data[.., r, ..] * prefix(i - r) }`` (``prefix`` is the
opaque 0/1 mask of the mode), so the search may split the summed axis: each worker sums its
chunk of `axis` into a partial output of the full length (its tile hook says where the chunk
and the output tile lie), or split any axis of the output."""
from __future__ import annotations

import numpy as np

from ._axes import need_shapes, norm_axis
from ._ew_util import cast
from .registry import OpDef, Param, register
from .tdl_helpers import access, header, index_vars

_PARAMS = {
    "axis": Param("int", required=True),
    "exclusive": Param("bool", False),
    "reverse": Param("bool", False),
    # set on tiles only (tile hook): where the input chunk and the output tile start along
    # `axis`, and the output tile's length there
    "tile_in_lo": Param("optional_int", None),
    "tile_out_lo": Param("optional_int", None),
    "tile_out_len": Param("optional_int", None),
}


def _infer(attrs, in_shapes):
    need_shapes("cumsum", in_shapes, ["data"])
    shape = tuple(in_shapes[0])
    norm_axis("cumsum", attrs["axis"], len(shape), "axis", shape)
    return [shape], [shape]


def _forward(attrs, ins, ctx):
    x = ins[0]
    axis = norm_axis("cumsum", attrs["axis"], x.ndim, "axis", x.shape)
    n = x.shape[axis]
    in_lo = attrs["tile_in_lo"] or 0
    out_lo = attrs["tile_out_lo"] or 0
    out_len = n if attrs["tile_out_len"] is None else attrs["tile_out_len"]
    zero = np.zeros(x.shape[:axis] + (1,) + x.shape[axis + 1:], x.dtype)
    # x is the chunk of the axis from global position in_lo on (the whole axis when untiled);
    # out[q] sums its elements on q's side. P[m] = x[0] + .. + x[m-1] and S[m] = x[m] + ..
    # + x[n-1] (NumPy's own running sums), read at q's position in the chunk, clipped.
    q = np.arange(out_lo, out_lo + out_len) - in_lo
    if not attrs["reverse"]:
        sums = np.concatenate([zero, np.cumsum(x, axis=axis)], axis=axis)  # P
        at = q if attrs["exclusive"] else q + 1
    else:
        sums = np.concatenate([np.flip(np.cumsum(np.flip(x, axis), axis=axis), axis), zero], axis=axis)  # S
        at = q + 1 if attrs["exclusive"] else q
    return [cast(np.take(sums, np.clip(at, 0, n), axis=axis), x)]


def _tdl(attrs, in_shapes, out_shapes):
    shape = in_shapes[0]
    axis = norm_axis("cumsum", attrs["axis"], len(shape), "axis", shape)
    ov = index_vars(len(shape))
    idx = list(ov)
    idx[axis] = "r"
    delta = f"r - {ov[axis]}" if attrs["reverse"] else f"{ov[axis]} - r"
    mask = "strict_prefix" if attrs["exclusive"] else "prefix"  # 1 where delta > 0 / >= 0
    return f"{header(['data'], ['out'])}: {access('out', ov)} = sum(r) {{ {access('data', idx)} * {mask}({delta}) }}"


def _tile(attrs, ins, outs, in_shapes, out_shapes):
    axis = norm_axis("cumsum", attrs["axis"], len(in_shapes[0]))
    (ilo, _), (olo, ohi) = ins[0], outs[0]
    return {**attrs, "tile_in_lo": int(ilo[axis]), "tile_out_lo": int(olo[axis]),
            "tile_out_len": int(ohi[axis]) - int(olo[axis])}


register(OpDef(
    name="cumsum",
    params=_PARAMS,
    infer_shape=_infer,
    forward=_forward,
    gradient=lambda ctx: [ctx.op("cumsum", ctx.out_grads[0], axis=ctx.attrs["axis"],
                                 exclusive=ctx.attrs["exclusive"], reverse=not ctx.attrs["reverse"])],
    tdl=_tdl,
    extra={"tile_attrs": _tile},
    doc="Running sums along `axis` (exclusive: without the element itself; reverse: from the end).",
))
