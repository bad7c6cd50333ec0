"""Kernels the JAX step needs where the registry's kernel is NumPy-only (it calls ``np.``
functions, which a traced ``jax.numpy`` array refuses). Each has the registry signature
``forward(attrs, inputs, ctx)`` and takes its array module from ``ctx.xp``, so it also runs
on NumPy; the step tries this table first, then the array-module-generic kernels of the GPU
runtime (backend/gpu_kernels.py), then the registry's own kernel with ``ctx.xp`` set."""
from __future__ import annotations

import numpy as np

from ..errors import Error
from ..ops._tiles import adds_bias
from ..ops.loss import _so_norm_scale, class_labels


def _softmax(xp, x, axis):
    z = x - x.max(axis=axis, keepdims=True)
    e = xp.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_output(attrs, inputs, ctx):
    """SoftmaxOutput's forward: the softmax of each row (MXNet's 2-D view unless
    multi_output or preserve_shape), as ops/loss.py computes it."""
    x = inputs[0]
    if attrs["multi_output"]:
        y = _softmax(ctx.xp, x, 1)
    elif attrs["preserve_shape"]:
        y = _softmax(ctx.xp, x, -1)
    else:
        y = _softmax(ctx.xp, x.reshape(x.shape[0], -1), 1).reshape(x.shape)
    return [y.astype(x.dtype)]


def _targets(xp, attrs, lab, k):
    """One-hot (label-smoothed) targets of shape lab.shape + (k,); ignored rows' labels (any
    value) are mapped to class 0 first, as ops/loss.py's _class_targets_safe does."""
    idx = lab.astype(xp.int32)
    if attrs["use_ignore"]:
        idx = xp.where(idx == int(attrs["ignore_label"]), 0, idx)
    onehot = xp.arange(k) == idx[..., None]
    alpha = attrs["smooth_alpha"]
    if alpha == 0.0:
        return onehot.astype(lab.dtype)
    return xp.where(onehot, 1.0 - alpha, alpha / max(k - 1, 1)).astype(lab.dtype)


def softmax_output_backward(attrs, inputs, ctx):
    """_backward_SoftmaxOutput: (out - target) * grad_scale / norm (ops/loss.py's
    softmax_output_grad, written against the array API: labels are not range-checked here
    (traced values); the step checks them on the host first, step.check_labels)."""
    xp = ctx.xp
    out, label = inputs[0], inputs[1]
    rest = list(inputs[2:])
    count = rest.pop(0) if attrs["with_count"] else None
    dy = rest.pop(0) if attrs["out_grad"] else None
    scale = attrs.get("norm_scale")
    if tuple(label.shape) == tuple(out.shape):  # probability labels
        grad = (out - label) * (attrs["grad_scale"] if scale is None else scale)
    else:
        if scale is None and attrs["normalization"] != "valid":
            scale = _so_norm_scale(attrs, out.shape, label.shape)
        flat = label.reshape(-1)
        ignore = int(attrs["ignore_label"])
        lab, k = class_labels(attrs, out.shape, label)  # ops/loss.py's
        if attrs["multi_output"]:
            grad = out.reshape(out.shape[0], k, -1) - xp.moveaxis(_targets(xp, attrs, lab, k), -1, 1)
            keep = (lab.astype(xp.int32) != ignore)[:, None, :]
        else:
            grad = out.reshape(-1, k) - _targets(xp, attrs, lab, k)
            keep = (lab.astype(xp.int32) != ignore)[:, None]
        if attrs["use_ignore"]:
            grad = grad * keep
        if attrs["normalization"] == "valid":
            valid = (flat.astype(xp.int32) != ignore).sum() if count is None else count.reshape(-1)[0]
            scale = attrs["grad_scale"] / xp.maximum(xp.round(valid), 1)
        grad = (grad * scale).reshape(out.shape)
    if dy is not None:
        grad = grad * dy
    return [grad.astype(out.dtype)]


# ----------------------------------------------------------------------------- Convolution
# The registry's convolution builds im2col windows as strided views, which jax.numpy has no
# way to make; XLA's own convolution computes the same sums, and its transpose (jax.vjp) the
# two backward convolutions.

_SPATIAL = {1: "W", 2: "HW", 3: "DHW"}


def _conv_fn(attrs, rank):
    import jax

    nd = rank - 2
    if nd not in _SPATIAL or attrs.get("layout") not in (None, "NC" + _SPATIAL[nd]):
        raise Error(f"Convolution: the JAX step runs NCW/NCHW/NCDHW convolutions, got rank {rank} layout "
                    f"{attrs.get('layout')}")
    vec = lambda name, d: tuple(attrs.get(name) or ()) or (d,) * nd  # noqa: E731
    # a spatial tile pads as its halo leaves (tile_pad: lo..., hi...; negative crops), as the
    # registry's Geometry does; the whole tensor pads `pad` on both sides
    tile_pad = tuple(attrs.get("tile_pad") or ())
    pads = [(tile_pad[i], tile_pad[nd + i]) for i in range(nd)] if tile_pad else [(p, p) for p in vec("pad", 0)]
    dims = ("NC" + _SPATIAL[nd], "OI" + _SPATIAL[nd], "NC" + _SPATIAL[nd])

    def conv(x, w):
        # XLA convolves equal dtypes only; the registry computes in the promoted one
        # (float32 data, float64 weights under JAX_ENABLE_X64: float64)
        t = jax.numpy.result_type(x, w)
        return jax.lax.conv_general_dilated(x.astype(t), w.astype(t), vec("stride", 1), pads,
                                            rhs_dilation=vec("dilate", 1), dimension_numbers=dims,
                                            feature_group_count=attrs["num_group"])
    return conv


def _pull(fn, primal, cotangent):
    """The vjp of `fn` at `primal` applied to `cotangent`, cast to the output's dtype first:
    jax.vjp takes only a cotangent of the output's dtype, and a float32 gradient meets a
    float64 output where the weights are float64 (the registry promotes, then casts back)."""
    import jax

    y, pull = jax.vjp(fn, primal)
    return pull(cotangent.astype(y.dtype))[0]


def _weight_shape(attrs, x):
    return (attrs["num_filter"], x.shape[1] // attrs["num_group"]) + tuple(attrs["kernel"])


def convolution(attrs, inputs, ctx):
    x, w = inputs[0], inputs[1]
    y = _conv_fn(attrs, x.ndim)(x, w)
    if adds_bias(attrs):
        y = y + inputs[2].reshape((1, -1) + (1,) * (x.ndim - 2))
    return [y.astype(x.dtype)]


def convolution_backward_data(attrs, inputs, ctx):
    dy, w, x = inputs
    return [_pull(lambda v: _conv_fn(attrs, x.ndim)(v, w), x, dy).astype(dy.dtype)]


def convolution_backward_weight(attrs, inputs, ctx):
    import jax.numpy as jnp

    dy, x = inputs
    w0 = jnp.zeros(_weight_shape(attrs, x), jnp.result_type(x, dy))
    return [_pull(lambda w: _conv_fn(attrs, x.ndim)(x, w), w0, dy).astype(dy.dtype)]


def deconvolution(attrs, inputs, ctx):
    """Deconvolution (ONNX ConvTranspose): the data gradient of the convolution whose output
    this op's data is (ops/deconv.py's geometry, tile paddings included), through jax.vjp."""
    import jax.numpy as jnp

    from ..ops.deconv import DeconvGeometry, _tile_groups

    x, w = inputs[0], inputs[1]
    geo = DeconvGeometry(_tile_groups(attrs, x.shape, w.shape), x.shape)
    if geo.conv is None:  # the tile's data lies in adj's zeros
        y = jnp.zeros(geo.out_shape, x.dtype)
    else:
        conv = _conv_fn(geo.conv_attrs, x.ndim)
        y = _pull(lambda v: conv(v, w), jnp.zeros(geo.out_shape, x.dtype), x)
    if not attrs["no_bias"]:
        y = y + inputs[2].reshape((1, -1) + (1,) * geo.nd)
    return [y.astype(x.dtype)]


# ----------------------------------------------------------------------------- Pooling
# A tile pools the windows of its Frame (ops/pooling.py: the tile hooks' tile_windows,
# tile_data_lo, tile_dx, tile_spatial) over its data slab, padded or cropped to the rows those
# windows span, with the whole op's avg divisors; the whole op is the frame of everything.

def _pool_frame(attrs, batch_channels, spatial, n_windows=None):
    from ..ops.pooling import Frame, Geometry, _whole_spatial

    geo = Geometry(attrs, tuple(batch_channels) + _whole_spatial(attrs, spatial))
    return geo, Frame(attrs, geo, n_windows)


def _pool_windows(attrs, geo, frame, x, x_lo):
    """The frame's pooled windows of a slab `x` of the input starting at rows `x_lo` (the
    rows its windows span outside the slab: padding, or, for avg/sum, zeros)."""
    import jax
    import jax.numpy as jnp

    from ..ops.pooling import _lowest

    kind = attrs["pool_type"]
    fill = _lowest(x.dtype) if kind == "max" else 0
    lo = [d - o for d, o in zip(x_lo, frame.origin)]
    hi = [o + sp - d - n for o, sp, d, n in zip(frame.origin, frame.span, x_lo, x.shape[2:])]
    slab = jax.lax.pad(x, jnp.asarray(fill, x.dtype), [(0, 0, 0), (0, 0, 0)] + [(a, b, 0) for a, b in zip(lo, hi)])
    window, strides = (1, 1) + tuple(geo.kernel), (1, 1) + tuple(geo.stride)
    # the monoids' identities as Python scalars: what jax differentiates (reduce_window_max/sum)
    if kind == "max":
        return jax.lax.reduce_window(slab, -np.inf, jax.lax.max, window, strides, "VALID")
    y = jax.lax.reduce_window(slab, 0.0, jax.lax.add, window, strides, "VALID")
    if kind == "avg":
        y = y / frame.counts(geo, attrs["count_include_pad"] is not False).astype(x.dtype)
    return y


def pooling(attrs, inputs, ctx):
    x = inputs[0]
    geo, frame = _pool_frame(attrs, x.shape[:2], x.shape[2:])
    return [_pool_windows(attrs, geo, frame, x, frame.dlo).astype(x.dtype)]


def pooling_backward(attrs, inputs, ctx):
    """dx over the frame's dx tile: the transpose of pooling the dx tile's rows alone (avg,
    sum: linear), or of pooling the data slab, routed to each window's first maximum as
    XLA's select-and-scatter does, then cut to the dx tile (max)."""
    import jax
    import jax.numpy as jnp

    from ..ops.pooling import _bwd_data_shape

    dy = inputs[0]
    x = inputs[1] if len(inputs) > 1 else None
    data = x.shape if x is not None else _bwd_data_shape(attrs, dy.shape)
    geo, frame = _pool_frame(attrs, dy.shape[:2], data[2:], dy.shape[2:])
    if attrs["pool_type"] != "max":
        v0 = jnp.zeros(tuple(dy.shape[:2]) + tuple(frame.xn), dy.dtype)
        _, pull = jax.vjp(lambda v: _pool_windows(attrs, geo, frame, v, frame.xlo), v0)
        return [pull(dy)[0].astype(dy.dtype)]
    _, pull = jax.vjp(lambda v: _pool_windows(attrs, geo, frame, v, frame.dlo), x)
    dslab = pull(dy)[0]  # over the data slab, which starts at dlo
    lo = [d - x0 for d, x0 in zip(frame.dlo, frame.xlo)]
    hi = [x0 + n - d - m for x0, n, d, m in zip(frame.xlo, frame.xn, frame.dlo, x.shape[2:])]
    return [jax.lax.pad(dslab, jnp.asarray(0, dy.dtype),
                        [(0, 0, 0), (0, 0, 0)] + [(a, b, 0) for a, b in zip(lo, hi)]).astype(dy.dtype)]


# ----------------------------------------------------------------------------- Embedding

def _positions(xp, indices, n, mode):
    """ops/gather.py's map_indices without its checks: clipped into [0, n), wrapped, or under
    mode='raise' (ONNX Gather) negative indices counted from the end. The step checks index
    inputs on the host first (out of range, not integers: Error), since a traced index has
    no value to check."""
    idx = indices.astype(xp.int32)
    if mode == "clip":
        return xp.clip(idx, 0, n - 1)
    if mode == "wrap":
        return xp.mod(idx, n)
    return xp.where(idx < 0, idx + n, idx)


def _embedding_rows(xp, data, attrs):
    return _positions(xp, data, attrs["input_dim"], attrs["mode"])


def embedding(attrs, inputs, ctx):
    data, weight = inputs
    return [weight[_embedding_rows(ctx.xp, data, attrs)]]


def embedding_backward(attrs, inputs, ctx):
    """_backward_Embedding: rows [row_begin, row_begin + num_rows) of the weight gradient, a
    scatter-add of dy's rows (ops/embedding.py selects the rows in range with a boolean mask,
    which a traced array cannot take; out-of-range rows are dropped here instead)."""
    xp = ctx.xp
    dy, data = inputs
    n = attrs["num_rows"] if attrs["num_rows"] is not None else attrs["input_dim"]
    rows = _embedding_rows(xp, data, attrs).reshape(-1) - attrs["row_begin"]
    rows = xp.where((rows >= 0) & (rows < n), rows, n)  # index n: out of bounds, dropped
    dw = xp.zeros((n, attrs["output_dim"]), dtype=dy.dtype)
    return [dw.at[rows].add(dy.reshape(-1, attrs["output_dim"]), mode="drop")]


def take(attrs, inputs, ctx):
    """take (ONNX Gather): rows of `a` along `axis`; a tile's rows outside [row_begin,
    row_begin + its size) read as 0, as ops/gather.py's kernel."""
    from ..ops.gather import _take_axis

    xp = ctx.xp
    a, indices = inputs
    axis = _take_axis("take", attrs, a.shape)
    n = attrs["axis_size"] if attrs["axis_size"] is not None else a.shape[axis]
    local = _positions(xp, indices, n, attrs["mode"]) - attrs["row_begin"]
    keep = (local >= 0) & (local < a.shape[axis])
    out = xp.take(a, xp.where(keep, local, 0), axis=axis)
    mask = keep.reshape((1,) * axis + keep.shape + (1,) * (a.ndim - axis - 1))
    return [(out * mask).astype(a.dtype)]


def take_backward(attrs, inputs, ctx):
    """_backward_take: dy's rows scatter-added into rows [row_begin, row_begin + num_rows)."""
    from ..ops.gather import _take_bwd_geometry

    xp = ctx.xp
    dy, indices = inputs
    axis, n = _take_bwd_geometry(attrs, dy.shape, indices.shape)
    rows = attrs["num_rows"] if attrs["num_rows"] is not None else n
    local = _positions(xp, indices, n, attrs["mode"]).reshape(-1) - attrs["row_begin"]
    local = xp.where((local >= 0) & (local < rows), local, rows)  # index rows: dropped
    lead, rest = dy.shape[:axis], dy.shape[axis + indices.ndim:]
    p, s = int(np.prod(lead)), int(np.prod(rest))
    target = xp.zeros((p, rows, s), dtype=dy.dtype)
    target = target.at[:, local].add(dy.reshape(p, local.size, s), mode="drop")
    return [target.reshape(lead + (rows,) + rest)]


def _nd_local(xp, indices, full, begin, sizes):
    """gather_nd's positions relative to a tile (begin, sizes): (M, n) local positions, 0 where
    the tile does not hold the slice, and the (n,) mask of those it holds."""
    idx = indices.reshape(indices.shape[0], -1)
    pos = xp.stack([_positions(xp, idx[d], full[d], "raise") for d in range(idx.shape[0])])
    local = pos - xp.asarray(begin, dtype=xp.int32).reshape(-1, 1)
    keep = ((local >= 0) & (local < xp.asarray(sizes, dtype=xp.int32).reshape(-1, 1))).all(axis=0)
    return xp.where(keep, local, 0), keep


def gather_nd(attrs, inputs, ctx):
    """gather_nd (ONNX GatherND): data's slices at the coordinates in indices' first dim; a
    tile's slices it does not hold read as 0 (ops/gather.py's kernel without its Python-side
    branch on the mask, which a traced array cannot take)."""
    xp = ctx.xp
    data, indices = inputs
    m = indices.shape[0]
    full = attrs["full_shape"] or data.shape[:m]
    local, keep = _nd_local(xp, indices, full, attrs["tile_begin"] or (0,) * m, data.shape[:m])
    out = data[tuple(local)] * keep.reshape((-1,) + (1,) * (data.ndim - m)).astype(data.dtype)
    return [out.reshape(indices.shape[1:] + data.shape[m:])]


def gather_nd_backward(attrs, inputs, ctx):
    """_backward_gather_nd: dy's slices scatter-added into the tile of data's gradient (slices
    outside the tile dropped)."""
    xp = ctx.xp
    dy, indices = inputs
    shape = tuple(attrs["shape"])
    m = indices.shape[0]
    full = attrs["full_shape"] or shape[:m]
    local, keep = _nd_local(xp, indices, full, attrs["tile_begin"] or (0,) * m, shape[:m])
    rows = int(np.prod(shape[:m]))
    flat = xp.ravel_multi_index(tuple(local), shape[:m], mode="clip")
    flat = xp.where(keep, flat, rows)  # index rows: out of bounds, dropped
    s = int(np.prod(shape[m:]))
    target = xp.zeros((rows, s), dtype=dy.dtype)
    return [target.at[flat].add(dy.reshape(-1, s), mode="drop").reshape(shape)]


def _el_local(xp, attrs, indices, axis, n, rows):
    """gather_elements' rows along `axis` relative to a tile of `rows` rows starting at
    row_begin, 0 where the tile does not hold them, and the mask of those it holds."""
    local = _positions(xp, indices, n, "raise") - attrs["row_begin"]
    keep = (local >= 0) & (local < rows)
    return xp.where(keep, local, 0), keep


def gather_elements(attrs, inputs, ctx):
    """gather_elements (ONNX GatherElements): ops/gather.py's kernel without its Python-side
    branch on the mask (RoBERTa's position ids)."""
    from ..ops.gather import _el_check

    xp = ctx.xp
    data, indices = inputs
    axis = _el_check("gather_elements", attrs["axis"], data.shape, indices.shape)
    n = attrs["axis_size"] if attrs["axis_size"] is not None else data.shape[axis]
    local, keep = _el_local(xp, attrs, indices, axis, n, data.shape[axis])
    view = data[tuple(slice(None) if d == axis else slice(0, indices.shape[d]) for d in range(data.ndim))]
    return [xp.take_along_axis(view, local, axis=axis) * keep.astype(data.dtype)]


def gather_elements_backward(attrs, inputs, ctx):
    """_backward_gather_elements: dy scatter-added along `axis` into the tile of data's
    gradient (rows outside the tile dropped)."""
    from ..ops.gather import norm_axis

    xp = ctx.xp
    dy, indices = inputs
    shape = tuple(attrs["shape"])
    axis = norm_axis("_backward_gather_elements", attrs["axis"], len(shape), shape=shape)
    n = attrs["axis_size"] if attrs["axis_size"] is not None else shape[axis]
    local, keep = _el_local(xp, attrs, indices, axis, n, shape[axis])
    grid = list(xp.indices(indices.shape, sparse=True))
    grid[axis] = xp.where(keep, local, shape[axis])  # row shape[axis]: out of bounds, dropped
    where = tuple(xp.broadcast_to(g, indices.shape) for g in grid)
    return [xp.zeros(shape, dy.dtype).at[where].add(dy, mode="drop")]


def topk(attrs, inputs, ctx):
    """topk (ops/topk.py): argsort with stable=True, as jax.numpy spells it; ties lower index
    first, the largest by a stable sort of the reversed axis, reversed."""
    xp, x = ctx.xp, inputs[0]
    axis = attrs["axis"] % x.ndim
    if attrs["largest"]:
        order = x.shape[axis] - 1 - xp.flip(xp.argsort(xp.flip(x, axis=axis), axis=axis, stable=True), axis=axis)
    else:
        order = xp.argsort(x, axis=axis, stable=True)
    idx = xp.take(order, xp.arange(attrs["k"]), axis=axis)
    return [xp.take_along_axis(x, idx, axis=axis), idx.astype(xp.int64)]


def topk_backward(attrs, inputs, ctx):
    """_backward_topk: dy put at the indices along the axis, as a sum over the k ranks of dy
    times (index == position): no write into a buffer (JAX arrays are immutable)."""
    xp = ctx.xp
    dy, idx = inputs
    axis = attrs["axis"] % dy.ndim
    positions = xp.arange(attrs["size"]).reshape((attrs["size"],) + (1,) * (dy.ndim - axis - 1))
    hit = xp.expand_dims(idx, axis + 1) == positions  # rank j of idx, then position p
    return [(xp.expand_dims(dy, axis + 1) * hit.astype(dy.dtype)).sum(axis=axis)]


#: op name -> kernel for the JAX step (ahead of backend/gpu_kernels.KERNELS)
KERNELS = {
    # numpy.abs on a traced array recurses in jax.numpy's jit of absolute (jax 0.10)
    "abs": lambda attrs, inputs, ctx: [ctx.xp.abs(inputs[0])],
    "topk": topk,
    "_backward_topk": topk_backward,
    "take": take,
    "_backward_take": take_backward,
    "gather_nd": gather_nd,
    "gather_elements": gather_elements,
    "_backward_gather_elements": gather_elements_backward,
    "_backward_gather_nd": gather_nd_backward,
    "Embedding": embedding,
    "_backward_Embedding": embedding_backward,
    "Convolution": convolution,
    "_backward_Convolution_data": convolution_backward_data,
    "_backward_Convolution_weight": convolution_backward_weight,
    "Deconvolution": deconvolution,
    "Pooling": pooling,
    "_backward_Pooling": pooling_backward,
    "SoftmaxOutput": softmax_output,
    "Softmax": softmax_output,
    "_backward_SoftmaxOutput": softmax_output_backward,
}
