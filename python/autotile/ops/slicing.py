"""slice_axis and slice (crop), with backward ops that scatter dy into zeros.

slice_axis follows MXNet's strict checks (0 <= begin < end <= size after adding the size to
negative values); slice follows MXNet 1.x's Python-style clipping per dim (None = default,
negative steps allowed). TDL indices are affine (``out[j] = data[step*j + begin]``), so
every split is exact; the backward ops read dy at ``(j - begin) / step`` (out-of-range
reads are the zero padding)."""
from __future__ import annotations

from typing import List, Tuple

import numpy as np

from ..errors import Error
from ._axes import need_shapes, norm_axis
from ._tiles import box_shape
from .registry import OpDef, Param, alias, register
from .tdl_helpers import access, header, index_vars

Range = Tuple[int, int, int]  # begin, end (exclusive), step, all normalized


# ----------------------------------------------------------------------------- geometry

def _axis_range(attrs, shape) -> Tuple[int, Range]:
    shape = tuple(shape)
    axis = norm_axis("slice_axis", attrs["axis"], len(shape), "axis", shape)
    n = shape[axis]
    b = attrs["begin"] + n if attrs["begin"] < 0 else attrs["begin"]
    e = n if attrs["end"] is None else (attrs["end"] + n if attrs["end"] < 0 else attrs["end"])
    if not 0 <= b < e <= n:
        raise Error(f"slice_axis: begin={attrs['begin']}, end={attrs['end']} select nothing valid on axis {axis} "
                    f"of input shape {shape} (need 0 <= begin < end <= {n} after adding {n} to negatives)")
    return axis, (b, e, 1)


def _slice_ranges(attrs, shape) -> List[Range]:
    """(begin, end, step) per dim; dims past len(begin) are kept whole."""
    shape = tuple(shape)
    begin, end, step = attrs["begin"], attrs["end"], attrs["step"]
    if len(begin) != len(end) or (step and len(step) != len(begin)):
        raise Error(f"slice: begin={begin}, end={end}, step={step} must have the same length")
    if len(begin) > len(shape):
        raise Error(f"slice: begin={begin} has more entries than input shape {shape} has dims")
    ranges = []
    for d, n in enumerate(shape):
        if d >= len(begin):
            ranges.append((0, n, 1))
            continue
        s = 1 if not step or step[d] is None else step[d]
        if s == 0:
            raise Error(f"slice: step={step} has a zero step for dim {d}")
        b, e, s = slice(begin[d], end[d], s).indices(n)
        ranges.append((b, e, s))
    return ranges


def _count(r: Range) -> int:
    return len(range(*r))


def _slice_index(r: Range, v: str) -> str:
    b, _, s = r
    if s == 1:
        return f"{v} + {b}" if b else v
    if s > 0:
        return f"{s}*{v} + {b}" if b else f"{s}*{v}"
    return f"{b} - {v}" if s == -1 else f"{b} - {-s}*{v}"


def _unslice_index(r: Range, v: str) -> str:
    """Index of dy read by dx at v: (v - begin) / step, written with a positive divisor."""
    b, _, s = r
    if s > 0:
        num = f"{v} - {b}" if b else v
    else:
        num = f"{b} - {v}"
    d = abs(s)
    if d == 1:
        return num
    return f"({num}) / {d}" if not num.isidentifier() else f"{num} / {d}"


def _scatter(dy, ranges, dtype, tile_lo, tile_shape, dy_lo):
    """The tile [tile_lo, tile_lo + tile_shape) of dx = zeros with dy at the sliced positions;
    dy holds the slice's elements from dy_lo on (the whole dx and dy when untiled)."""
    index = []
    for d, (b, _, s) in enumerate(ranges):
        pos = b + s * (dy_lo[d] + np.arange(dy.shape[d])) - tile_lo[d]  # position in the tile
        keep = (pos >= 0) & (pos < tile_shape[d])
        index.append((pos[keep], np.flatnonzero(keep)))
    dx = np.zeros(tile_shape, dtype=dtype)
    dx[np.ix_(*[p for p, _ in index])] = dy[np.ix_(*[k for _, k in index])]
    return dx


# ----------------------------------------------------------------------------- slice_axis

def _slice_axis_ranges(attrs, shape):
    axis, r = _axis_range(attrs, shape)
    return [r if d == axis else (0, n, 1) for d, n in enumerate(shape)]


def _slice(range_fn, op):
    def infer(attrs, in_shapes):
        need_shapes(op, in_shapes, ["data"])
        return [tuple(in_shapes[0])], [tuple(_count(r) for r in range_fn(attrs, in_shapes[0]))]

    def forward(attrs, inputs, ctx):
        x = inputs[0]
        ranges = range_fn(attrs, x.shape)
        return [np.ascontiguousarray(x[tuple(slice(b, e if e >= 0 else None, s) for b, e, s in ranges)])]

    def tdl(attrs, in_shapes, out_shapes):
        ov = index_vars(len(in_shapes[0]))
        idx = [_slice_index(r, v) for r, v in zip(range_fn(attrs, in_shapes[0]), ov)]
        return f"{header(['data'], ['out'])}: {access('out', ov)} = {access('data', idx)}"

    return infer, forward, tdl


def _backward(range_fn, op):
    def infer(attrs, in_shapes):
        shape = tuple(attrs["shape"])
        return [tuple(_count(r) for r in range_fn(attrs, shape))], [shape]

    def forward(attrs, inputs, ctx):
        shape = tuple(attrs["shape"])
        n = len(shape)
        tile_shape = tuple(attrs["tile_shape"]) or shape
        tile_lo = tuple(attrs["tile_lo"]) or (0,) * n
        dy_lo = tuple(attrs["dy_lo"]) or (0,) * n
        return [_scatter(inputs[0], range_fn(attrs, shape), inputs[0].dtype, tile_lo, tile_shape, dy_lo)]

    def tdl(attrs, in_shapes, out_shapes):
        shape = tuple(attrs["shape"])
        xv = index_vars(len(shape))
        ranges = range_fn(attrs, shape)
        idx = [_unslice_index(r, v) for r, v in zip(ranges, xv)]
        body = access("dy", idx)
        if any(abs(s) > 1 for _, _, s in ranges):
            body = f"unstride({body})"  # elements between strides are zero: not a plain read
        return f"dy -> dx: {access('dx', xv)} = {body}"

    return infer, forward, tdl


def _slice_tile(range_fn, to_attrs):
    """Forward hook: begin/end in the coordinates of the input tile."""

    def hook(attrs, ins, outs, in_shapes, out_shapes):
        ranges = range_fn(attrs, in_shapes[0])
        local = []
        for d, (b, _, s) in enumerate(ranges):
            n = outs[0][1][d] - outs[0][0][d]
            first = b + s * outs[0][0][d] - ins[0][0][d]
            end = first + s * n
            local.append((first, None if end < 0 else end, s))
        return to_attrs(attrs, local)

    return hook


def _axis_to_attrs(attrs, local):
    axis = norm_axis("slice_axis", attrs["axis"], len(local))
    first, end, _ = local[axis]
    return {**attrs, "begin": first, "end": end}


def _slice_to_attrs(attrs, local):
    k = len(attrs["begin"])
    return {**attrs, "begin": tuple(r[0] for r in local[:k]), "end": tuple(r[1] for r in local[:k]),
            "step": tuple(r[2] for r in local[:k])}


def _unslice_tile(attrs, ins, outs, in_shapes, out_shapes):
    """Backward hook: which tile of dx is built and where the dy tile starts."""
    return {**attrs, "tile_lo": tuple(outs[0][0]), "tile_shape": box_shape(outs[0]), "dy_lo": tuple(ins[0][0])}


_TILE_PARAMS = {k: Param("shape", ()) for k in ("tile_lo", "tile_shape", "dy_lo")}  # set on tiles only


def _grad(op_name, keys):
    def gradient(ctx):
        return [ctx.op(op_name, ctx.out_grads[0], shape=tuple(ctx.in_shapes[0]),
                       **{k: ctx.attrs[k] for k in keys})]

    return gradient


_AXIS_PARAMS = {"axis": Param("int", required=True), "begin": Param("int", required=True),
                "end": Param("optional_int", None)}
_inf, _fwd, _tdl = _slice(_slice_axis_ranges, "slice_axis")
register(OpDef(
    name="slice_axis",
    params=_AXIS_PARAMS,
    infer_shape=_inf,
    forward=_fwd,
    gradient=_grad("_backward_slice_axis", ["axis", "begin", "end"]),
    tdl=_tdl,
    extra={"tile_attrs": _slice_tile(_slice_axis_ranges, _axis_to_attrs)},
    doc="data[..., begin:end, ...] along `axis` (end None = to the end; negatives count from the end).",
))
_inf, _fwd, _tdl = _backward(_slice_axis_ranges, "_backward_slice_axis")
register(OpDef(
    name="_backward_slice_axis",
    params=dict(_AXIS_PARAMS, shape=Param("shape", required=True), **_TILE_PARAMS),
    arguments=lambda attrs: ["dy"],
    extra={"tile_attrs": _unslice_tile},
    infer_shape=_inf,
    forward=_fwd,
    tdl=_tdl,
    doc="Gradient of slice_axis: dy placed into zeros of the input `shape`.",
))


# ----------------------------------------------------------------------------- slice

_SLICE_PARAMS = {"begin": Param("shape", required=True), "end": Param("shape", required=True),
                 "step": Param("shape", ())}
_inf, _fwd, _tdl = _slice(_slice_ranges, "slice")
register(OpDef(
    name="slice",
    params=_SLICE_PARAMS,
    infer_shape=_inf,
    forward=_fwd,
    gradient=_grad("_backward_slice", ["begin", "end", "step"]),
    tdl=_tdl,
    extra={"tile_attrs": _slice_tile(_slice_ranges, _slice_to_attrs)},
    doc="data[b0:e0:s0, b1:e1:s1, ...] with Python semantics per dim (None = default).",
))
alias("crop", "slice")
_inf, _fwd, _tdl = _backward(_slice_ranges, "_backward_slice")
register(OpDef(
    name="_backward_slice",
    params=dict(_SLICE_PARAMS, shape=Param("shape", required=True), **_TILE_PARAMS),
    arguments=lambda attrs: ["dy"],
    extra={"tile_attrs": _unslice_tile},
    infer_shape=_inf,
    forward=_fwd,
    tdl=_tdl,
    doc="Gradient of slice: dy placed into zeros of the input `shape`.",
))
