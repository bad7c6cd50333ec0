"""LayerNorm (MXNet semantics) and `_backward_LayerNorm`, plus the row-normalisation helpers
RMSNorm, GroupNorm and InstanceNorm share.

LayerNorm(data, gamma, beta; axis=-1, eps=1e-5, output_mean_var=False):
out = (data - mean) / sqrt(var + eps) * gamma + beta, mean and biased var over `axis` only;
gamma and beta have shape (data.shape[axis],). With output_mean_var the op also outputs the
mean and std = sqrt(var + eps), shaped like data with a 1 on `axis` (MXNet's outputs); unlike
MXNet, which ignores them, their gradients flow back to data.

`_backward_LayerNorm(dy, data, gamma[, dmean, dstd]) -> dx, dgamma, dbeta` recomputes the row
statistics from data (nothing is saved between passes). With xhat = (x - mean) * rstd and
g = dy * gamma: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), dgamma = sum(dy * xhat),
dbeta = sum(dy), the sums over every axis but `axis`; with stat_grads (the statistics are
outputs) dx also gets dmean / n + dstd * xhat / n (d std / dx = xhat / n), n = data.shape[axis].

TDL and partitioning. The statistics are sums over the normalised axis nested inside the
element's expression (docs/tdl.md: a sum that is not the top-level expression), so:
- every other axis (batch, sequence) splits freely: a worker reads its own rows;
- a split of the normalised axis is offered, but each worker then reads whole rows of data
  (the analysis reports data's interval along the axis as the whole dim, and the planner
  prices that fetch) and keeps its part of the output: exact, never partial statistics.
A TDL statement cannot express "partial sums over the split axis, reduced, then used
element-wise" in one op (a top-level `sum` may not be combined with other terms). Where
splitting d_model itself pays off, the decomposed form (mean / sum reductions as their own
ops, whose top-level sums do split into partial sums, then broadcast arithmetic) is what a
model builder or importer should emit; this op is the fused form.
gamma and beta are read whole (`gamma[:]`): a worker that holds whole rows normalises them
and needs every column's scale (a few KB); its output is cropped to its tile.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import Error
from ._axes import need_shapes, norm_axis
from ._ew_util import cast
from .registry import OpDef, Param, register
from .tdl_helpers import access, index_vars


# ----------------------------------------------------------------------------- NumPy math

def normalize(x, axes: Sequence[int], eps: float, center: bool = True):
    """(xhat, mean, rstd) with statistics over `axes` (kept as size-1 dims): xhat = (x - mean)
    * rstd, rstd = 1 / sqrt(var + eps) with the biased variance; without `center` the mean is
    0 and var is the mean square (RMSNorm)."""
    axes = tuple(axes)
    if center:
        mean = x.mean(axis=axes, keepdims=True)
        xc = x - mean
    else:
        mean = np.zeros((1,) * x.ndim, dtype=x.dtype)
        xc = x
    rstd = 1.0 / np.sqrt((xc * xc).mean(axis=axes, keepdims=True) + eps)
    return xc * rstd, mean, rstd


def normalize_backward(g, xhat, rstd, axes: Sequence[int], center: bool = True):
    """d loss / dx of xhat = normalize(x)[0] given g = d loss / d xhat (same statistics axes)."""
    axes = tuple(axes)
    inner = g - xhat * (g * xhat).mean(axis=axes, keepdims=True)
    if center:
        inner = inner - g.mean(axis=axes, keepdims=True)
    return rstd * inner


def dy_data_shape(op: str, in_shapes) -> tuple:
    """The common shape of a normalisation backward's (dy, data, ...) inputs; Error if unknown
    or if they differ."""
    shape = in_shapes[1] if in_shapes[1] is not None else in_shapes[0]
    if shape is None:
        raise Error(f"{op} needs the shape of data or dy")
    shape = tuple(shape)
    if in_shapes[0] is not None and tuple(in_shapes[0]) != shape:
        raise Error(f"{op}: dy has shape {tuple(in_shapes[0])} but data has shape {shape}")
    return shape


def param_shape(ndim: int, axis: int) -> tuple:
    """Broadcast shape of a per-`axis` vector against rank-`ndim` data."""
    shape = [1] * ndim
    shape[axis] = -1
    return tuple(shape)


# ----------------------------------------------------------------------------- TDL text

def row_vars(rank: int, axis: int):
    """Output index variables of row-normalised data (the normalised axis is `c`) and the
    same list with `c` replaced by the row's reduction variable `k`."""
    ov = index_vars(rank)
    ov[axis] = "c"
    row = list(ov)
    row[axis] = "k"
    return ov, row


def row_stats(names: Sequence[str], row: Sequence[str], squares: bool = True, red: Sequence[str] = ("k",)) -> list:
    """Nested sums over `red` of each input (and of its square) read at `row`: the statistics a
    normalisation reads."""
    over = ", ".join(red)
    sums = [f"sum({over}) {{ {access(n, row)} }}" for n in names]
    if squares:
        sums += [f"sum({over}) {{ sq({access(n, row)}) }}" for n in names]
    return sums


def param_grad_stmt(out: str, ov: Sequence[str], axis: int, body: str) -> str:
    """`out[c] = sum(<other output vars>) { body }`: a per-column parameter gradient, partial
    under a split of any axis but the normalised one."""
    others = [v for d, v in enumerate(ov) if d != axis]
    return f"{out}[c] = sum({', '.join(others)}) {{ {body} }}"


# ----------------------------------------------------------------------------- LayerNorm

_PARAMS = {"axis": Param("int", -1), "eps": Param("float", 1e-5), "output_mean_var": Param("bool", False)}


def _axis(op, attrs, shape):
    return norm_axis(op, attrs["axis"], len(shape), shape=shape)


def _infer(attrs, in_shapes):
    need_shapes("LayerNorm", in_shapes[:1], ["data"])
    data = tuple(in_shapes[0])
    if not data:
        raise Error("LayerNorm needs data of rank >= 1, got a scalar")
    axis = _axis("LayerNorm", attrs, data)
    c = (data[axis],)
    for name, s in zip(("gamma", "beta"), in_shapes[1:]):
        if s is not None and tuple(s) != c:
            raise Error(f"LayerNorm: {name} has shape {tuple(s)}, expected {c} (data {data}, axis {attrs['axis']})")
    stat = tuple(1 if d == axis else n for d, n in enumerate(data))
    outs = [data] + ([stat, stat] if attrs["output_mean_var"] else [])
    return [data, c, c], outs


def _forward(attrs, inputs, ctx):
    x, gamma, beta = inputs
    axis = _axis("LayerNorm", attrs, x.shape)
    xhat, mean, rstd = normalize(x, (axis,), attrs["eps"])
    ps = param_shape(x.ndim, axis)
    out = [cast(xhat * gamma.reshape(ps) + beta.reshape(ps), x)]
    if attrs["output_mean_var"]:
        out += [cast(mean, x), cast(1.0 / rstd, x)]
    return out


def _tdl(attrs, in_shapes, out_shapes):
    data = in_shapes[0]
    axis = _axis("LayerNorm", attrs, data)
    ov, row = row_vars(len(data), axis)
    stats = ", ".join(row_stats(["data"], row))
    body = f"{access('out', ov)} = ln({access('data', ov)}, {stats}, gamma[:], beta[:])"
    if not attrs["output_mean_var"]:
        return f"data, gamma, beta -> out: {body}"
    sv = list(ov)
    sv[axis] = "u"  # the size-1 dim of the statistics
    return (f"data, gamma, beta -> out, mean, std: {body}; "
            f"{access('mean', sv)} = mean({stats}); {access('std', sv)} = std({stats})")


def _gradient(ctx):
    stats = ctx.attrs["output_mean_var"]
    bwd = ctx.op("_backward_LayerNorm", ctx.out_grads[0], ctx.inputs[0], ctx.inputs[1], *ctx.out_grads[1:3],
                 axis=ctx.attrs["axis"], eps=ctx.attrs["eps"], stat_grads=stats)
    return [bwd[0], bwd[1], bwd[2]]


register(OpDef(
    name="LayerNorm",
    params=_PARAMS,
    arguments=lambda attrs: ["data", "gamma", "beta"],
    outputs=lambda attrs: ["output", "mean", "std"] if attrs["output_mean_var"] else ["output"],
    infer_shape=_infer,
    forward=_forward,
    gradient=_gradient,
    tdl=_tdl,
    doc="Layer normalisation over `axis`: (x - mean) / sqrt(var + eps) * gamma + beta (MXNet semantics).",
))


# ----------------------------------------------------------------------------- backward

def _bwd_args(attrs):
    return ["dy", "data", "gamma"] + (["dmean", "dstd"] if attrs["stat_grads"] else [])


def _bwd_infer(attrs, in_shapes):
    shape = dy_data_shape("_backward_LayerNorm", in_shapes)
    axis = _axis("_backward_LayerNorm", attrs, shape)
    c = (shape[axis],)
    stat = tuple(1 if d == axis else n for d, n in enumerate(shape))
    return [shape, shape, c] + [stat] * (len(in_shapes) - 3), [shape, c, c]


def _bwd_forward(attrs, inputs, ctx):
    dy, x, gamma = inputs[:3]
    axis = _axis("_backward_LayerNorm", attrs, x.shape)
    xhat, _, rstd = normalize(x, (axis,), attrs["eps"])
    ps = param_shape(x.ndim, axis)
    dx = normalize_backward(dy * gamma.reshape(ps), xhat, rstd, (axis,))
    if attrs["stat_grads"]:
        dmean, dstd = inputs[3:5]
        dx = dx + (dmean + dstd * xhat) / x.shape[axis]
    others = tuple(d for d in range(x.ndim) if d != axis)
    return [cast(dx, dy), cast((dy * xhat).sum(axis=others), dy), cast(dy.sum(axis=others), dy)]


def _bwd_tdl(attrs, in_shapes, out_shapes):
    data = in_shapes[1]
    axis = _axis("_backward_LayerNorm", attrs, data)
    ov, row = row_vars(len(data), axis)
    stats = ", ".join(row_stats(["data"], row))
    grads = ", ".join(row_stats(["dy"], row, squares=False)
                      + [f"sum(k) {{ {access('dy', row)} * {access('data', row)} }}"])
    extra = ""
    if attrs["stat_grads"]:
        sv = [("0" if d == axis else v) for d, v in enumerate(ov)]
        extra = f", {access('dmean', sv)}, {access('dstd', sv)}"
    dx = f"{access('dx', ov)} = dln({access('dy', ov)}, {access('data', ov)}, gamma[:], {grads}, {stats}{extra})"
    dgamma = param_grad_stmt("dgamma", ov, axis, f"{access('dy', ov)} * xhat({access('data', ov)}, {stats})")
    dbeta = param_grad_stmt("dbeta", ov, axis, access("dy", ov))
    return f"{', '.join(_bwd_args(attrs))} -> dx, dgamma, dbeta: {dx}; {dgamma}; {dbeta}"


register(OpDef(
    name="_backward_LayerNorm",
    params={"axis": _PARAMS["axis"], "eps": _PARAMS["eps"], "stat_grads": Param("bool", False)},
    arguments=_bwd_args,
    outputs=lambda attrs: ["data_grad", "gamma_grad", "beta_grad"],
    infer_shape=_bwd_infer,
    forward=_bwd_forward,
    tdl=_bwd_tdl,
    doc="Gradients of LayerNorm (data, gamma, beta), recomputing the row statistics from data\n"
        "(plus the mean/std outputs' gradients dmean, dstd with stat_grads).",
))
