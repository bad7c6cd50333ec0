"""ONNX converters that move, repeat or index data: Expand, Tile, Pad, Range, CumSum, Trilu,
Gather with run-time indices, GatherElements, GatherND, and Slice with steps.

Shapes, repeats, pads and axes must be constants once the batch (and any symbolic sequence)
size is bound; what depends on data at run time is named in an Error.
"""
from __future__ import annotations

import numpy as np

from .onnx_registry import (_ints, _norm_axis, _ranked, _slice_axis, check_index_range, check_index_tuples,
                            converter)


@converter("Expand")
def expand(ctx):
    target = _ints(ctx.const(1, "shape"))
    dims = ctx.dims(0)
    if dims is None or not all(isinstance(d, int) for d in dims):
        raise ctx.error(f"Expand needs the static shape of '{ctx.input_name(0)}'; " + ctx.imp.unbound_hint())
    rank = max(len(dims), len(target))
    full_in = (1,) * (rank - len(dims)) + tuple(dims)
    full_t = (1,) * (rank - len(target)) + tuple(target)
    try:
        out = np.broadcast_shapes(full_in, full_t)
    except ValueError:
        raise ctx.error(f"cannot expand shape {tuple(dims)} to {tuple(target)}") from None
    x = _ranked(ctx, 0, len(dims), rank)
    if tuple(out) == full_in:
        return [x]
    return [ctx.op("broadcast_to", x, shape=tuple(int(d) for d in out))]


@converter("Tile")
def tile(ctx):
    reps = _ints(ctx.const(1, "repeats"))
    rank = ctx.rank(0)
    if rank is not None and len(reps) != rank:
        raise ctx.error(f"repeats {reps} must have one value per axis of '{ctx.input_name(0)}' (rank {rank})")
    if all(r == 1 for r in reps):
        return [ctx.input(0)]
    return [ctx.op("tile", ctx.input(0), reps=tuple(reps))]


@converter("Pad")
def pad(ctx):
    mode = ctx.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge"):
        raise ctx.error(f"pad mode {mode!r} is not supported (constant, reflect, edge)")
    rank = ctx.need_rank(0, "to lay out the pads")
    if ctx.opset >= 11:
        pads = _ints(ctx.const(1, "pads"))
        value = 0.0
        if ctx.has_input(2):
            value = float(np.asarray(ctx.const(2, "constant_value")).ravel()[0])
        axes = _ints(ctx.const(3, "axes")) if ctx.has_input(3) else list(range(rank))
    else:
        pads, value, axes = [int(p) for p in ctx.attr("pads")], float(ctx.attr("value", 0.0)), list(range(rank))
    axes = [_norm_axis(ctx, a, rank) for a in axes]
    if len(pads) != 2 * len(axes):
        raise ctx.error(f"pads {pads} must hold a begin and an end for each of the {len(axes)} axes")
    width = [0] * (2 * rank)
    for k, a in enumerate(axes):
        width[2 * a], width[2 * a + 1] = pads[k], pads[k + len(axes)]
    x = ctx.input(0)
    if any(p < 0 for p in width):
        x = _crop(ctx, x, width, mode, pads)
        width = [max(p, 0) for p in width]
    if not any(width):
        return [x]
    return [ctx.op("pad", x, mode=mode, pad_width=tuple(width), constant_value=value)]


def _crop(ctx, x, width, mode, pads):
    """Negative pads crop (ONNX): a slice of each axis, before the positive pads are added."""
    if mode != "constant":  # reflect/edge would read the cropped values: refused, not guessed
        raise ctx.error(f"negative pads {pads} (cropping) in mode '{mode}' are not supported (constant mode only)")
    dims = ctx.need_shape(0, f"to crop by the negative pads {pads}")
    for a, size in enumerate(dims):
        begin, end = max(-width[2 * a], 0), max(-width[2 * a + 1], 0)
        if not begin and not end:
            continue
        if begin + end >= size:
            raise ctx.error(f"pads {pads} crop {begin + end} of the {size} elements of axis {a} of "
                            f"'{ctx.input_name(0)}', leaving none")
        x = _slice_axis(ctx, x, a, begin, size - end, f"crop{a}")
    return x


@converter("Range")
def range_(ctx):
    for i, what in enumerate(("start", "limit", "delta")):
        ctx.const(i, what)  # all constant: the folder would have produced the value
    raise ctx.error("Range bounds depend on an unknown dimension; " + ctx.imp.unbound_hint())


@converter("CumSum")
def cumsum(ctx):
    value = np.asarray(ctx.const(1, "axis"))
    if value.size != 1:
        raise ctx.error(f"axis {value.tolist()} must be one value (a 0-D tensor)")
    axis = _norm_axis(ctx, int(value.ravel()[0]), ctx.rank(0))
    return [ctx.op("cumsum", ctx.input(0), axis=axis, exclusive=bool(ctx.attr("exclusive", 0)),
                   reverse=bool(ctx.attr("reverse", 0)))]


@converter("Trilu")
def trilu(ctx):
    k = int(np.asarray(ctx.const(1, "k")).ravel()[0]) if ctx.has_input(1) else 0
    return [ctx.op("trilu", ctx.input(0), upper=bool(ctx.attr("upper", 1)), k=k)]


# ----------------------------------------------------------------------------- gathers

def _index_input(ctx, i: int, size=None):
    """Indices input i as a Symbol; constant negative indices are wrapped by `size`."""
    if ctx.is_const(i):
        idx = np.asarray(ctx.const(i)).astype(np.int64)
        if (idx < 0).any():
            if size is None:
                raise ctx.error("negative indices need the size of the indexed axis, which is unknown")
            idx = np.where(idx < 0, idx + size, idx)
        return ctx.param(idx, ctx.input_name(i), "idx")
    return ctx.input(i)


@converter("GatherElements")
def gather_elements(ctx):
    rank = ctx.rank(0)
    axis = _norm_axis(ctx, int(ctx.attr("axis", 0)), rank)
    size = ctx.shape(0)[axis] if ctx.shape(0) is not None else None
    if ctx.is_const(1):
        check_index_range(ctx, ctx.const(1), size, axis)
    return [ctx.op("gather_elements", ctx.input(0), _index_input(ctx, 1, size), axis=axis)]


@converter("GatherND")
def gather_nd(ctx):
    batch_dims = int(ctx.attr("batch_dims", 0))
    if batch_dims:
        raise ctx.error(f"batch_dims={batch_dims} is not supported (only 0)")
    rank = ctx.need_rank(1, "to move the index tuples first")
    # ONNX puts each index tuple on the last axis of indices; MXNet's gather_nd on the first.
    if ctx.is_const(1):
        value = np.asarray(ctx.const(1)).astype(np.int64)
        check_index_tuples(ctx, value, ctx.shape(0))
        if (value < 0).any():
            shape = ctx.need_shape(0, "to wrap negative indices")
            sizes = np.asarray(shape[:value.shape[-1]], dtype=np.int64)
            value = np.where(value < 0, value + sizes, value)
        idx = ctx.param(np.ascontiguousarray(np.moveaxis(value, -1, 0)), ctx.input_name(1), "idx")
    else:
        idx = ctx.op("transpose", ctx.input(1), axes=(rank - 1,) + tuple(range(rank - 1)), suffix="idx_first")
    return [ctx.op("gather_nd", ctx.input(0), idx)]
