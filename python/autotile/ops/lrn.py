"""LRN, local response normalisation across channels (MXNet 1.x) and `_backward_LRN`.

tmp_norm[n, c] = knorm + alpha/nsize * sum(c' in W(c)) data[n, c']^2,  W(c) = [c - nsize//2, c - nsize//2 + nsize)
out = data * tmp_norm^(-beta)

As in MXNet, nsize must be odd; LRN has two outputs, `output` and the hidden `tmp_norm`
(visible_outputs = 1), and the backward op reuses tmp_norm: `_backward_LRN(dy, data, tmp_norm)`.

TDL: n and spatial splits are exact; the channel window has no tensor dim of its own to
range over, so a channel split reads all channels (':').
"""
from __future__ import annotations

import numpy as np

from ..errors import Error
from .registry import OpDef, Param, register

_PARAMS = {
    "alpha": Param("float", 1e-4),
    "beta": Param("float", 0.75),
    "knorm": Param("float", 2.0),
    "nsize": Param("int", required=True),
}


def _check(attrs, shape):
    if shape is None:
        raise Error("LRN needs the shape of its data input")
    if len(shape) != 4:
        raise Error(f"data has shape {tuple(shape)}; LRN needs 4-D data (NCHW)")
    if attrs["nsize"] <= 0 or attrs["nsize"] % 2 == 0:
        raise Error(f"attribute 'nsize'={attrs['nsize']} must be a positive odd number (as in MXNet)")


def channel_window_sum(a: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """s[:, c] = sum(a[:, c + lo : c + hi + 1]) over channels (axis 1), clipped to the range."""
    c = a.shape[1]
    csum = np.concatenate([np.zeros_like(a[:, :1]), np.cumsum(a, axis=1)], axis=1)
    idx = np.arange(c)
    upper = np.clip(idx + hi + 1, 0, c)
    lower = np.clip(idx + lo, 0, c)
    return csum[:, upper] - csum[:, lower]


def _forward(attrs, inputs, ctx):
    x = inputs[0]
    n = attrs["nsize"]
    half = n // 2
    norm = attrs["knorm"] + attrs["alpha"] / n * channel_window_sum(x * x, -half, n - 1 - half)
    out = x * norm ** (-attrs["beta"])
    return [out.astype(x.dtype, copy=False), norm.astype(x.dtype, copy=False)]


def _bwd_forward(attrs, inputs, ctx):
    dy, x, norm = inputs
    n, beta = attrs["nsize"], attrs["beta"]
    half = n // 2
    scaled = norm ** (-beta)
    # d out[c'] / d x[c] for c in W(c'): c' ranges over the mirrored window [c + half - n + 1, c + half]
    inner = channel_window_sum(dy * x * scaled / norm, half - n + 1, half)
    dx = dy * scaled - 2.0 * beta * attrs["alpha"] / n * x * inner
    return [dx.astype(dy.dtype, copy=False)]


def _gradient(ctx):
    keep = {k: ctx.attrs[k] for k in _PARAMS}
    return [ctx.op("_backward_LRN", ctx.out_grads[0], ctx.inputs[0], ctx.outputs[1], **keep)]


def _infer_shape(attrs, in_shapes):
    _check(attrs, in_shapes[0])
    s = tuple(in_shapes[0])
    return [s], [s, s]


def _tdl(attrs, in_shapes, out_shapes):
    # the channel window has no dim of its own to range over: read the channels whole
    window = "data[n, :, y, x]"
    return (f"data -> out, tmp_norm: out[n, c, y, x] = data[n, c, y, x] * lrn_scale({window}); "
            f"tmp_norm[n, c, y, x] = lrn_norm({window})")


def _bwd_infer_shape(attrs, in_shapes):
    known = next((s for s in in_shapes if s is not None), None)
    _check(attrs, known)
    for name, s in zip(("dy", "data", "tmp_norm"), in_shapes):
        if s is not None and tuple(s) != tuple(known):
            raise Error(f"input '{name}' has shape {tuple(s)}, expected {tuple(known)}")
    s = tuple(known)
    return [s, s, s], [s]


def _bwd_tdl(attrs, in_shapes, out_shapes):
    return ("dy, data, tmp_norm -> dx: dx[n, c, y, x] = "
            "dlrn(dy[n, :, y, x], data[n, :, y, x], tmp_norm[n, :, y, x])")


register(OpDef(
    name="LRN",
    params=_PARAMS,
    outputs=lambda attrs: ["output", "tmp_norm"],
    visible_outputs=lambda attrs: 1,
    infer_shape=_infer_shape,
    forward=_forward,
    gradient=_gradient,
    tdl=_tdl,
    doc="Local response normalisation across channels: data / (knorm + alpha/nsize * sum x^2)^beta.",
))

register(OpDef(
    name="_backward_LRN",
    params=_PARAMS,
    arguments=lambda attrs: ["dy", "data", "tmp_norm"],
    infer_shape=_bwd_infer_shape,
    forward=_bwd_forward,
    tdl=_bwd_tdl,
    doc="Gradient of LRN with respect to data, from dy, data and the saved tmp_norm.",
))
