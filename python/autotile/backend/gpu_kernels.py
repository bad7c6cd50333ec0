"""Array-module-generic kernels for the heavy ops, used by the GPU runtime with CuPy
(cuBLAS GEMMs, im2col convolution) and tested on the CPU with NumPy against the registry's
NumPy kernels (tests/gpu/test_gpu_kernels.py).

Each kernel has the registry signature ``forward(attrs, inputs, ctx)`` and takes its array
module from ``ctx.xp``. Shapes, attribute handling and validation are the registry ops' own
(``Geometry``, tile helpers); only the array calls differ. Ops not listed in ``KERNELS`` run
their registry kernel on device arrays when that works (NumPy's dispatch protocols) or on the
host (see gpu_runtime.py)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..ops import conv as _conv
from ..ops.activation import act, act_grad
from ..ops import dense as _dense
from ..ops import pooling as _pool
from ..ops.im2col import batch_chunks


def _xp(ctx):
    return ctx.xp if ctx is not None and ctx.xp is not None else np


def _as_strided(xp, x, shape, strides):
    if xp is np:
        return np.lib.stride_tricks.as_strided(x, shape=shape, strides=strides, writeable=False)
    return xp.lib.stride_tricks.as_strided(x, shape=shape, strides=strides)


def _pad(xp, x, pad: Sequence[int], extra: Sequence[int] = None, value=0):
    extra = extra or [0] * len(pad)
    if not any(pad) and not any(extra):
        return x
    widths = [(0, 0), (0, 0)] + [(p, p + e) for p, e in zip(pad, extra)]
    return xp.pad(x, widths, mode="constant", constant_values=value)


def _windows(xp, xpad, kernel, stride, dilate, out):
    """im2col as a strided view (N, C, *kernel, *out), as autotile.ops.im2col.windows."""
    s = xpad.strides
    nd = len(kernel)
    shape = tuple(xpad.shape[:2]) + tuple(kernel) + tuple(out)
    strides = tuple(s[:2]) + tuple(s[2 + i] * dilate[i] for i in range(nd)) + tuple(s[2 + i] * stride[i] for i in range(nd))
    return _as_strided(xp, xpad, shape, strides)


def _col2im_add(dxpad, cols, kernel, stride, dilate):
    nd = len(kernel)
    out = cols.shape[2 + nd:]
    for k in np.ndindex(*kernel):
        region = (slice(None), slice(None)) + tuple(
            slice(k[i] * dilate[i], k[i] * dilate[i] + stride[i] * (out[i] - 1) + 1, stride[i]) for i in range(nd))
        dxpad[region] += cols[(slice(None), slice(None)) + k]


def _crop(xpad, pad, size):
    return xpad[(slice(None), slice(None)) + tuple(slice(p, p + s) for p, s in zip(pad, size))]


# ----------------------------------------------------------------------------- FullyConnected

def fc_forward(attrs, inputs, ctx):
    x, w = inputs[0], inputs[1]
    y = _dense._as2d(attrs, x) @ w.T  # cuBLAS GEMM under CuPy
    if not attrs["no_bias"]:
        y = y + inputs[2]
    return [y.reshape(_dense._out_shape(attrs, x.shape)).astype(x.dtype, copy=False)]


def fc_backward_data(attrs, inputs, ctx):
    dy, w, x = inputs
    return [(dy.reshape(-1, attrs["num_hidden"]) @ w).reshape(x.shape).astype(dy.dtype, copy=False)]


def fc_backward_weight(attrs, inputs, ctx):
    dy, x = inputs
    return [(dy.reshape(-1, attrs["num_hidden"]).T @ _dense._as2d(attrs, x)).astype(dy.dtype, copy=False)]


def fc_backward_bias(attrs, inputs, ctx):
    dy = inputs[0]
    return [dy.reshape(-1, attrs["num_hidden"]).sum(axis=0).astype(dy.dtype, copy=False)]


# ----------------------------------------------------------------------------- Convolution

def _conv_forward(xp, x, w, geo):
    nd, g_in, g_out = geo.nd, geo.cin_g, geo.cout_g
    xpad = _pad(xp, x, geo.pad)
    out = xp.empty((x.shape[0], geo.cout) + geo.out, dtype=np.result_type(x.dtype, w.dtype))
    red = tuple(range(1, 2 + nd))
    per_item = g_in * int(np.prod(geo.kernel)) * int(np.prod(geo.out))
    for chunk in batch_chunks(x.shape[0], per_item):
        cols = _windows(xp, xpad[chunk], geo.kernel, geo.stride, geo.dilate, geo.out)
        for g in range(geo.groups):
            wg = w[g * g_out:(g + 1) * g_out]
            yg = xp.tensordot(wg, cols[:, g * g_in:(g + 1) * g_in], axes=(red, red))  # im2col + GEMM
            out[chunk, g * g_out:(g + 1) * g_out] = xp.moveaxis(yg, 0, 1)
    return out


def conv_forward(attrs, inputs, ctx):
    xp = _xp(ctx)
    x, w = inputs[0], inputs[1]
    geo = _conv._kernel_geometry(_conv._from_inputs(_conv._depthwise_tile(attrs, x.shape[1], w.shape), w.shape[0]),
                                 x.shape)
    if tuple(w.shape) != geo.weight_shape:
        raise ValueError(f"weight has shape {tuple(w.shape)}, expected {geo.weight_shape}")
    y = _conv_forward(xp, x, w, geo)
    if not attrs["no_bias"]:
        y += inputs[2].reshape((1, -1) + (1,) * geo.nd)
    return [y.astype(x.dtype, copy=False)]


def conv_backward_data(attrs, inputs, ctx):
    xp = _xp(ctx)
    dy, w = inputs[0], inputs[1]
    donor = inputs[2].shape if len(inputs) > 2 else None
    attrs = _conv._from_inputs(attrs, w.shape[0])
    if donor is not None:
        attrs = _conv._depthwise_tile(attrs, donor[1], w.shape)
    geo = _conv._kernel_geometry(attrs, _conv._data_shape_from(attrs, dy.shape, w.shape, donor))
    nd, g_in, g_out = geo.nd, geo.cin_g, geo.cout_g
    padded = tuple(s + 2 * p for s, p in zip(geo.spatial, geo.pad))
    dxpad = xp.zeros((dy.shape[0], geo.cin) + padded, dtype=np.result_type(dy.dtype, w.dtype))
    for g in range(geo.groups):
        wg = w[g * g_out:(g + 1) * g_out]
        cols = xp.tensordot(wg, dy[:, g * g_out:(g + 1) * g_out], axes=([0], [1]))  # (Cin_g, *K, N, *O)
        cols = xp.moveaxis(cols, 1 + nd, 0)
        _col2im_add(dxpad[:, g * g_in:(g + 1) * g_in], cols, geo.kernel, geo.stride, geo.dilate)
    return [xp.ascontiguousarray(_crop(dxpad, geo.pad, geo.spatial)).astype(dy.dtype, copy=False)]


def conv_backward_weight(attrs, inputs, ctx):
    xp = _xp(ctx)
    dy, x = inputs
    attrs = _conv._from_inputs(attrs, dy.shape[1])
    attrs = _conv._depthwise_tile(attrs, x.shape[1], (dy.shape[1], 1))
    geo = _conv._kernel_geometry(attrs, x.shape)
    nd, g_in, g_out = geo.nd, geo.cin_g, geo.cout_g
    xpad = _pad(xp, x, geo.pad)
    dw = xp.zeros(geo.weight_shape, dtype=np.result_type(dy.dtype, x.dtype))
    dy_axes = (0,) + tuple(range(2, 2 + nd))
    col_axes = (0,) + tuple(range(2 + nd, 2 + 2 * nd))
    per_item = g_in * int(np.prod(geo.kernel)) * int(np.prod(geo.out))
    for chunk in batch_chunks(x.shape[0], per_item):
        cols = _windows(xp, xpad[chunk], geo.kernel, geo.stride, geo.dilate, geo.out)
        for g in range(geo.groups):
            dw[g * g_out:(g + 1) * g_out] += xp.tensordot(
                dy[chunk, g * g_out:(g + 1) * g_out], cols[:, g * g_in:(g + 1) * g_in], axes=(dy_axes, col_axes))
    return [dw.astype(dy.dtype, copy=False)]


def conv_backward_bias(attrs, inputs, ctx):
    dy = inputs[0]
    return [dy.sum(axis=(0,) + tuple(range(2, dy.ndim))).astype(dy.dtype, copy=False)]


# ----------------------------------------------------------------------------- Pooling

def pool_forward(attrs, inputs, ctx):
    xp = _xp(ctx)
    x = inputs[0]
    geo = _pool._kernel_geometry(attrs, x.shape)
    k_axes = tuple(range(2, 2 + geo.nd))
    if attrs["pool_type"] == "max":
        win = _windows(xp, _pad(xp, x, geo.pad, geo.extra, _pool._lowest(x.dtype)), geo.kernel, geo.stride,
                       (1,) * geo.nd, geo.out)
        y = win.max(axis=k_axes)
    else:
        win = _windows(xp, _pad(xp, x, geo.pad, geo.extra, 0), geo.kernel, geo.stride, (1,) * geo.nd, geo.out)
        y = win.sum(axis=k_axes)
        if attrs["pool_type"] == "avg":
            y = y / xp.asarray(np.maximum(geo.counts(attrs["count_include_pad"] is not False), 1))
    return [xp.ascontiguousarray(y).astype(x.dtype, copy=False)]


def pool_backward(attrs, inputs, ctx):
    xp = _xp(ctx)
    dy = inputs[0]
    x = inputs[1] if len(inputs) > 1 else None
    geo = _pool._kernel_geometry(attrs, x.shape if x is not None else _pool._bwd_data_shape(attrs, dy.shape))
    nd = geo.nd
    padded = tuple(s + 2 * p + e for s, p, e in zip(geo.spatial, geo.pad, geo.extra))
    dxpad = xp.zeros(tuple(dy.shape[:2]) + padded, dtype=dy.dtype)
    k_shape = geo.kernel
    if attrs["pool_type"] == "max":
        win = _windows(xp, _pad(xp, x, geo.pad, geo.extra, _pool._lowest(x.dtype)), k_shape, geo.stride, (1,) * nd,
                       geo.out)
        n_k = int(np.prod(k_shape))
        flat = win.reshape(tuple(win.shape[:2]) + (n_k,) + geo.out)
        first = flat.argmax(axis=2)  # the first maximum, as the NumPy kernel
        hot = xp.arange(n_k).reshape((1, 1, n_k) + (1,) * nd) == first[:, :, None]
        cols = (hot * dy[:, :, None]).reshape(win.shape)
    else:
        g = dy
        if attrs["pool_type"] == "avg":
            g = dy / xp.asarray(np.maximum(geo.counts(attrs["count_include_pad"] is not False), 1))
        cols = xp.broadcast_to(g.reshape(tuple(g.shape[:2]) + (1,) * nd + geo.out),
                               tuple(dy.shape[:2]) + k_shape + geo.out)
    _col2im_add(dxpad, cols, k_shape, geo.stride, (1,) * nd)
    return [xp.ascontiguousarray(_crop(dxpad, geo.pad, geo.spatial)).astype(dy.dtype, copy=False)]


# ----------------------------------------------------------------------------- element-wise

def activation(attrs, inputs, ctx):
    return [act(attrs["act_type"], inputs[0], _xp(ctx)).astype(inputs[0].dtype, copy=False)]


def activation_backward(attrs, inputs, ctx):
    dy, y = inputs
    return [act_grad(attrs["act_type"], y, dy, _xp(ctx)).astype(dy.dtype, copy=False)]


def sgd_update(attrs, inputs, ctx):
    xp = _xp(ctx)
    w, g = inputs
    g = attrs["rescale_grad"] * g
    if attrs["clip_gradient"] >= 0:
        g = xp.clip(g, -attrs["clip_gradient"], attrs["clip_gradient"])
    return [((1.0 - attrs["lr"] * attrs["wd"]) * w - attrs["lr"] * g).astype(w.dtype, copy=False)]


#: op name -> array-module-generic kernel
KERNELS = {
    "FullyConnected": fc_forward,
    "_backward_FullyConnected_data": fc_backward_data,
    "_backward_FullyConnected_weight": fc_backward_weight,
    "_backward_FullyConnected_bias": fc_backward_bias,
    "Convolution": conv_forward,
    "_backward_Convolution_data": conv_backward_data,
    "_backward_Convolution_weight": conv_backward_weight,
    "_backward_Convolution_bias": conv_backward_bias,
    "Pooling": pool_forward,
    "_backward_Pooling": pool_backward,
    "Activation": activation,
    "_backward_Activation": activation_backward,
    "sgd_update": sgd_update,
}
