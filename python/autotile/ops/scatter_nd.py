"""ScatterND (ONNX semantics) and the data gradient of its plain form.

ScatterND(data, indices, updates; reduction): indices (Y..., M) address data's first M dims,
updates has shape Y... + data.shape[M:]; out = data with out[indices[y]] = updates[y]
(reduction "none"), or combined with it by add / mul / max / min. Indices may be negative
(from the end); others out of range are an Error naming the op.

Gradients: reduction "none": d data = dy with the scattered slices zeroed
(``_backward_ScatterND_data(dy, indices)``), d updates = dy gathered at the indices
(gather_nd of transposed indices); "add": d data = dy, d updates the same gather. The other
reductions have no gradient here (autodiff gets an Error naming the op).

TDL: ``out[v..., s...] = f(data[v..., s...], sum(y...) { scatter(indices[y..., :], v...) *
updates[y..., s...] })``: the sum is nested, so every split is an output split. Splitting the
addressed dims v reads all updates and indices (each tile applies those that land in it;
the tile hook says where its rows start); splitting the trailing dims s splits data,
updates and the output alike.
"""
from __future__ import annotations

import numpy as np

from ..errors import Error
from ._axes import need_shapes
from .gather import _nd_local, map_indices
from .registry import OpDef, Param, register
from .tdl_helpers import access, index_vars

REDUCTIONS = ("none", "add", "mul", "max", "min")
_TILE = {"tile_begin": Param("optional_shape", None), "full_shape": Param("optional_shape", None)}


def _geometry(op, data, idx, updates=None):
    """M, after checking indices' and updates' shapes against data's."""
    data, idx = tuple(data), tuple(idx)
    if len(idx) < 1 or not 1 <= idx[-1] <= len(data):
        raise Error(f"{op}: indices of shape {idx} must end in a dim M in [1, {len(data)}] "
                    f"(the number of leading dims of data {data} they address)")
    m = idx[-1]
    if updates is not None and tuple(updates) != idx[:-1] + data[m:]:
        raise Error(f"{op}: updates have shape {tuple(updates)}, expected {idx[:-1] + data[m:]} "
                    f"(indices {idx}, data {data})")
    return m


def _positions(op, indices, full):
    """(M, n) positions in [0, full[d]) of the flattened index tuples."""
    idx = np.asarray(indices).reshape(-1, indices.shape[-1]).T.astype(np.int64)
    return np.stack([map_indices(op, idx[d], full[d], what=f"dim {d} of data") for d in range(len(idx))])


def _local(op, attrs, indices, tile_shape, m):
    full = attrs["full_shape"] or tile_shape[:m]
    begin = attrs["tile_begin"] or (0,) * m
    local, keep = _nd_local(_positions(op, indices, full), begin, tile_shape[:m])
    return tuple(local[:, keep]), keep


_AT = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _forward(attrs, inputs, ctx):
    data, indices, updates = inputs
    m = _geometry("ScatterND", data.shape, indices.shape)
    where, keep = _local("ScatterND", attrs, indices, data.shape, m)
    out = data.copy()
    vals = updates.reshape((-1,) + data.shape[m:])[keep]
    if attrs["reduction"] == "none":
        out[where] = vals
    else:
        _AT[attrs["reduction"]].at(out, where, vals)
    return [out]


def _infer(attrs, in_shapes):
    need_shapes("ScatterND", in_shapes, ["data", "indices", "updates"])
    data = tuple(in_shapes[0])
    _geometry("ScatterND", data, in_shapes[1], in_shapes[2])
    return [data, tuple(in_shapes[1]), tuple(in_shapes[2])], [data]


def _vars(data, idx):
    m = idx[-1]
    return index_vars(m, "v"), index_vars(len(data) - m, "s"), index_vars(len(idx) - 1, "y")


def _tdl(attrs, in_shapes, out_shapes):
    data, idx = in_shapes[0], in_shapes[1]
    vv, sv, yv = _vars(data, idx)
    return (f"data, indices, updates -> out: {access('out', vv + sv)} = f({access('data', vv + sv)}, "
            f"sum({', '.join(yv)}) {{ scatter({access('indices', yv + [':'])}, {', '.join(vv)}) * "
            f"{access('updates', yv + sv)} }})")


def _hook(attrs, ins, outs, in_shapes, out_shapes):
    m = in_shapes[1][-1]
    return {**attrs, "tile_begin": tuple(int(v) for v in outs[0][0][:m]),
            "full_shape": tuple(int(v) for v in out_shapes[0][:m])}


def _gradient(ctx):
    reduction = ctx.attrs["reduction"]
    if reduction not in ("none", "add"):
        raise Error(f"ScatterND node '{ctx.name}' with reduction '{reduction}' has no gradient "
                    "(only 'none' and 'add' are differentiable here)")
    dy, indices = ctx.out_grads[0], ctx.inputs[1]
    rank = len(ctx.in_shapes[1])
    front = ctx.op("transpose", indices, axes=(rank - 1,) + tuple(range(rank - 1)))  # (M, Y...): gather_nd's
    d_updates = ctx.op("gather_nd", dy, front)
    d_data = dy if reduction == "add" else ctx.op("_backward_ScatterND_data", dy, indices)
    return [d_data, None, d_updates]


register(OpDef(
    name="ScatterND",
    params={"reduction": Param("str", "none", choices=REDUCTIONS), **_TILE},
    arguments=lambda attrs: ["data", "indices", "updates"],
    infer_shape=_infer,
    infer_type=lambda attrs, d: ([d[0] or "float32", d[1] or "int64", d[0] or "float32"], [d[0] or "float32"]),
    forward=_forward,
    gradient=_gradient,
    tdl=_tdl,
    extra={"tile_attrs": _hook},
    doc="ONNX ScatterND: data with the slices at indices replaced by (or combined with) updates.",
))


def _bwd_forward(attrs, inputs, ctx):
    dy, indices = inputs
    m = _geometry("_backward_ScatterND_data", dy.shape, indices.shape)
    where, _ = _local("_backward_ScatterND_data", attrs, indices, dy.shape, m)
    out = dy.copy()
    out[where] = 0
    return [out]


def _bwd_infer(attrs, in_shapes):
    need_shapes("_backward_ScatterND_data", in_shapes, ["dy", "indices"])
    _geometry("_backward_ScatterND_data", in_shapes[0], in_shapes[1])
    return [tuple(in_shapes[0]), tuple(in_shapes[1])], [tuple(in_shapes[0])]


def _bwd_tdl(attrs, in_shapes, out_shapes):
    dy, idx = in_shapes
    vv, sv, yv = _vars(dy, idx)
    return (f"dy, indices -> dx: {access('dx', vv + sv)} = f({access('dy', vv + sv)}, "
            f"sum({', '.join(yv)}) {{ scatter({access('indices', yv + [':'])}, {', '.join(vv)}) }})")


register(OpDef(
    name="_backward_ScatterND_data",
    params=dict(_TILE),
    arguments=lambda attrs: ["dy", "indices"],
    infer_shape=_bwd_infer,
    infer_type=lambda attrs, d: ([d[0] or "float32", d[1] or "int64"], [d[0] or "float32"]),
    forward=_bwd_forward,
    tdl=_bwd_tdl,
    extra={"tile_attrs": _hook},
    doc="Gradient of ScatterND (reduction none) w.r.t. data: dy with the scattered slices zeroed.",
))
