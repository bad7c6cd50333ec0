"""BatchNorm (MXNet 1.x semantics) and `_backward_BatchNorm`.

Inputs: data, gamma, beta, then the auxiliary states moving_mean, moving_var. Outputs:
output, mean, var — where, as in MXNet, `var` is the *inverse standard deviation*
1/sqrt(var + eps) of the statistics used (MXNet's docs: "output the mean and inverse std").
Only `output` is visible unless output_mean_var.

- Training (is_train and not use_global_stats): batch mean and biased variance over every
  axis but `axis`; the moving statistics become moving*momentum + batch*(1-momentum) with
  the biased variance (checked against MXNet 1.9). MXNet applies that update in its
  backward pass; here the training forward kernel replaces ctx.aux (same values after a step).
- Inference (is_train False) or use_global_stats: the moving statistics are used as they are.
- fix_gamma: gamma is treated as 1 and its gradient is 0.
- Gradients go to data, gamma and beta only (none to the auxiliary states; the gradients
  of the mean/var outputs are ignored, as in MXNet).

`_backward_BatchNorm(dy, data, gamma, mean, var)` -> dx, dgamma, dbeta uses the saved
mean / inverse std outputs; with global statistics (use_global_stats or is_train False)
dx = dy * gamma * invstd.

TDL: the batch statistics are nested (non-top-level) sums, so the channel axis is the only
split that needs no data from other workers; splitting other axes reads the whole channel
slab (batch statistics need the whole batch). With use_global_stats the op is element-wise
in data.
"""
from __future__ import annotations

import numpy as np

from ..errors import Error
from .registry import OpDef, Param, register

_PARAMS = {
    "eps": Param("float", 1e-3),
    "momentum": Param("float", 0.9),
    "fix_gamma": Param("bool", True),
    "use_global_stats": Param("bool", False),
    "output_mean_var": Param("bool", False),
    "axis": Param("int", 1),
    "cudnn_off": Param("bool", False),
    "min_calib_range": Param("optional_float", None),
    "max_calib_range": Param("optional_float", None),
}



def update_moving_stats(ctx, momentum, moving_mean, moving_var, mean, var):
    """MXNet's moving averages of the batch statistics, written into the aux states."""
    if len(ctx.aux) == 2:
        ctx.aux[0] = (moving_mean * momentum + mean * (1 - momentum)).astype(moving_mean.dtype, copy=False)
        ctx.aux[1] = (moving_var * momentum + var * (1 - momentum)).astype(moving_var.dtype, copy=False)


def _axis(attrs, ndim):
    axis = attrs["axis"]
    if not -ndim <= axis < ndim:
        raise Error(f"attribute 'axis'={axis} is out of range for data of rank {ndim}")
    return axis % ndim


def _infer_shape(attrs, in_shapes):
    data = in_shapes[0]
    if data is None:
        raise Error("BatchNorm needs the shape of its data input")
    if len(data) < 1:
        raise Error("BatchNorm needs data of rank >= 1")
    c = (int(data[_axis(attrs, len(data))]),)
    return [tuple(data), c, c, c, c], [tuple(data), c, c]


def _layout(x, attrs):
    """(axis, reduction axes, broadcast shape of a per-channel vector)."""
    axis = _axis(attrs, x.ndim)
    red = tuple(d for d in range(x.ndim) if d != axis)
    bshape = [1] * x.ndim
    bshape[axis] = x.shape[axis]
    return axis, red, tuple(bshape)


def _forward(attrs, inputs, ctx):
    x, gamma, beta, moving_mean, moving_var = inputs
    _, red, bshape = _layout(x, attrs)
    if ctx.is_train and not attrs["use_global_stats"]:
        mean = x.mean(axis=red)
        var = x.var(axis=red)  # biased, as MXNet uses for both normalising and the moving average
        update_moving_stats(ctx, attrs["momentum"], moving_mean, moving_var, mean, var)
    else:
        mean, var = moving_mean, moving_var
    invstd = 1.0 / np.sqrt(var + attrs["eps"])
    scale = invstd if attrs["fix_gamma"] else gamma * invstd
    out = (x - mean.reshape(bshape)) * scale.reshape(bshape) + beta.reshape(bshape)
    dt = x.dtype
    return [out.astype(dt, copy=False), np.asarray(mean, dtype=dt), invstd.astype(dt, copy=False)]


def _gradient(ctx):
    keep = {k: ctx.attrs[k] for k in ("eps", "fix_gamma", "use_global_stats", "axis")}
    data, gamma = ctx.inputs[0], ctx.inputs[1]
    bwd = ctx.op("_backward_BatchNorm", ctx.out_grads[0], data, gamma, ctx.outputs[1], ctx.outputs[2], **keep)
    return [bwd[0], bwd[1], bwd[2], None, None]


# ----------------------------------------------------------------------------- backward op

def _bwd_forward(attrs, inputs, ctx):
    dy, x, gamma, mean, invstd = inputs
    _, red, bshape = _layout(x, attrs)
    xhat = (x - mean.reshape(bshape)) * invstd.reshape(bshape)
    dbeta = dy.sum(axis=red)
    dgamma_raw = (dy * xhat).sum(axis=red)
    g = np.ones_like(invstd) if attrs["fix_gamma"] else gamma
    scale = (g * invstd).reshape(bshape)
    if attrs["use_global_stats"] or not ctx.is_train:
        dx = dy * scale
    else:
        count = x.size // x.shape[_axis(attrs, x.ndim)]
        dx = scale * (dy - (dbeta.reshape(bshape) + xhat * dgamma_raw.reshape(bshape)) / count)
    dgamma = np.zeros_like(dgamma_raw) if attrs["fix_gamma"] else dgamma_raw
    dt = dy.dtype
    return [dx.astype(dt, copy=False), dgamma.astype(dt, copy=False), dbeta.astype(dt, copy=False)]


def _bwd_infer_shape(attrs, in_shapes):
    dy, data = in_shapes[0], in_shapes[1]
    shape = data if data is not None else dy
    if shape is None:
        raise Error("_backward_BatchNorm needs the shape of data or dy")
    shape = tuple(shape)
    if dy is not None and tuple(dy) != shape:
        raise Error(f"dy has shape {tuple(dy)} but data has shape {shape}")
    c = (int(shape[_axis(attrs, len(shape))]),)
    return [shape, shape, c, c, c], [shape, c, c]


# ----------------------------------------------------------------------------- TDL

def _vars(ndim, axis):
    """Output index variables (channel is 'c') and reduction variables of the other dims."""
    names = ["n", "c", "y", "x"] if (ndim, axis) == (4, 1) else [f"i{d}" if d != axis else "c" for d in range(ndim)]
    red = [f"r{d}" for d in range(ndim) if d != axis]
    red_idx = [f"r{d}" if d != axis else "c" for d in range(ndim)]
    return names, red, red_idx


def _acc(name, idx):
    return f"{name}[{', '.join(idx)}]"


def _tdl(attrs, in_shapes, out_shapes):
    ndim = len(in_shapes[0])
    axis = _axis(attrs, ndim)
    v, red, ridx = _vars(ndim, axis)
    head = "data, gamma, beta, moving_mean, moving_var -> out, mean, var"
    chan = "gamma[c], beta[c], moving_mean[c], moving_var[c]"
    if attrs["use_global_stats"]:
        return (f"{head}: out[{', '.join(v)}] = bn({_acc('data', v)}, {chan}); "
                f"mean[c] = moving_mean[c]; var[c] = invstd(moving_var[c])")
    total = f"sum({', '.join(red)}) {{ {_acc('data', ridx)} }}"
    square = f"sum({', '.join(red)}) {{ sq({_acc('data', ridx)}) }}"
    return (f"{head}: out[{', '.join(v)}] = bn({_acc('data', v)}, {total}, {square}, {chan}); "
            f"mean[c] = stat({total}, moving_mean[c]); var[c] = invstd({total}, {square}, moving_var[c])")


def _bwd_tdl(attrs, in_shapes, out_shapes):
    ndim = len(in_shapes[1])
    axis = _axis(attrs, ndim)
    v, red, ridx = _vars(ndim, axis)
    head = "dy, data, gamma, mean, invstd -> dx, dgamma, dbeta"
    chan = "gamma[c], mean[c], invstd[c]"
    dsum = f"sum({', '.join(red)}) {{ {_acc('dy', ridx)} }}"
    dprod = f"sum({', '.join(red)}) {{ {_acc('dy', ridx)} * {_acc('data', ridx)} }}"
    if attrs["use_global_stats"]:
        dx = f"dx[{', '.join(v)}] = {_acc('dy', v)} * gamma[c] * invstd[c]"
    else:
        dx = f"dx[{', '.join(v)}] = dbn({_acc('dy', v)}, {_acc('data', v)}, {chan}, {dsum}, {dprod})"
    return (f"{head}: {dx}; dgamma[c] = dgamma({dprod}, {dsum}, mean[c], invstd[c]); "
            f"dbeta[c] = dbeta({dsum})")


register(OpDef(
    name="BatchNorm",
    params=_PARAMS,
    arguments=lambda attrs: ["data", "gamma", "beta"],
    aux=lambda attrs: ["moving_mean", "moving_var"],
    outputs=lambda attrs: ["output", "mean", "var"],
    visible_outputs=lambda attrs: 3 if attrs["output_mean_var"] else 1,
    infer_shape=_infer_shape,
    forward=_forward,
    gradient=_gradient,
    tdl=_tdl,
    doc="Batch normalisation over every axis but `axis` (MXNet 1.x: var output is the inverse std).",
))

register(OpDef(
    name="_backward_BatchNorm",
    params={k: _PARAMS[k] for k in ("eps", "fix_gamma", "use_global_stats", "axis")},
    arguments=lambda attrs: ["dy", "data", "gamma", "mean", "invstd"],
    outputs=lambda attrs: ["data_grad", "gamma_grad", "beta_grad"],
    infer_shape=_bwd_infer_shape,
    forward=_bwd_forward,
    tdl=_bwd_tdl,
    doc="Gradients of BatchNorm (data, gamma, beta) from dy and the saved mean / inverse std.",
))
