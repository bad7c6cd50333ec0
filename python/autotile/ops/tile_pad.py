"""tile (MXNet's tile, NumPy's np.tile) and pad (constant, edge or reflect on every axis),
with their backward ops `_backward_tile` and `_backward_pad`.

Both ops read, per axis, one source element of `data` for each output element: tile the
position modulo the axis length, pad the position minus the leading pad (clamped for edge,
mirrored for reflect, none for constant: the fill value). The kernels gather by those
per-axis source maps and the backward ops scatter-add dy by the same maps, so on a tile of
the output (tile hook: where the tiles start, the full data shape) a kernel reads the part
of `data` it was given. TDL indices are affine where the map is (tile:
``i - n*(i / n)``, constant pad: ``i - b``); an axis that edge/reflect pads is read whole.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import Error
from ._axes import need_shapes
from ._ew_util import fmt
from ._tiles import box_shape
from .registry import OpDef, Param, alias, register
from .tdl_helpers import access, header, index_vars

_MODES = ("constant", "edge", "reflect")
# set on tiles only (tile hooks): where the kernel's input and output tiles start, the
# output tile's shape and the full shape of `data` (the forward op's input)
_TILE_PARAMS = {k: Param("shape", ()) for k in ("tile_in_lo", "tile_out_lo", "tile_out_shape", "tile_data_shape")}


# ----------------------------------------------------------------------------- gather / scatter

def _is_identity(src, lo, n):
    return len(src) == n and (n == 0 or (src[0] == lo and src[-1] == lo + n - 1 and bool(np.all(np.diff(src) == 1))))


def _gather(x, sources: Sequence[np.ndarray], in_lo: Sequence[int], fill, op: str):
    """out[q0, q1, ...] = x[sources[0][q0] - in_lo[0], ...]; a negative source gives `fill`."""
    out = x
    for d, src in enumerate(sources):
        if _is_identity(src, in_lo[d], x.shape[d]):
            continue  # an axis neither tiled nor padded: nothing to move
        valid = src >= 0
        local = src - in_lo[d]
        if valid.any() and (local[valid].min() < 0 or local[valid].max() >= out.shape[d]):
            raise Error(f"{op}: the input tile of shape {fmt(x.shape)} starting at {tuple(in_lo)} lacks axis {d} "
                        f"positions {int(src[valid].min())}..{int(src[valid].max())} the output tile reads")
        if not valid.any():  # the tile lies in the padding: nothing to read on this axis
            shape = list(out.shape)
            shape[d] = len(src)
            out = np.full(shape, fill, x.dtype)
            continue
        out = np.take(out, np.where(valid, local, 0), axis=d)
        if not valid.all():
            index = [slice(None)] * out.ndim
            index[d] = ~valid
            out[tuple(index)] = fill
    return out


def _scatter(dy, sources: Sequence[np.ndarray], dx_lo: Sequence[int], dx_shape: Sequence[int]):
    """dx[s] = sum of dy[q] over the q whose sources are s, for s in the tile at dx_lo."""
    out = dy
    for d, src in enumerate(sources):
        if _is_identity(src, dx_lo[d], dx_shape[d]):
            continue
        pos = np.flatnonzero((src >= dx_lo[d]) & (src < dx_lo[d] + dx_shape[d]))
        target = src[pos] - dx_lo[d]
        moved = np.moveaxis(out, d, 0)
        acc = np.zeros((dx_shape[d],) + moved.shape[1:], dy.dtype)
        # layer r holds each target's r-th source position (in order), so a layer's targets
        # are distinct and one fancy-indexed += adds it (np.add.at is ~20x slower)
        order = np.argsort(target, kind="stable")
        first = np.flatnonzero(np.diff(target[order], prepend=-1))
        rank = np.empty(len(pos), np.int64)
        rank[order] = np.arange(len(pos)) - np.repeat(first, np.diff(np.append(first, len(pos))))
        for r in range(int(rank.max(initial=-1)) + 1):
            layer = rank == r
            acc[target[layer]] += moved[pos[layer]]
        out = np.moveaxis(acc, 0, d)
    return out


def _positions(lo, n):
    return np.arange(lo, lo + n)


def _hook(data_is_output: bool):
    """Tile hook: tile starts and shapes, and the full shape of `data` (the forward op's
    input, which is the backward op's output)."""

    def hook(attrs, ins, outs, in_shapes, out_shapes):
        data_shape = out_shapes[0] if data_is_output else in_shapes[0]
        return {**attrs, "tile_in_lo": tuple(ins[0][0]), "tile_out_lo": tuple(outs[0][0]),
                "tile_out_shape": box_shape(outs[0]), "tile_data_shape": tuple(data_shape)}

    return hook


def _lo(attrs, key, rank):
    """A tile start (zeros when untiled), promoted to `rank` by leading zeros."""
    lo = tuple(attrs[key])
    return (0,) * (rank - len(lo)) + lo


# ----------------------------------------------------------------------------- tile

def _reps(attrs, shape, op="tile"):
    """(data shape and reps, both promoted to the output rank by leading 1s)."""
    reps = tuple(attrs["reps"])
    if not reps or any(r < 1 for r in reps):
        raise Error(f"{op}: reps={reps} must be a non-empty tuple of positive integers")
    rank = max(len(reps), len(shape))
    return (1,) * (rank - len(shape)) + tuple(shape), (1,) * (rank - len(reps)) + reps


def _tile_infer(attrs, in_shapes):
    need_shapes("tile", in_shapes, ["data"])
    shape, reps = _reps(attrs, in_shapes[0])
    return [tuple(in_shapes[0])], [tuple(n * r for n, r in zip(shape, reps))]


def _tile_forward(attrs, ins, ctx):
    x = ins[0]
    shape, reps = _reps(attrs, tuple(attrs["tile_data_shape"]) or x.shape)
    xp = x.reshape((1,) * (len(shape) - x.ndim) + x.shape)
    out_shape = tuple(attrs["tile_out_shape"]) or tuple(n * r for n, r in zip(shape, reps))
    sources = [_positions(lo, m) % n for lo, m, n in zip(_lo(attrs, "tile_out_lo", len(shape)), out_shape, shape)]
    return [_gather(xp, sources, _lo(attrs, "tile_in_lo", len(shape)), 0, "tile")]


def _tile_index(v, n, r):
    if r == 1:
        return v
    return "0" if n == 1 else f"{v} - {n}*({v} / {n})"  # v mod n, affine with floor division


def _tile_tdl(attrs, in_shapes, out_shapes):
    shape, reps = _reps(attrs, in_shapes[0])
    ov = index_vars(len(shape))
    lead = len(shape) - len(in_shapes[0])
    idx = [_tile_index(v, n, r) for v, n, r in zip(ov[lead:], shape[lead:], reps[lead:])]
    return f"{header(['data'], ['out'])}: {access('out', ov)} = {access('data', idx)}"


def _tile_gradient(ctx):
    if not ctx.in_shapes or ctx.in_shapes[0] is None:
        raise Error("tile: the gradient needs the shape of data")
    return [ctx.op("_backward_tile", ctx.out_grads[0], reps=ctx.attrs["reps"], shape=tuple(ctx.in_shapes[0]))]


register(OpDef(
    name="tile",
    params={"reps": Param("shape", required=True), **_TILE_PARAMS},
    infer_shape=_tile_infer,
    forward=_tile_forward,
    gradient=_tile_gradient,
    tdl=_tile_tdl,
    extra={"tile_attrs": _hook(False)},
    doc="data repeated reps[d] times along each axis (np.tile: reps and data promoted by leading 1s).",
))


def _tile_bwd_infer(attrs, in_shapes):
    shape, reps = _reps(attrs, attrs["shape"], "_backward_tile")
    out = tuple(n * r for n, r in zip(shape, reps))
    if in_shapes[0] is not None and tuple(in_shapes[0]) != out:
        raise Error(f"_backward_tile: dy has shape {fmt(in_shapes[0])} but tiling {fmt(attrs['shape'])} by "
                    f"reps={tuple(attrs['reps'])} gives {fmt(out)}")
    return [out], [tuple(attrs["shape"])]


def _tile_bwd_forward(attrs, ins, ctx):
    dy = ins[0]
    shape, reps = _reps(attrs, attrs["shape"], "_backward_tile")
    lead = len(shape) - len(attrs["shape"])
    out_shape = (1,) * lead + tuple(attrs["tile_out_shape"]) if attrs["tile_out_shape"] else shape
    sources = [_positions(lo, m) % n for lo, m, n in zip(_lo(attrs, "tile_in_lo", dy.ndim), dy.shape, shape)]
    dx = _scatter(dy, sources, _lo(attrs, "tile_out_lo", len(shape)), out_shape)
    return [dx.reshape(dx.shape[lead:])]


def _tile_bwd_tdl(attrs, in_shapes, out_shapes):
    shape, reps = _reps(attrs, attrs["shape"], "_backward_tile")
    lead = len(shape) - len(attrs["shape"])
    xv = index_vars(len(attrs["shape"]))
    idx = [":"] * lead + [v if r == 1 else ":" for v, r in zip(xv, reps[lead:])]
    return f"dy -> dx: {access('dx', xv)} = untile({access('dy', idx)})"


register(OpDef(
    name="_backward_tile",
    params={"reps": Param("shape", required=True), "shape": Param("shape", required=True), **_TILE_PARAMS},
    arguments=lambda attrs: ["dy"],
    infer_shape=_tile_bwd_infer,
    forward=_tile_bwd_forward,
    tdl=_tile_bwd_tdl,
    extra={"tile_attrs": _hook(True)},
    doc="Gradient of tile: dy summed over the repetitions, of data's `shape`.",
))

# ----------------------------------------------------------------------------- pad


def _widths(attrs, shape, op="pad"):
    """[(before, after)] per axis; Error unless pad_width has 2 entries per axis and every
    padded axis keeps at least one element (negative widths crop)."""
    pw = tuple(attrs["pad_width"])
    if len(pw) != 2 * len(shape):
        raise Error(f"{op}: pad_width={pw} needs 2 entries per axis of the input shape {fmt(shape)} "
                    f"({2 * len(shape)}), got {len(pw)}")
    widths = list(zip(pw[0::2], pw[1::2]))
    for d, (n, (b, e)) in enumerate(zip(shape, widths)):
        if n + b + e < 1 or (n < 1 and attrs["mode"] != "constant"):
            raise Error(f"{op}: pad_width={pw} leaves axis {d} of input shape {fmt(shape)} with {n + b + e} elements")
    return widths


def _pad_sources(mode, q, b, n):
    """Source positions in data for output positions q of one axis (-1: the fill value)."""
    s = q - b
    if mode == "constant":
        return np.where((s >= 0) & (s < n), s, -1)
    if mode == "edge":
        return np.clip(s, 0, n - 1)
    if n == 1:
        return np.zeros_like(s)
    period = 2 * (n - 1)  # reflect without repeating the edge: 0 1 .. n-1 n-2 .. 1 0 1 ..
    m = np.mod(s, period)
    return np.where(m < n, m, period - m)


def _pad_read_whole(mode, b, e):
    """Whether an axis's source map is not a shift (edge/reflect padding reads the edges)."""
    return mode != "constant" and (b > 0 or e > 0)


def _pad_infer(attrs, in_shapes):
    need_shapes("pad", in_shapes, ["data"])
    shape = tuple(in_shapes[0])
    return [shape], [tuple(n + b + e for n, (b, e) in zip(shape, _widths(attrs, shape)))]


def _pad_forward(attrs, ins, ctx):
    x = ins[0]
    shape = tuple(attrs["tile_data_shape"]) or x.shape
    widths = _widths(attrs, shape)
    out_shape = tuple(attrs["tile_out_shape"]) or tuple(n + b + e for n, (b, e) in zip(shape, widths))
    sources = [_pad_sources(attrs["mode"], _positions(lo, m), b, n)
               for lo, m, n, (b, _) in zip(_lo(attrs, "tile_out_lo", x.ndim), out_shape, shape, widths)]
    return [_gather(x, sources, _lo(attrs, "tile_in_lo", x.ndim), x.dtype.type(attrs["constant_value"]), "pad")]


def _shift(v, c):
    return v if c == 0 else (f"{v} + {c}" if c > 0 else f"{v} - {-c}")


def _pad_tdl(attrs, in_shapes, out_shapes):
    widths = _widths(attrs, in_shapes[0])
    ov = index_vars(len(out_shapes[0]))
    idx = [":" if _pad_read_whole(attrs["mode"], b, e) else _shift(v, -b) for v, (b, e) in zip(ov, widths)]
    return f"{header(['data'], ['out'])}: {access('out', ov)} = pad({access('data', idx)})"


_PAD_PARAMS = {
    "mode": Param("str", "constant", choices=_MODES),
    "pad_width": Param("shape", required=True),
    "constant_value": Param("float", 0.0),
}

register(OpDef(
    name="pad",
    params={**_PAD_PARAMS, **_TILE_PARAMS},
    infer_shape=_pad_infer,
    forward=_pad_forward,
    gradient=lambda ctx: [ctx.op("_backward_pad", ctx.out_grads[0], mode=ctx.attrs["mode"],
                                 pad_width=ctx.attrs["pad_width"])],
    tdl=_pad_tdl,
    extra={"tile_attrs": _hook(False)},
    doc="data padded on every axis by pad_width=(before0, after0, before1, after1, ...) (negative widths "
        "crop): with constant_value, the edge values, or the mirror image without the edge (reflect).",
))
alias("Pad", "pad")  # MXNet 1.x's name (same attributes; MXNet itself pads only the spatial axes)


def _unpadded(attrs, dy_shape, op="_backward_pad"):
    """(data shape, widths) from dy's shape."""
    pw = tuple(attrs["pad_width"])
    if len(pw) != 2 * len(dy_shape):
        raise Error(f"{op}: pad_width={pw} needs 2 entries per axis of dy's shape {fmt(dy_shape)}")
    shape = tuple(m - b - e for m, b, e in zip(dy_shape, pw[0::2], pw[1::2]))
    return shape, _widths(attrs, shape, op)


def _pad_bwd_infer(attrs, in_shapes):
    need_shapes("_backward_pad", in_shapes, ["dy"])
    return [tuple(in_shapes[0])], [_unpadded(attrs, tuple(in_shapes[0]))[0]]


def _pad_bwd_forward(attrs, ins, ctx):
    dy = ins[0]
    shape = tuple(attrs["tile_data_shape"]) or _unpadded(attrs, dy.shape)[0]
    widths = _widths(attrs, shape, "_backward_pad")
    sources = [_pad_sources(attrs["mode"], _positions(lo, m), b, n)
               for lo, m, n, (b, _) in zip(_lo(attrs, "tile_in_lo", dy.ndim), dy.shape, shape, widths)]
    return [_scatter(dy, sources, _lo(attrs, "tile_out_lo", dy.ndim), tuple(attrs["tile_out_shape"]) or shape)]


def _pad_bwd_tdl(attrs, in_shapes, out_shapes):
    widths = _unpadded(attrs, in_shapes[0])[1]
    xv = index_vars(len(out_shapes[0]))
    idx = [":" if _pad_read_whole(attrs["mode"], b, e) else _shift(v, b) for v, (b, e) in zip(xv, widths)]
    return f"dy -> dx: {access('dx', xv)} = unpad({access('dy', idx)})"


register(OpDef(
    name="_backward_pad",
    params={"mode": _PAD_PARAMS["mode"], "pad_width": _PAD_PARAMS["pad_width"], **_TILE_PARAMS},
    arguments=lambda attrs: ["dy"],
    infer_shape=_pad_bwd_infer,
    forward=_pad_bwd_forward,
    tdl=_pad_bwd_tdl,
    extra={"tile_attrs": _hook(True)},
    doc="Gradient of pad: each element of dy added to the data element it was read from.",
))
