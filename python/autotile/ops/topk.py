"""topk (ONNX TopK with a constant k) and its gradient.

topk(data; k, axis, largest): the k largest (or smallest) elements along `axis`, sorted, and
their int64 indices; of equal elements the one with the lower index comes first (ONNX spec).
Gradient of the values: dy put back where each value came from, zeros elsewhere
(``_backward_topk(dy, indices; axis, size)``); the indices have none.

TDL: ``values[i0, i1] = f(data[i0, :])``: the searched axis is read whole; its output variable
(i1, the rank of a value) is vetoed (``no_split``): a tile of the ranks would need the tile's
first rank, which the kernel does not take. Every other dim splits exactly. The backward op
reads dy and indices whole along the axis and vetoes splitting the axis of dx likewise.
"""
from __future__ import annotations

import numpy as np

from ..errors import Error
from ._axes import need_shapes, norm_axis
from .registry import OpDef, Param, register
from .tdl_helpers import access, index_vars

_PARAMS = {"k": Param("int", required=True), "axis": Param("int", -1), "largest": Param("bool", True)}


def _geometry(op, attrs, shape):
    axis = norm_axis(op, attrs["axis"], len(shape), shape=shape)
    if not 1 <= attrs["k"] <= shape[axis]:
        raise Error(f"{op}: k={attrs['k']} must be in [1, {shape[axis]}] (axis {axis} of data {tuple(shape)})")
    return axis


def _infer(attrs, in_shapes):
    need_shapes("topk", in_shapes, ["data"])
    shape = tuple(in_shapes[0])
    axis = _geometry("topk", attrs, shape)
    out = shape[:axis] + (attrs["k"],) + shape[axis + 1:]
    return [shape], [out, out]


def _order(x, axis, largest):
    """Indices sorting x along axis, ties by lower index first, descending when largest."""
    if not largest:
        return np.argsort(x, axis=axis, kind="stable")
    n = x.shape[axis]
    # stable ascending sort of the reversed axis, reversed: descending with lower index first
    return n - 1 - np.flip(np.argsort(np.flip(x, axis=axis), axis=axis, kind="stable"), axis=axis)


def _forward(attrs, inputs, ctx):
    x = inputs[0]
    axis = _geometry("topk", attrs, x.shape)
    idx = np.take(_order(x, axis, attrs["largest"]), np.arange(attrs["k"]), axis=axis)
    return [np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)]


def _tdl(attrs, in_shapes, out_shapes):
    shape = in_shapes[0]
    axis = norm_axis("topk", attrs["axis"], len(shape), shape=shape)
    iv = index_vars(len(shape))
    data = access("data", [":" if d == axis else v for d, v in enumerate(iv)])
    return f"data -> values, indices: {access('values', iv)} = f({data}); {access('indices', iv)} = f({data})"


def _axis_var(attrs, in_shapes, out_shapes):
    return [index_vars(len(in_shapes[0]))[norm_axis("topk", attrs["axis"], len(in_shapes[0]))]]


register(OpDef(
    name="topk",
    params=dict(_PARAMS),
    outputs=lambda attrs: ["values", "indices"],
    infer_shape=_infer,
    infer_type=lambda attrs, in_dtypes: ([in_dtypes[0] or "float32"], [in_dtypes[0] or "float32", "int64"]),
    forward=_forward,
    gradient=lambda ctx: [ctx.op("_backward_topk", ctx.out_grads[0], ctx.outputs[1], axis=ctx.attrs["axis"],
                                 size=int(ctx.in_shapes[0][norm_axis("topk", ctx.attrs["axis"],
                                                                     len(ctx.in_shapes[0]))]))],
    tdl=_tdl,
    extra={"no_split": _axis_var},
    doc="The k largest (or smallest) elements along an axis, sorted, and their int64 indices (ONNX TopK).",
))

# ----------------------------------------------------------------------------- backward

_BWD_PARAMS = {"axis": Param("int", -1), "size": Param("int", required=True)}


def _bwd_infer(attrs, in_shapes):
    need_shapes("_backward_topk", in_shapes, ["dy", "indices"])
    dy, idx = tuple(in_shapes[0]), tuple(in_shapes[1])
    if dy != idx:
        raise Error(f"_backward_topk: dy {dy} and indices {idx} must have one shape")
    axis = norm_axis("_backward_topk", attrs["axis"], len(dy), shape=dy)
    return [dy, idx], [dy[:axis] + (attrs["size"],) + dy[axis + 1:]]


def _bwd_forward(attrs, inputs, ctx):
    dy, idx = inputs
    axis = norm_axis("_backward_topk", attrs["axis"], dy.ndim, shape=dy.shape)
    shape = list(dy.shape)
    shape[axis] = attrs["size"]
    dx = np.zeros(shape, dtype=dy.dtype)
    np.put_along_axis(dx, idx.astype(np.int64), dy, axis=axis)  # the k indices of a row are distinct
    return [dx]


def _bwd_tdl(attrs, in_shapes, out_shapes):
    shape = in_shapes[0]
    axis = norm_axis("_backward_topk", attrs["axis"], len(shape), shape=shape)
    iv = index_vars(len(shape))
    whole = [":" if d == axis else v for d, v in enumerate(iv)]
    return f"dy, indices -> dx: {access('dx', iv)} = f({access('dy', whole)}, {access('indices', whole)})"


register(OpDef(
    name="_backward_topk",
    params=_BWD_PARAMS,
    arguments=lambda attrs: ["dy", "indices"],
    infer_shape=_bwd_infer,
    infer_type=lambda attrs, in_dtypes: (list(in_dtypes), [in_dtypes[0] or "float32"]),
    forward=_bwd_forward,
    tdl=_bwd_tdl,
    extra={"no_split": lambda a, i, o: [index_vars(len(i[0]))[norm_axis("_backward_topk", a["axis"], len(i[0]))]]},
    doc="Gradient of topk's values: dy put at the indices along the axis, zeros elsewhere.",
))
