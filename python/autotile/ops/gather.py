"""Gathers with run-time indices: take (MXNet), gather_nd (MXNet), gather_elements (ONNX
GatherElements), and their backward scatter-adds.

- take(a, indices; axis=0, mode="clip"): out = a.shape[:axis] + indices.shape + a.shape[axis+1:],
  out[p, q, s] = a[p, indices[q], s]. Indices may be floats (MXNet's default dtype; truncated).
  mode "clip" clips to [0, n - 1], "wrap" takes them modulo n, "raise" accepts [-n, n) (negative
  ones count from the end, as NumPy and ONNX Gather) and raises Error otherwise.
  take(table, ids) on a (vocab, d) table is an embedding lookup.
- gather_nd(data, indices): indices (M, Y...) address data's first M dims; out has shape
  Y... + data.shape[M:], out[y, s] = data[indices[0, y], ..., indices[M-1, y], s].
- gather_elements(data, indices; axis=0): out has indices' shape, out[i] = data[i with its
  `axis` coordinate replaced by indices[i]]; indices' other dims must not exceed data's.
gather_nd and gather_elements accept indices in [-n, n) (negative from the end) and raise Error
naming the op, the index and the dim otherwise.

Gradients: data gets a scatter-add of dy (repeated indices accumulate, the `_backward_*` ops);
indices get none.

TDL: which element is read depends on index *values*, which an affine index cannot say; the
descriptions write the gather as a sum over the gathered dim of "indices select this row"
times the row: ``out[p, q, s] = sum(v) { hit(indices[q], v) * a[p, v, s] }``. That is exact
(one term is the row, the others are zero) and makes the gathered dim a top-level reduction:
a split of the table by rows (a vocabulary split of an embedding) gives each worker the rows it
holds and a *partial* output (zero where an index falls in another worker's rows), summed;
splits of indices' dims (tokens) replicate the table; splits of the other dims of the table
(the embedding width) split both. Kernels on a tile learn where their rows start and how many
rows the whole dim has from tile attributes (row_begin / axis_size / tile_begin / full_shape,
set by the tile hooks, never by users). The backward ops are the transposes: the table's row
dim is an output dim (a worker accumulates the rows it owns), indices' dims are summed
(partial gradients).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import Error
from ._axes import need_shapes, norm_axis
from ._tiles import box_shape
from .registry import OpDef, Param, register
from .tdl_helpers import access, index_vars

_MODES = ("clip", "wrap", "raise")


# ----------------------------------------------------------------------------- index maths

def _as_int(indices):
    """Integer copy of an index array (floats truncate toward zero, as MXNet casts)."""
    idx = np.asarray(indices)
    return idx.astype(np.int64) if idx.dtype.kind != "i" else idx.astype(np.int64, copy=False)


def map_indices(op: str, indices, n: int, mode: str = "raise", what: str = "axis"):
    """Indices into a dim of size `n` as positions in [0, n) under `mode` (see module doc).
    Under "raise" (ONNX semantics) a float index that is not an integer is an Error too."""
    if mode == "raise":
        bad = first_non_integer(indices)
        if bad is not None:
            raise Error(f"{op}: index {bad} is not an integer (indices into {what} of size {n})")
    idx = _as_int(indices)
    if n <= 0:
        raise Error(f"{op}: cannot gather from an empty {what} (size {n})")
    if mode == "clip":
        return np.clip(idx, 0, n - 1)
    if mode == "wrap":
        return np.mod(idx, n)
    bad = (idx < -n) | (idx >= n)
    if bad.any():
        raise Error(f"{op}: index {int(idx[bad].reshape(-1)[0])} is out of range for {what} of size {n} "
                    f"(valid: [-{n}, {n}))")
    return np.where(idx < 0, idx + n, idx)


def first_non_integer(indices):
    """The first value of a float index array that is not an integer (NaN, inf, 3.5), else None."""
    idx = np.asarray(indices)
    if idx.dtype.kind not in "fc":
        return None
    bad = ~np.isfinite(idx) | (idx != np.trunc(idx))
    return idx[bad].reshape(-1)[0].item() if bad.any() else None


def check_index_inputs(sym, values) -> None:
    """Ids fed from the model's inputs to a gather with ONNX semantics (Embedding or take with
    mode "raise"): Error naming the input, the node and the bad value before anything runs (the
    kernels refuse them too, but cannot name the input)."""
    by_name = {}
    for node in sym.topo_nodes():
        if node.op not in ("Embedding", "take") or len(node.inputs) < 2:
            continue
        attrs = node.parsed_attrs()
        if attrs.get("mode") != "raise":
            continue
        table, ids = (node.inputs[1][0], node.inputs[0][0]) if node.op == "Embedding" else \
            (node.inputs[0][0], node.inputs[1][0])
        if not ids.is_variable or ids.name not in values:
            continue
        if node.op == "Embedding":
            n = attrs["input_dim"]
        elif table.is_variable and table.name in values and np.ndim(values[table.name]) > 0:
            shape = np.shape(values[table.name])
            n = shape[norm_axis("take", attrs["axis"], len(shape), shape=shape)]
        else:
            continue
        by_name.setdefault(ids.name, (node, n))
    for name, (node, n) in by_name.items():
        where = f"node '{node.name}' ({node.op}) gathers from {n} rows"
        bad = first_non_integer(values[name])
        if bad is not None:
            raise Error(f"input '{name}' holds the id {bad}, which is not an integer ({where})")
        idx = _as_int(values[name])
        out = (idx < -n) | (idx >= n)
        if out.any():
            raise Error(f"input '{name}' holds the id {int(idx[out].reshape(-1)[0])}, out of range: {where}, "
                        f"so ids must lie in [-{n}, {n}) (negative ones count from the end)")


def scatter_rows(target, rows, vals):
    """target[:, rows[i], :] += vals[:, i, :] for (P, R, S) target and (P, n, S) vals; repeated
    rows accumulate (sorted, then one reduceat per run of equal rows: no np.add.at loop)."""
    if rows.size == 0:
        return target
    order = np.argsort(rows, kind="stable")
    r = rows[order]
    starts = np.flatnonzero(np.r_[True, r[1:] != r[:-1]])
    target[:, r[starts]] += np.add.reduceat(vals[:, order], starts, axis=1)
    return target


def _in_tile(pos, begin: int, size: int):
    """(local positions clipped into the tile, mask of those the tile holds)."""
    local = pos - begin
    keep = (local >= 0) & (local < size)
    return np.where(keep, local, 0), keep


def _index_type(attrs, in_dtypes):
    data = in_dtypes[0] or "float32"
    return [data, in_dtypes[1] or "float32"] + list(in_dtypes[2:]), [data]


def _bwd_type(attrs, in_dtypes):
    dy = in_dtypes[0] or "float32"
    return [dy, in_dtypes[1] or "float32"], [dy]


# ----------------------------------------------------------------------------- take

_TAKE = {"axis": Param("int", 0), "mode": Param("str", "clip", choices=_MODES),
         # tile hook only: where the tile's rows start, and the whole dim's size
         "row_begin": Param("int", 0), "axis_size": Param("optional_int", None)}


def _take_axis(op, attrs, shape):
    if not shape:
        raise Error(f"{op}: cannot take from a scalar (a needs rank >= 1)")
    return norm_axis(op, attrs["axis"], len(shape), shape=shape)


def _take_infer(attrs, in_shapes):
    need_shapes("take", in_shapes, ["a", "indices"])
    a, idx = tuple(in_shapes[0]), tuple(in_shapes[1])
    axis = _take_axis("take", attrs, a)
    return [a, idx], [a[:axis] + idx + a[axis + 1:]]


def _take_forward(attrs, inputs, ctx):
    a, indices = inputs
    axis = _take_axis("take", attrs, a.shape)
    n = attrs["axis_size"] if attrs["axis_size"] is not None else a.shape[axis]
    pos = map_indices("take", indices, n, attrs["mode"])
    local, keep = _in_tile(pos, attrs["row_begin"], a.shape[axis])
    out = np.take(a, local, axis=axis)
    if not keep.all():  # rows another worker holds: this tile's partial output is 0 there
        out = out * keep.reshape((1,) * axis + keep.shape + (1,) * (a.ndim - axis - 1)).astype(a.dtype)
    return [out]


def _take_tdl(attrs, in_shapes, out_shapes):
    a, idx = in_shapes
    axis = _take_axis("take", attrs, a)
    iv, jv = index_vars(len(a)), index_vars(len(idx), "j")
    ov = iv[:axis] + jv + iv[axis + 1:]
    av = iv[:axis] + ["v"] + iv[axis + 1:]
    return (f"a, indices -> out: {access('out', ov)} = "
            f"sum(v) {{ hit({access('indices', jv)}, v) * {access('a', av)} }}")


def _take_hook(attrs, in_boxes, out_boxes, in_shapes, out_shapes):
    axis = _take_axis("take", attrs, in_shapes[0])
    return {**attrs, "row_begin": int(in_boxes[0][0][axis]), "axis_size": int(in_shapes[0][axis])}


def _take_gradient(ctx):
    axis = _take_axis("take", ctx.attrs, ctx.in_shapes[0])
    return [ctx.op("_backward_take", ctx.out_grads[0], ctx.inputs[1], axis=ctx.attrs["axis"],
                   mode=ctx.attrs["mode"], axis_size=ctx.in_shapes[0][axis]), None]


register(OpDef(
    name="take",
    params=_TAKE,
    arguments=lambda attrs: ["a", "indices"],
    infer_shape=_take_infer,
    infer_type=_index_type,
    forward=_take_forward,
    gradient=_take_gradient,
    tdl=_take_tdl,
    extra={"tile_attrs": _take_hook},
    doc="Take slices of `a` along `axis` at run-time indices (MXNet take; mode clip / wrap / raise).",
))


def _take_bwd_geometry(attrs, dy_shape, idx_shape):
    """(axis, rows of the gradient) from dy's and indices' shapes."""
    rank = len(dy_shape) - len(idx_shape) + 1
    if rank < 1:
        raise Error(f"_backward_take: dy of shape {tuple(dy_shape)} cannot come from indices of shape "
                    f"{tuple(idx_shape)}")
    return norm_axis("_backward_take", attrs["axis"], rank), attrs["axis_size"]


def _take_bwd_infer(attrs, in_shapes):
    need_shapes("_backward_take", in_shapes, ["dy", "indices"])
    dy, idx = tuple(in_shapes[0]), tuple(in_shapes[1])
    axis, n = _take_bwd_geometry(attrs, dy, idx)
    return [dy, idx], [dy[:axis] + (n,) + dy[axis + len(idx):]]


def _take_bwd_forward(attrs, inputs, ctx):
    dy, indices = inputs
    axis, n = _take_bwd_geometry(attrs, dy.shape, np.shape(indices))
    rows = attrs["num_rows"] if attrs["num_rows"] is not None else n
    pos = map_indices("_backward_take", indices, n, attrs["mode"]).reshape(-1)
    local, keep = _in_tile(pos, attrs["row_begin"], rows)
    lead, rest = dy.shape[:axis], dy.shape[axis + np.ndim(indices):]
    p, s = int(np.prod(lead)), int(np.prod(rest))
    target = np.zeros((p, rows, s), dtype=dy.dtype)
    scatter_rows(target, local[keep], dy.reshape(p, pos.size, s)[:, keep])
    return [target.reshape(lead + (rows,) + rest)]


def _take_bwd_tdl(attrs, in_shapes, out_shapes):
    dy, idx = in_shapes
    axis, _ = _take_bwd_geometry(attrs, dy, idx)
    rank = len(out_shapes[0])
    iv, jv = index_vars(rank), index_vars(len(idx), "j")
    ov = iv[:axis] + ["v"] + iv[axis + 1:]
    dv = iv[:axis] + jv + iv[axis + 1:]
    return (f"dy, indices -> da: {access('da', ov)} = "
            f"sum({', '.join(jv)}) {{ scatter({access('indices', jv)}, v) * {access('dy', dv)} }}")


def _take_bwd_hook(attrs, in_boxes, out_boxes, in_shapes, out_shapes):
    axis, _ = _take_bwd_geometry(attrs, in_shapes[0], in_shapes[1])
    lo, hi = out_boxes[0]
    return {**attrs, "row_begin": int(lo[axis]), "num_rows": int(hi[axis]) - int(lo[axis])}


register(OpDef(
    name="_backward_take",
    params={"axis": Param("int", 0), "mode": Param("str", "clip", choices=_MODES),
            "axis_size": Param("int", required=True),
            # tile hook only: the block of rows this tile accumulates
            "row_begin": Param("int", 0), "num_rows": Param("optional_int", None)},
    arguments=lambda attrs: ["dy", "indices"],
    infer_shape=_take_bwd_infer,
    infer_type=_bwd_type,
    forward=_take_bwd_forward,
    tdl=_take_bwd_tdl,
    extra={"tile_attrs": _take_bwd_hook},
    doc="Gradient of take w.r.t. a: dy's slices scatter-added at the (mapped) indices along `axis`.",
))


# ----------------------------------------------------------------------------- gather_nd

def _nd_geometry(op, data, idx):
    """M, the number of data dims the indices address; Error when they do not fit."""
    if len(idx) < 1 or idx[0] < 1 or idx[0] > len(data):
        raise Error(f"{op}: indices of shape {tuple(idx)} must have a first dim M in [1, {len(data)}] "
                    f"(the number of leading dims of data {tuple(data)} they address)")
    return idx[0]


def _nd_infer(attrs, in_shapes):
    need_shapes("gather_nd", in_shapes, ["data", "indices"])
    data, idx = tuple(in_shapes[0]), tuple(in_shapes[1])
    m = _nd_geometry("gather_nd", data, idx)
    return [data, idx], [idx[1:] + data[m:]]


def _nd_positions(op, indices, full: Sequence[int]):
    """(M, n) positions in [0, full[d]) of the flattened indices."""
    idx = _as_int(indices).reshape(indices.shape[0], -1)
    return np.stack([map_indices(op, idx[d], full[d], what=f"dim {d} of data") for d in range(len(idx))])


def _nd_local(pos, begin: Sequence[int], sizes: Sequence[int]):
    """Positions relative to a tile starting at `begin` of `sizes` and the mask it holds."""
    local = pos - np.asarray(begin, dtype=np.int64).reshape(-1, 1)
    keep = ((local >= 0) & (local < np.asarray(sizes).reshape(-1, 1))).all(axis=0)
    return np.where(keep, local, 0), keep


def _nd_forward(attrs, inputs, ctx):
    data, indices = inputs
    m = _nd_geometry("gather_nd", data.shape, indices.shape)
    full = attrs["full_shape"] or data.shape[:m]
    begin = attrs["tile_begin"] or (0,) * m
    local, keep = _nd_local(_nd_positions("gather_nd", indices, full), begin, data.shape[:m])
    out = data[tuple(local)]  # (Y flat, S...)
    if not keep.all():
        out = out * keep.reshape((-1,) + (1,) * (out.ndim - 1)).astype(data.dtype)
    return [out.reshape(indices.shape[1:] + data.shape[m:])]


def _nd_tdl(attrs, in_shapes, out_shapes):
    data, idx = in_shapes
    m = _nd_geometry("gather_nd", data, idx)
    yv, sv, vv = index_vars(len(idx) - 1, "y"), index_vars(len(data) - m, "s"), index_vars(m, "v")
    return (f"data, indices -> out: {access('out', yv + sv)} = "
            f"sum({', '.join(vv)}) {{ hit({access('indices', [':'] + yv)}, {', '.join(vv)}) * "
            f"{access('data', vv + sv)} }}")


def _nd_hook(attrs, in_boxes, out_boxes, in_shapes, out_shapes):
    m = in_shapes[1][0]
    return {**attrs, "tile_begin": tuple(int(v) for v in in_boxes[0][0][:m]),
            "full_shape": tuple(int(v) for v in in_shapes[0][:m])}


_TILE_ND = {"tile_begin": Param("optional_shape", None), "full_shape": Param("optional_shape", None)}

register(OpDef(
    name="gather_nd",
    params=dict(_TILE_ND),
    arguments=lambda attrs: ["data", "indices"],
    infer_shape=_nd_infer,
    infer_type=_index_type,
    forward=_nd_forward,
    gradient=lambda ctx: [ctx.op("_backward_gather_nd", ctx.out_grads[0], ctx.inputs[1],
                                 shape=tuple(ctx.in_shapes[0])), None],
    tdl=_nd_tdl,
    extra={"tile_attrs": _nd_hook},
    doc="Gather slices of data at the coordinates in indices' first dim (MXNet gather_nd).",
))


def _nd_bwd_infer(attrs, in_shapes):
    need_shapes("_backward_gather_nd", in_shapes[1:], ["indices"])
    data, idx = tuple(attrs["shape"]), tuple(in_shapes[1])
    m = _nd_geometry("_backward_gather_nd", data, idx)
    return [idx[1:] + data[m:], idx], [data]


def _nd_bwd_forward(attrs, inputs, ctx):
    dy, indices = inputs
    shape = tuple(attrs["shape"])  # the tile's (the hook sets it)
    m = _nd_geometry("_backward_gather_nd", shape, indices.shape)
    full = attrs["full_shape"] or shape[:m]
    local, keep = _nd_local(_nd_positions("_backward_gather_nd", indices, full), attrs["tile_begin"] or (0,) * m,
                            shape[:m])
    rows = np.ravel_multi_index(tuple(local[:, keep]), shape[:m]) if m else np.zeros(0, np.int64)
    s = int(np.prod(shape[m:]))
    target = np.zeros((1, int(np.prod(shape[:m])), s), dtype=dy.dtype)
    scatter_rows(target, rows, dy.reshape(1, -1, s)[:, keep])
    return [target.reshape(shape)]


def _nd_bwd_tdl(attrs, in_shapes, out_shapes):
    dy, idx = in_shapes
    data = out_shapes[0]
    m = _nd_geometry("_backward_gather_nd", data, idx)
    yv, sv, vv = index_vars(len(idx) - 1, "y"), index_vars(len(data) - m, "s"), index_vars(m, "v")
    return (f"dy, indices -> ddata: {access('ddata', vv + sv)} = "
            f"sum({', '.join(yv)}) {{ scatter({access('indices', [':'] + yv)}, {', '.join(vv)}) * "
            f"{access('dy', yv + sv)} }}")


def _nd_bwd_hook(attrs, in_boxes, out_boxes, in_shapes, out_shapes):
    m = in_shapes[1][0]
    return {**attrs, "shape": box_shape(out_boxes[0]), "tile_begin": tuple(int(v) for v in out_boxes[0][0][:m]),
            "full_shape": tuple(int(v) for v in out_shapes[0][:m])}


register(OpDef(
    name="_backward_gather_nd",
    params={"shape": Param("shape", required=True), **_TILE_ND},
    arguments=lambda attrs: ["dy", "indices"],
    infer_shape=_nd_bwd_infer,
    infer_type=_bwd_type,
    forward=_nd_bwd_forward,
    tdl=_nd_bwd_tdl,
    extra={"tile_attrs": _nd_bwd_hook},
    doc="Gradient of gather_nd w.r.t. data (of shape `shape`): dy scatter-added at the indices.",
))


# ----------------------------------------------------------------------------- gather_elements

def _el_check(op, axis_attr, data, idx):
    if len(data) < 1 or len(idx) != len(data):
        raise Error(f"{op}: indices of shape {tuple(idx)} must have the rank of data {tuple(data)} (>= 1)")
    axis = norm_axis(op, axis_attr, len(data), shape=data)
    bigger = [d for d in range(len(data)) if d != axis and idx[d] > data[d]]
    if bigger:
        raise Error(f"{op}: indices of shape {tuple(idx)} exceed data {tuple(data)} along dim {bigger[0]} "
                    f"(only the gathered axis {axis} may differ freely)")
    return axis


def _el_infer(attrs, in_shapes):
    need_shapes("gather_elements", in_shapes, ["data", "indices"])
    data, idx = tuple(in_shapes[0]), tuple(in_shapes[1])
    _el_check("gather_elements", attrs["axis"], data, idx)
    return [data, idx], [idx]


def _el_forward(attrs, inputs, ctx):
    data, indices = inputs
    axis = _el_check("gather_elements", attrs["axis"], data.shape, indices.shape)
    n = attrs["axis_size"] if attrs["axis_size"] is not None else data.shape[axis]
    local, keep = _in_tile(map_indices("gather_elements", indices, n, what=f"axis {axis} of data"),
                           attrs["row_begin"], data.shape[axis])
    view = data[tuple(slice(None) if d == axis else slice(0, indices.shape[d]) for d in range(data.ndim))]
    out = np.take_along_axis(view, local, axis=axis)
    return [out if keep.all() else out * keep.astype(data.dtype)]


def _el_vars(rank, axis):
    ov = index_vars(rank)
    dv = list(ov)
    dv[axis] = "v"
    return ov, dv


def _el_tdl(attrs, in_shapes, out_shapes):
    data, idx = in_shapes
    ov, dv = _el_vars(len(data), _el_check("gather_elements", attrs["axis"], data, idx))
    return (f"data, indices -> out: {access('out', ov)} = "
            f"sum(v) {{ hit({access('indices', ov)}, v) * {access('data', dv)} }}")


def _el_hook(attrs, in_boxes, out_boxes, in_shapes, out_shapes):
    axis = _el_check("gather_elements", attrs["axis"], in_shapes[0], in_shapes[1])
    return {**attrs, "row_begin": int(in_boxes[0][0][axis]), "axis_size": int(in_shapes[0][axis])}


_EL = {"axis": Param("int", 0), "row_begin": Param("int", 0), "axis_size": Param("optional_int", None)}

register(OpDef(
    name="gather_elements",
    params=dict(_EL),
    arguments=lambda attrs: ["data", "indices"],
    infer_shape=_el_infer,
    infer_type=_index_type,
    forward=_el_forward,
    gradient=lambda ctx: [ctx.op("_backward_gather_elements", ctx.out_grads[0], ctx.inputs[1],
                                 axis=ctx.attrs["axis"], shape=tuple(ctx.in_shapes[0])), None],
    tdl=_el_tdl,
    extra={"tile_attrs": _el_hook},
    doc="ONNX GatherElements: out[i] = data[i with its `axis` coordinate replaced by indices[i]].",
))


def _el_bwd_infer(attrs, in_shapes):
    need_shapes("_backward_gather_elements", in_shapes[1:], ["indices"])
    data, idx = tuple(attrs["shape"]), tuple(in_shapes[1])
    _el_check("_backward_gather_elements", attrs["axis"], data, idx)
    return [idx, idx], [data]


def _el_bwd_forward(attrs, inputs, ctx):
    dy, indices = inputs
    shape = tuple(attrs["shape"])  # the tile's (the hook sets it)
    axis = norm_axis("_backward_gather_elements", attrs["axis"], len(shape), shape=shape)
    n = attrs["axis_size"] if attrs["axis_size"] is not None else shape[axis]
    local, keep = _in_tile(map_indices("_backward_gather_elements", indices, n, what=f"axis {axis} of data"),
                           attrs["row_begin"], shape[axis])
    # a tile whose rows lie past indices' extent (indices smaller than data) reads nothing
    grid = list(np.indices(indices.shape, sparse=True))
    grid[axis] = local
    where = tuple(np.broadcast_to(g, indices.shape)[keep] for g in grid)
    target = np.zeros(shape, dtype=dy.dtype)
    np.add.at(target, where, dy[keep])
    return [target]


def _el_bwd_tdl(attrs, in_shapes, out_shapes):
    data = out_shapes[0]
    axis = norm_axis("_backward_gather_elements", attrs["axis"], len(data), shape=data)
    ov, _ = _el_vars(len(data), axis)
    dv = list(ov)
    dv[axis] = "j"
    target = list(ov)
    target[axis] = "v"
    return (f"dy, indices -> ddata: {access('ddata', target)} = "
            f"sum(j) {{ scatter({access('indices', dv)}, v) * {access('dy', dv)} }}")


def _el_bwd_hook(attrs, in_boxes, out_boxes, in_shapes, out_shapes):
    axis = norm_axis("_backward_gather_elements", attrs["axis"], len(out_shapes[0]))
    return {**attrs, "shape": box_shape(out_boxes[0]), "row_begin": int(out_boxes[0][0][axis]),
            "axis_size": int(out_shapes[0][axis])}


register(OpDef(
    name="_backward_gather_elements",
    params={"axis": Param("int", 0), "shape": Param("shape", required=True),
            "row_begin": Param("int", 0), "axis_size": Param("optional_int", None)},
    arguments=lambda attrs: ["dy", "indices"],
    infer_shape=_el_bwd_infer,
    infer_type=_bwd_type,
    forward=_el_bwd_forward,
    tdl=_el_bwd_tdl,
    extra={"tile_attrs": _el_bwd_hook},
    doc="Gradient of gather_elements w.r.t. data (of shape `shape`): dy scatter-added along `axis`.",
))
