"""Synchronous BatchNorm: the training form of BatchNorm as three ops whose batch statistics
are top-level sums, so a plan that splits the batch reduces them across devices.

BatchNorm's own TDL nests its statistics inside the normalisation (ops/batchnorm.py), so
the analysis only offers the channel split: a batch-split BatchNorm would read the whole
batch. In a training graph (autodiff.training_graph) every BatchNorm that computes batch
statistics is expanded by :func:`expand_batchnorm` into

- ``{bn}_moments`` = ``_bn_moments(data)`` -> per-channel E[x] and E[x^2] over the whole
  tensor (each worker sums its tile and divides by the *whole* count, attribute ``count``,
  so partial results add up: the strategy splitting the batch makes them partial and the
  execution graph all-reduces 2 x C numbers),
- ``{bn}_stats`` = ``_bn_stats(mean_x, mean_x2; moving_mean, moving_var)`` -> mean and
  inverse std (MXNet's ``mean``/``var`` outputs), updating the moving statistics as
  BatchNorm does (biased variance, ``momentum``),
- ``{bn}`` = ``_bn_apply(data, gamma, beta, mean, invstd)`` -> the normalised output (same
  node and output name as the BatchNorm it replaces).

The search gives ``_bn_moments``, ``_bn_apply`` and their backward nodes one strategy (attribute
``__joint_strategy__``, see :data:`JOINT_ATTR`). Their gradients are again sums over the batch (``_backward_bn_apply``) followed by
per-channel and element-wise ops, so the backward pass is synchronous too. The result is
exactly BatchNorm over the whole batch on any plan (the only data-parallel BatchNorm that
equals one device). Statistics accumulate in float64 inside each kernel;
var = E[x^2] - E[x]^2 is clamped at 0.
"""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np

from ..errors import Error
from .batchnorm import _axis, _layout, update_moving_stats
from .registry import OpDef, Param, register


def _red_bshape(x, attrs):
    """(reduction axes, broadcast shape of a per-channel vector), as BatchNorm's."""
    return _layout(x, attrs)[1:]


def _names(ndim, axis):
    """Index variables of a data access: 'c' on the channel axis; the same names serve as
    output variables (data-shaped outputs) and reduction variables (per-channel sums), so a
    strategy splitting the batch exists in every statement."""
    names = ["n", "c", "y", "x"] if (ndim, axis) == (4, 1) else [f"i{d}" if d != axis else "c" for d in range(ndim)]
    return names, [v for v in names if v != "c"]


def _idx(name, vars_):
    return f"{name}[{', '.join(vars_)}]"


def _channel_shape(attrs, shape):
    return (int(shape[_axis(attrs, len(shape))]),)


# ----------------------------------------------------------------------------- _bn_moments

def _moments_forward(attrs, inputs, ctx):
    x = inputs[0]
    red, _ = _red_bshape(x, attrs)
    count = attrs["count"]
    if count <= 0:
        raise Error(f"_bn_moments needs count > 0 (elements per channel of the whole tensor), got {count}")
    xd = x.astype(np.float64)
    return [(xd.sum(axis=red) / count).astype(x.dtype), ((xd * xd).sum(axis=red) / count).astype(x.dtype)]


def _moments_shape(attrs, in_shapes):
    data = in_shapes[0]
    if data is None:
        raise Error("_bn_moments needs the shape of its data input")
    c = _channel_shape(attrs, data)
    return [tuple(data)], [c, c]


def _moments_tdl(attrs, in_shapes, out_shapes):
    v, red = _names(len(in_shapes[0]), _axis(attrs, len(in_shapes[0])))
    r = ", ".join(red)
    return (f"data -> mean, meansq: mean[c] = sum({r}) {{ {_idx('data', v)} }}; "
            f"meansq[c] = sum({r}) {{ sq({_idx('data', v)}) }}")


def _moments_gradient(ctx):
    keep = {k: ctx.attrs[k] for k in ("axis", "count")}
    return [ctx.op("_backward_bn_moments", ctx.out_grads[0], ctx.out_grads[1], ctx.inputs[0], **keep)]


def _moments_bwd_forward(attrs, inputs, ctx):
    dm1, dm2, x = inputs
    _, bshape = _red_bshape(x, attrs)
    count = attrs["count"]
    dx = (dm1.reshape(bshape) + 2 * x * dm2.reshape(bshape)) / count
    return [dx.astype(x.dtype, copy=False)]


def _moments_bwd_shape(attrs, in_shapes):
    data = in_shapes[2]
    if data is None:
        raise Error("_backward_bn_moments needs the shape of data")
    c = _channel_shape(attrs, data)
    return [c, c, tuple(data)], [tuple(data)]


def _moments_bwd_tdl(attrs, in_shapes, out_shapes):
    v, _ = _names(len(in_shapes[2]), _axis(attrs, len(in_shapes[2])))
    return f"dm1, dm2, data -> dx: dx[{', '.join(v)}] = dmoments(dm1[c], dm2[c], {_idx('data', v)})"


# ----------------------------------------------------------------------------- _bn_stats

def _stats_forward(attrs, inputs, ctx):
    m1, m2, moving_mean, moving_var = inputs
    if ctx.is_train:
        mean = m1
        var = np.maximum(m2.astype(np.float64) - m1.astype(np.float64) ** 2, 0.0)
        update_moving_stats(ctx, attrs["momentum"], moving_mean, moving_var, mean, var)
    else:
        mean, var = moving_mean, moving_var
    invstd = 1.0 / np.sqrt(var + attrs["eps"])
    dt = m1.dtype
    return [np.asarray(mean, dtype=dt), np.asarray(invstd, dtype=dt)]


def _stats_shape(attrs, in_shapes):
    c = next((tuple(s) for s in in_shapes if s is not None), None)
    if c is None:
        raise Error("_bn_stats needs the shape of one of its inputs")
    for s in in_shapes:
        if s is not None and (len(s) != 1 or tuple(s) != c):
            raise Error(f"_bn_stats inputs must all have one shape (C,), got {c} and {tuple(s)}")
    return [c, c, c, c], [c, c]


def _stats_tdl(attrs, in_shapes, out_shapes):
    return ("batch_mean, batch_meansq, moving_mean, moving_var -> mean, var: "
            "mean[c] = stat(batch_mean[c], moving_mean[c]); "
            "var[c] = invstd(batch_mean[c], batch_meansq[c], moving_var[c])")


def _stats_gradient(ctx):
    bwd = ctx.op("_backward_bn_stats", ctx.out_grads[0], ctx.out_grads[1], ctx.inputs[0], ctx.outputs[1])
    return [bwd[0], bwd[1], None, None]


def _stats_bwd_forward(attrs, inputs, ctx):
    dmean, dinvstd, m1, invstd = inputs
    # invstd = (E[x^2] - E[x]^2 + eps)^(-1/2)
    cube = invstd * invstd * invstd
    dt = dmean.dtype
    return [(dmean + dinvstd * m1 * cube).astype(dt, copy=False), (-0.5 * dinvstd * cube).astype(dt, copy=False)]


def _stats_bwd_tdl(attrs, in_shapes, out_shapes):
    return ("dmean, dinvstd, batch_mean, invstd -> dm1, dm2: "
            "dm1[c] = dstat1(dmean[c], dinvstd[c], batch_mean[c], invstd[c]); "
            "dm2[c] = dstat2(dinvstd[c], invstd[c])")


# ----------------------------------------------------------------------------- _bn_apply

def _apply_forward(attrs, inputs, ctx):
    x, gamma, beta, mean, invstd = inputs
    _, bshape = _red_bshape(x, attrs)
    scale = invstd if attrs["fix_gamma"] else gamma * invstd
    out = (x - mean.reshape(bshape)) * scale.reshape(bshape) + beta.reshape(bshape)
    return [out.astype(x.dtype, copy=False)]


def _apply_shape(attrs, in_shapes):
    data = in_shapes[0]
    if data is None:
        raise Error("_bn_apply needs the shape of its data input")
    c = _channel_shape(attrs, data)
    return [tuple(data), c, c, c, c], [tuple(data)]


def _apply_tdl(attrs, in_shapes, out_shapes):
    v, _ = _names(len(in_shapes[0]), _axis(attrs, len(in_shapes[0])))
    return (f"data, gamma, beta, mean, invstd -> out: out[{', '.join(v)}] = "
            f"bnapply({_idx('data', v)}, gamma[c], beta[c], mean[c], invstd[c])")


def _apply_gradient(ctx):
    keep = {k: ctx.attrs[k] for k in ("fix_gamma", "axis")}
    data, gamma, _, mean, invstd = ctx.inputs
    bwd = ctx.op("_backward_bn_apply", ctx.out_grads[0], data, gamma, mean, invstd, **keep)
    return [bwd[0], bwd[1], bwd[2], bwd[3], bwd[4]]


def _apply_bwd_forward(attrs, inputs, ctx):
    dy, x, gamma, mean, invstd = inputs
    red, bshape = _red_bshape(x, attrs)
    g = np.ones_like(invstd) if attrs["fix_gamma"] else gamma
    centred = x - mean.reshape(bshape)
    dyd = dy.astype(np.float64)
    sum_dy = dyd.sum(axis=red)
    sum_dyc = (dyd * centred).sum(axis=red)
    dt = dy.dtype
    dx = dy * (g * invstd).reshape(bshape)
    dgamma = np.zeros_like(invstd) if attrs["fix_gamma"] else sum_dyc * invstd
    return [dx.astype(dt, copy=False), np.asarray(dgamma, dtype=dt), sum_dy.astype(dt),
            (-g * invstd * sum_dy).astype(dt), (g * sum_dyc).astype(dt)]


def _apply_bwd_shape(attrs, in_shapes):
    data = in_shapes[1] if in_shapes[1] is not None else in_shapes[0]
    if data is None:
        raise Error("_backward_bn_apply needs the shape of data or dy")
    c = _channel_shape(attrs, data)
    return [tuple(data), tuple(data), c, c, c], [tuple(data), c, c, c, c]


def _apply_bwd_tdl(attrs, in_shapes, out_shapes):
    v, red = _names(len(in_shapes[1]), _axis(attrs, len(in_shapes[1])))
    r = ", ".join(red)
    dy, x = _idx("dy", v), _idx("data", v)
    return (f"dy, data, gamma, mean, invstd -> dx, dgamma, dbeta, dmean, dinvstd: "
            f"dx[{', '.join(v)}] = dxapply({dy}, gamma[c], invstd[c]); "
            f"dgamma[c] = sum({r}) {{ {dy} * ({x} - mean[c]) * invstd[c] }}; "
            f"dbeta[c] = sum({r}) {{ {dy} }}; "
            f"dmean[c] = sum({r}) {{ dmeanapply({dy}, gamma[c], invstd[c]) }}; "
            f"dinvstd[c] = sum({r}) {{ {dy} * ({x} - mean[c]) * gamma[c] }}")


_AXIS = {"axis": Param("int", 1)}
_FIX = {"fix_gamma": Param("bool", True)}

register(OpDef(
    name="_bn_moments", params={**_AXIS, "count": Param("int", 0)},
    outputs=lambda attrs: ["mean", "meansq"], infer_shape=_moments_shape, forward=_moments_forward,
    gradient=_moments_gradient, tdl=_moments_tdl,
    doc="Per-channel E[x] and E[x^2] of a whole tensor (count: elements per channel); partial sums add up."))
register(OpDef(
    name="_backward_bn_moments", params={**_AXIS, "count": Param("int", 0)},
    arguments=lambda attrs: ["dm1", "dm2", "data"], infer_shape=_moments_bwd_shape, forward=_moments_bwd_forward,
    tdl=_moments_bwd_tdl, doc="Gradient of _bn_moments: (dm1 + 2 x dm2) / count."))
register(OpDef(
    name="_bn_stats", params={"eps": Param("float", 1e-3), "momentum": Param("float", 0.9)},
    arguments=lambda attrs: ["batch_mean", "batch_meansq"], aux=lambda attrs: ["moving_mean", "moving_var"],
    outputs=lambda attrs: ["mean", "var"], infer_shape=_stats_shape, forward=_stats_forward,
    gradient=_stats_gradient, tdl=_stats_tdl,
    doc="Mean and inverse std from E[x], E[x^2] (moving statistics when not training); updates them."))
register(OpDef(
    name="_backward_bn_stats", arguments=lambda attrs: ["dmean", "dinvstd", "batch_mean", "invstd"],
    outputs=lambda attrs: ["batch_mean_grad", "batch_meansq_grad"], infer_shape=_stats_shape,
    forward=_stats_bwd_forward, tdl=_stats_bwd_tdl, doc="Gradient of _bn_stats to E[x] and E[x^2]."))
register(OpDef(
    name="_bn_apply", params={**_AXIS, **_FIX},
    arguments=lambda attrs: ["data", "gamma", "beta", "mean", "invstd"], infer_shape=_apply_shape,
    forward=_apply_forward, gradient=_apply_gradient, tdl=_apply_tdl,
    doc="(data - mean) * invstd * gamma + beta per channel (gamma = 1 with fix_gamma)."))
register(OpDef(
    name="_backward_bn_apply", params={**_AXIS, **_FIX},
    arguments=lambda attrs: ["dy", "data", "gamma", "mean", "invstd"],
    outputs=lambda attrs: ["data_grad", "gamma_grad", "beta_grad", "mean_grad", "invstd_grad"],
    infer_shape=_apply_bwd_shape, forward=_apply_bwd_forward, tdl=_apply_bwd_tdl,
    doc="Gradients of _bn_apply; those of gamma, beta, mean and invstd are sums over the batch."))


# ----------------------------------------------------------------------------- the rewrite

#: Node attribute naming a joint strategy: the search gives the nodes with one value, and their
#: backward nodes, one strategy (csrc/search/coarsen.h). A BatchNorm's moments and apply carry
#: its name: their TDLs use the same split variables, and one variable instead of four keeps
#: the search's tables as narrow as the fused BatchNorm's.
JOINT_ATTR = "__joint_strategy__"


def _expands(node) -> bool:
    if node.is_variable or node.op != "BatchNorm":
        return False
    return not node.parsed_attrs()["use_global_stats"]


def expand_batchnorm(sym, shapes: Optional[Dict[str, tuple]] = None):
    """`sym` with every BatchNorm that uses batch statistics replaced by the synchronous form
    (``_bn_moments`` -> ``_bn_stats`` -> ``_bn_apply``, see the module docstring). The
    ``_bn_apply`` node keeps the BatchNorm's name, so its output keeps its name; the mean and
    inverse-std outputs become ``{bn}_stats_mean`` / ``{bn}_stats_var``. A BatchNorm whose
    data shape cannot be inferred (no `shapes`, no declared shapes) stays as it is. Returns
    `sym` itself when nothing changes."""
    from ..symbol.infer import infer_entry_shapes
    from ..symbol.symbol import Node, Symbol

    nodes = sym.topo_nodes()
    if not any(_expands(n) for n in nodes):
        return sym
    known = infer_entry_shapes(sym, dict(shapes or {}), partial=True)
    names = {n.name for n in nodes}
    new: Dict[int, list] = {}  # id(old node) -> its entries in the new graph, by output index

    def entry(e):
        node, i = e
        return (node, i) if node.is_variable else new[id(node)][i]

    for node in nodes:
        if node.is_variable:
            continue
        inputs = [entry(e) for e in node.inputs]
        shape = known.get((id(node.inputs[0][0]), node.inputs[0][1])) if node.inputs else None
        if not _expands(node) or shape is None or f"{node.name}_moments" in names or f"{node.name}_stats" in names:
            copy = Node(node.op, node.name, node.attrs, inputs)
            new[id(node)] = [(copy, i) for i in range(node.opdef().num_outputs(node.parsed_attrs()))]
            continue
        attrs = node.parsed_attrs()
        axis = attrs["axis"] % len(shape)
        count = int(np.prod(shape, dtype=np.int64)) // max(int(shape[axis]), 1)
        extra = {k: v for k, v in node.attrs.items() if k.startswith("__")}
        data, gamma, beta, moving_mean, moving_var = inputs
        # moments and apply (and their backward nodes) search one strategy (csrc/search/coarsen.h)
        joint = {JOINT_ATTR: node.name}
        moments = Node("_bn_moments", f"{node.name}_moments",
                       {**extra, **joint, "axis": str(axis), "count": str(count)}, [data])
        stats = Node("_bn_stats", f"{node.name}_stats",
                     {**extra, "eps": repr(float(attrs["eps"])), "momentum": repr(float(attrs["momentum"]))},
                     [(moments, 0), (moments, 1), moving_mean, moving_var])
        apply = Node("_bn_apply", node.name,
                     {**extra, **joint, "axis": str(axis), "fix_gamma": str(bool(attrs["fix_gamma"]))},
                     [data, gamma, beta, (stats, 0), (stats, 1)])
        new[id(node)] = [(apply, 0), (stats, 0), (stats, 1)]
    return Symbol([entry(e) for e in sym.entries], params=sym.params)
