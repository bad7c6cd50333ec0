"""ONNX converters of the mixture-of-experts routing ops.

- OneHot -> comparisons of the (expanded) indices with a constant range of the depth: static
  shape (depth must be a constant), no gradient to the indices; negative indices count from the
  end and those outside [-depth, depth) give off values, as the ONNX spec says.
- ScatterElements (and the deprecated Scatter) -> ScatterND with a full index tuple per
  element: the scattered axis takes the indices, every other axis its position (constant
  ranges). Reductions none, add, mul, max, min; gradients for none and add (ops/scatter_nd.py).
- TopK with a constant K -> topk (values and int64 indices, ties by lower index first; the
  values' gradient goes back to where they came from): top-k routing in a static form, every
  expert computed and the unchosen ones weighted 0. A K computed at run time, and NonZero /
  Compress / Unique (an output whose shape depends on the data) are refused: autotile plans
  static shapes. What it does take: a dense mixture of experts (every expert on every token,
  weighted by the gate), top-k routing in the static form above, with expert capacity as GShard
  plans it (slots from a CumSum of the one-hot mask, (N, E, C) dispatch and combine tensors;
  tests/frontend/test_onnx_moe.py), or routing given as indices and applied with OneHot /
  ScatterElements. On constants these ops fold at import.
"""
from __future__ import annotations

import numpy as np

from .onnx_registry import _norm_axis, check_index_range, converter

_STATIC = ("autotile plans static shapes; what is supported is a dense mixture of experts (every expert on "
           "every token, weighted by the gate), top-k routing with a constant k, with or without expert capacity "
           "in GShard's static form (TopK, OneHot of the experts and of the slots a CumSum gives, fixed-size "
           "dispatch and combine tensors), and routing given to the model as indices and applied with OneHot, "
           "GatherElements or ScatterElements")


def _folded(ctx):
    """The outputs computed at import when every input is a constant (a weight too: these ops
    cannot run in the graph, so a weight read through them is read as a constant, as before
    they had converters), else None."""
    from .onnx_fold import fold

    present = [i for i in range(ctx.num_inputs) if ctx.has_input(i)]
    if not all(ctx.is_const(i) for i in present):
        return None
    return fold(ctx, [ctx.const(i) if ctx.has_input(i) else None for i in range(ctx.num_inputs)], generic=True)


@converter("TopK")
def top_k(ctx):
    if ctx.opset >= 10 and not ctx.is_const(1):
        raise ctx.error(f"K '{ctx.input_name(1)}' is computed at run time, so the output shape depends on the data "
                        f"(data-dependent routing), which is not supported; {_STATIC}")
    if ctx.opset >= 10:
        k_value = np.asarray(ctx.const(1, "K")).ravel()
        if k_value.size != 1:  # the spec: a 1-D tensor holding a single value
            raise ctx.error(f"K {k_value.tolist()} must be one value")
        k = int(k_value[0])
    else:
        k = int(ctx.attr("k"))
    dims = ctx.dims(0)
    axis = _norm_axis(ctx, int(ctx.attr("axis", -1)), None if dims is None else len(dims))
    size = dims[axis] if dims is not None and isinstance(dims[axis], int) else None
    if k < 1 or (size is not None and k > size):
        raise ctx.error(f"K={k} must be in [1, {size if size is not None else 'the axis size'}] "
                        f"(axis {axis} of '{ctx.input_name(0)}')")
    # sorted=0 leaves the order open: the sorted order is one of the valid answers
    out = ctx.op("topk", ctx.input(0), k=k, axis=axis, largest=bool(ctx.attr("largest", 1)))
    return [out[0], out[1]]


def _data_dependent_shape(ctx):
    outs = _folded(ctx)
    if outs is not None:
        return outs
    raise ctx.error(f"{ctx.op_type}'s output shape depends on the data, which is not supported (data-dependent "
                    f"routing); {_STATIC}")


for _op in ("NonZero", "Compress", "Unique"):
    converter(_op)(_data_dependent_shape)


# ----------------------------------------------------------------------------- OneHot

@converter("OneHot")
def one_hot(ctx):
    depth_value = np.asarray(ctx.const(1, "depth")).ravel()
    values = np.asarray(ctx.const(2, "values")).ravel()
    if depth_value.size != 1 or values.size != 2:
        raise ctx.error(f"depth {depth_value.tolist()} must be one value and values {values.tolist()} two "
                        f"(off, on)")
    depth = int(depth_value[0])
    if depth < 1:
        raise ctx.error(f"depth {depth} must be positive")
    rank = ctx.need_rank(0, "to place the one-hot axis")
    axis = _norm_axis(ctx, int(ctx.attr("axis", -1)), rank + 1)
    dtype = ctx.imp.elem_type(ctx.input_name(0)) or np.dtype(np.int64)
    ids = ctx.input(0)
    if np.dtype(dtype).kind != "i":  # float indices are cast to int64 (ONNX spec); unsigned too (i - depth)
        ids, dtype = ctx.op("Cast", ids, dtype="int64", suffix="ids"), np.dtype(np.int64)
    ids = ctx.op("expand_dims", ids, axis=axis, suffix="ids_axis")
    shape = [1] * (rank + 1)
    shape[axis] = depth
    positions = np.arange(depth, dtype=dtype).reshape(shape)
    # index i is class i, and so is i - depth (counted from the end); other values match nothing
    hit = ctx.op("broadcast_equal", ids, ctx.param(positions, None, "classes"), suffix="hit")
    hit_end = ctx.op("broadcast_equal", ids, ctx.param(positions - depth, None, "classes_end"), suffix="hit_end")
    hits = ctx.op("elemwise_add", hit, hit_end, suffix="hits")
    # off and on as (constant) tensors: a run in another float type takes them in that type
    ones = (1,) * (rank + 1)
    off = ctx.param(values[:1].reshape(ones), None, "off")
    on = ctx.param(values[1:].reshape(ones), None, "on")
    return [ctx.op("where", hits, on, off)]


# ----------------------------------------------------------------------------- ScatterElements

@converter("ScatterElements", "Scatter")
def scatter_elements(ctx):
    from ..ops.scatter_nd import REDUCTIONS

    reduction = ctx.attr("reduction", "none") or "none"
    if reduction not in REDUCTIONS:
        raise ctx.error(f"reduction '{reduction}' is not supported (one of {', '.join(REDUCTIONS)})")
    dshape = ctx.need_shape(0, "to address every element")
    ishape = ctx.need_shape(1, "to address every element")
    rank = len(dshape)
    axis = _norm_axis(ctx, int(ctx.attr("axis", 0)), rank)
    if len(ishape) != rank or ctx.shape(2) not in (None, tuple(ishape)):
        raise ctx.error(f"indices {tuple(ishape)} and updates {ctx.shape(2)} must have one shape, of the rank of "
                        f"data {tuple(dshape)}")
    over = [d for d in range(rank) if d != axis and ishape[d] > dshape[d]]
    if over:
        raise ctx.error(f"indices {tuple(ishape)} are larger than data {tuple(dshape)} in axis {over[0]}")
    grid = np.indices(ishape)  # the position of each element, one array per axis
    if ctx.is_const(1):
        idx = np.asarray(ctx.const(1)).astype(np.int64)
        check_index_range(ctx, idx, dshape[axis], axis)
        grid[axis] = idx
        tuples = ctx.param(np.ascontiguousarray(np.moveaxis(grid, 0, -1)), ctx.input_name(1), "tuples")
    else:
        dtype = ctx.imp.elem_type(ctx.input_name(1)) or np.dtype(np.int64)
        parts = []
        for d in range(rank):
            part = ctx.input(1) if d == axis else ctx.param(grid[d].astype(dtype), None, f"pos{d}")
            parts.append(ctx.op("expand_dims", part, axis=rank, suffix=f"tuple{d}"))
        tuples = ctx.op("Concat", *parts, dim=rank, num_args=rank, suffix="tuples")
    return [ctx.op("ScatterND", ctx.input(0), tuples, ctx.input(2), reduction=reduction)]
