"""RMSNorm (LLaMA's normalisation) and `_backward_RMSNorm`.

RMSNorm(data, gamma; axis=-1, eps=1e-6): y = x / sqrt(mean(x * x, axis) + eps) * gamma, gamma
of shape (data.shape[axis],); no mean is subtracted and there is no bias.
`_backward_RMSNorm(dy, data, gamma) -> dx, dgamma` recomputes rstd = 1 / sqrt(mean(x^2) + eps):
with xhat = x * rstd and g = dy * gamma, dx = rstd * (g - xhat * mean(g * xhat)) and
dgamma = sum(dy * xhat) over every axis but `axis`.

TDL and partitioning as LayerNorm (ops/layer_norm.py): the mean square is a nested row sum,
so batch and sequence axes split freely and a split of the normalised axis reads whole rows
(exact, output cropped to the tile); partial statistics need the decomposed form.
"""
from __future__ import annotations

from ..errors import Error
from ._axes import need_shapes, norm_axis
from ._ew_util import cast
from .layer_norm import dy_data_shape, normalize, normalize_backward, param_grad_stmt, param_shape, row_vars
from .registry import OpDef, Param, register
from .tdl_helpers import access

_PARAMS = {"axis": Param("int", -1), "eps": Param("float", 1e-6)}


def _axis(op, attrs, shape):
    return norm_axis(op, attrs["axis"], len(shape), shape=shape)


def _infer(attrs, in_shapes):
    need_shapes("RMSNorm", in_shapes[:1], ["data"])
    data = tuple(in_shapes[0])
    if not data:
        raise Error("RMSNorm needs data of rank >= 1, got a scalar")
    c = (data[_axis("RMSNorm", attrs, data)],)
    if in_shapes[1] is not None and tuple(in_shapes[1]) != c:
        raise Error(f"RMSNorm: gamma has shape {tuple(in_shapes[1])}, expected {c} (data {data}, axis {attrs['axis']})")
    return [data, c], [data]


def _forward(attrs, inputs, ctx):
    x, gamma = inputs
    axis = _axis("RMSNorm", attrs, x.shape)
    xhat, _, _ = normalize(x, (axis,), attrs["eps"], center=False)
    return [cast(xhat * gamma.reshape(param_shape(x.ndim, axis)), x)]


def _mean_square(row):
    return f"sum(k) {{ sq({access('data', row)}) }}"


def _tdl(attrs, in_shapes, out_shapes):
    data = in_shapes[0]
    ov, row = row_vars(len(data), _axis("RMSNorm", attrs, data))
    return f"data, gamma -> out: {access('out', ov)} = rms({access('data', ov)}, {_mean_square(row)}, gamma[:])"


def _gradient(ctx):
    bwd = ctx.op("_backward_RMSNorm", ctx.out_grads[0], ctx.inputs[0], ctx.inputs[1],
                 axis=ctx.attrs["axis"], eps=ctx.attrs["eps"])
    return [bwd[0], bwd[1]]


register(OpDef(
    name="RMSNorm",
    params=_PARAMS,
    arguments=lambda attrs: ["data", "gamma"],
    infer_shape=_infer,
    forward=_forward,
    gradient=_gradient,
    tdl=_tdl,
    doc="RMS normalisation over `axis`: x / sqrt(mean(x^2) + eps) * gamma.",
))


def _bwd_infer(attrs, in_shapes):
    shape = dy_data_shape("_backward_RMSNorm", in_shapes)
    c = (shape[_axis("_backward_RMSNorm", attrs, shape)],)
    return [shape, shape, c], [shape, c]


def _bwd_forward(attrs, inputs, ctx):
    dy, x, gamma = inputs
    axis = _axis("_backward_RMSNorm", attrs, x.shape)
    xhat, _, rstd = normalize(x, (axis,), attrs["eps"], center=False)
    dx = normalize_backward(dy * gamma.reshape(param_shape(x.ndim, axis)), xhat, rstd, (axis,), center=False)
    others = tuple(d for d in range(x.ndim) if d != axis)
    return [cast(dx, dy), cast((dy * xhat).sum(axis=others), dy)]


def _bwd_tdl(attrs, in_shapes, out_shapes):
    data = in_shapes[1]
    axis = _axis("_backward_RMSNorm", attrs, data)
    ov, row = row_vars(len(data), axis)
    ms = _mean_square(row)
    dot = f"sum(k) {{ {access('dy', row)} * {access('data', row)} }}"
    dx = f"{access('dx', ov)} = drms({access('dy', ov)}, {access('data', ov)}, gamma[:], {dot}, {ms})"
    dgamma = param_grad_stmt("dgamma", ov, axis, f"{access('dy', ov)} * xhat({access('data', ov)}, {ms})")
    return f"dy, data, gamma -> dx, dgamma: {dx}; {dgamma}"


register(OpDef(
    name="_backward_RMSNorm",
    params=_PARAMS,
    arguments=lambda attrs: ["dy", "data", "gamma"],
    outputs=lambda attrs: ["data_grad", "gamma_grad"],
    infer_shape=_bwd_infer,
    forward=_bwd_forward,
    tdl=_bwd_tdl,
    doc="Gradients of RMSNorm (data, gamma), recomputing the root mean square from data.",
))
