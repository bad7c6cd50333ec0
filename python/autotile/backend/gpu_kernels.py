"""Array-module-generic kernels for the heavy ops, used by the GPU runtime with CuPy
(cuBLAS GEMMs, im2col convolution) and tested on the CPU with NumPy against the registry's
NumPy kernels (tests/gpu/test_gpu_kernels.py). Convolution and pooling are the registry's
own kernels, which take their array module from ``ctx.xp`` (one implementation, so a tile's
halo padding and window frame are the same on every runtime).

Each kernel has the registry signature ``forward(attrs, inputs, ctx)`` and takes its array
module from ``ctx.xp``. Shapes, attribute handling and validation are the registry ops' own
(``Geometry``, tile helpers); only the array calls differ. Ops not listed in ``KERNELS`` run
their registry kernel on device arrays when that works (NumPy's dispatch protocols) or on the
host (see gpu_runtime.py)."""
from __future__ import annotations


import numpy as np

from ..ops import conv as _conv
from ..ops import dense as _dense
from ..ops import pooling as _pool
from ..ops._tiles import adds_bias
from ..ops.activation import act, act_grad
from ..ops.registry import get as _registry_op


def _xp(ctx):
    return ctx.xp if ctx is not None and ctx.xp is not None else np


# ----------------------------------------------------------------------------- FullyConnected

def fc_forward(attrs, inputs, ctx):
    x, w = inputs[0], inputs[1]
    y = _dense._as2d(attrs, x) @ w.T  # cuBLAS GEMM under CuPy
    if adds_bias(attrs):  # not on a k slab other than the first
        y = y + inputs[2]
    return [y.reshape(_dense._out_shape(attrs, x.shape)).astype(x.dtype, copy=False)]


def fc_backward_data(attrs, inputs, ctx):
    dy, w, x = inputs
    return [(dy.reshape(-1, attrs["num_hidden"]) @ w).reshape(x.shape).astype(dy.dtype, copy=False)]


def fc_backward_weight(attrs, inputs, ctx):
    dy, x = inputs
    x2 = _dense.weight_grad_columns(attrs, _dense._as2d(attrs, x))  # a kk slab's own columns
    return [(dy.reshape(-1, attrs["num_hidden"]).T @ x2).astype(dy.dtype, copy=False)]


def fc_backward_bias(attrs, inputs, ctx):
    dy = inputs[0]
    return [dy.reshape(-1, attrs["num_hidden"]).sum(axis=0).astype(dy.dtype, copy=False)]


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
    # the registry's own kernels, array-module generic (im2col windows as strided views, GEMMs
    # through tensordot: cuBLAS under CuPy), with the tile hooks' halo padding and windows
    "Convolution": _conv._forward,
    "_backward_Convolution_data": _conv._bwd_data_forward,
    "_backward_Convolution_weight": _conv._bwd_weight_forward,
    "_backward_Convolution_bias": lambda attrs, inputs, ctx: _registry_op("_backward_Convolution_bias").forward(
        attrs, inputs, ctx),
    "Pooling": _pool._forward,
    "_backward_Pooling": _pool._bwd_forward,
    "Activation": activation,
    "_backward_Activation": activation_backward,
    "sgd_update": sgd_update,
}
