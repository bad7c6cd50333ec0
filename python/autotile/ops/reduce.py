"""Reductions sum, mean, max, min, prod (MXNet semantics: axis None/int/tuple, keepdims,
exclude; axis None or () reduces everything; a full reduction has shape (1,)).

Gradients: sum/mean broadcast dy back over the reduced dims; max/min route dy to *every*
element equal to the result, as MXNet does (ties each get the full gradient); prod
multiplies dy by the product of the other elements (exact where inputs are zero, where
MXNet's out/x gives nan).

TDL: ``out[i0, i2] = sum(r1) { data[i0, r1, i2] }``: splitting a kept dim is exact,
splitting a reduced dim leaves partial results (reduced with the same reducer).
"""
from __future__ import annotations

import numpy as np

from ._axes import need_shapes, reduced_axes, reduced_shape
from ._tiles import box_shape
from .registry import OpDef, Param, alias, register
from .tdl_helpers import access, header, index_vars

_PARAMS = {
    "axis": Param("optional_shape", None),
    "keepdims": Param("bool", False),
    "exclude": Param("bool", False),
}


def _axes(op, attrs, shape):
    return reduced_axes(op, attrs["axis"], attrs["exclude"], shape)


def _out_shape(op, attrs, shape):
    return reduced_shape(tuple(shape), _axes(op, attrs, shape), attrs["keepdims"])


def _dy_index(shape, axes, keepdims, xv):
    """Index of dy (the reduced tensor) for the data element at variables `xv`."""
    if keepdims:
        return ["0" if d in axes else v for d, v in enumerate(xv)]
    idx = [v for d, v in enumerate(xv) if d not in axes]
    return idx or ["0"]


def _keep_shape(shape, axes):
    return tuple(1 if d in axes else s for d, s in enumerate(shape))


_NUMPY = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}
_REDUCER = {"sum": "sum", "mean": "sum", "max": "max", "min": "min", "prod": "prod"}


def _make_forward(name):
    def forward(attrs, inputs, ctx):
        x = inputs[0]
        axes = _axes(name, attrs, x.shape)
        if name == "mean" and attrs.get("count"):  # on a tile: divide by the full group size
            y = np.sum(x, axis=axes, keepdims=True) / attrs["count"]
        else:
            y = _NUMPY[name](x, axis=axes, keepdims=True) if axes else x.copy()
        return [np.asarray(y, dtype=x.dtype).reshape(_out_shape(name, attrs, x.shape))]

    return forward


def _full_count(attrs, shape):
    return int(np.prod([shape[d] for d in _axes("mean", attrs, shape)], dtype=np.int64))


def _mean_tile(attrs, ins, outs, in_shapes, out_shapes):
    """A tile may hold part of each reduced group (partial sums): divide by the full size."""
    return {**attrs, "count": _full_count(attrs, in_shapes[0])}


def _bwd_sum_tile(attrs, ins, outs, in_shapes, out_shapes):
    out = {**attrs, "shape": box_shape(outs[0])}
    if "count" in attrs:
        out["count"] = _full_count(attrs, out_shapes[0])
    return out


def _make_infer(name):
    def infer(attrs, in_shapes):
        need_shapes(name, in_shapes, ["data"])
        return [tuple(in_shapes[0])], [_out_shape(name, attrs, in_shapes[0])]

    return infer


def _make_tdl(name):
    def tdl(attrs, in_shapes, out_shapes):
        shape = in_shapes[0]
        axes = _axes(name, attrs, shape)
        ov = index_vars(len(out_shapes[0]))
        if attrs["keepdims"]:
            xv = [f"r{d}" if d in axes else ov[d] for d in range(len(shape))]
        else:
            kept = iter(ov)
            xv = [f"r{d}" if d in axes else next(kept) for d in range(len(shape))]
        body = access("data", xv)
        if not axes:
            return f"{header(['data'], ['out'])}: {access('out', ov)} = {body}"
        if name == "mean":
            body += f" / {int(np.prod([shape[d] for d in axes]))}"
        red = ", ".join(f"r{d}" for d in axes)
        return f"{header(['data'], ['out'])}: {access('out', ov)} = {_REDUCER[name]}({red}) {{ {body} }}"

    return tdl


def _make_gradient(name):
    def gradient(ctx):
        a = dict(axis=ctx.attrs["axis"], keepdims=ctx.attrs["keepdims"], exclude=ctx.attrs["exclude"])
        dy = ctx.out_grads[0]
        if name in ("sum", "mean"):
            return [ctx.op(f"_backward_{name}", dy, shape=tuple(ctx.in_shapes[0]), **a)]
        if name in ("max", "min"):
            return [ctx.op(f"_backward_{name}", dy, ctx.inputs[0], ctx.outputs[0], **a)]
        return [ctx.op("_backward_prod", dy, ctx.inputs[0], **a)]

    return gradient


def _reduction_vars(attrs, in_shapes, out_shapes):
    """The reduced axes' TDL variables: max/min/prod veto splitting them. A split reduction
    leaves partial outputs, and the execution graph combines partials by summing them
    (MultiFetch accumulates), which is right for sum and mean only."""
    return [f"r{d}" for d in _axes("max", attrs, in_shapes[0])]


_COUNT = {"count": Param("optional_int", None)}  # set on tiles only (see _mean_tile)

for _name, _doc in [("sum", "Sum"), ("mean", "Mean"), ("max", "Maximum"), ("min", "Minimum"), ("prod", "Product")]:
    register(OpDef(
        name=_name,
        params=dict(_PARAMS, **(_COUNT if _name == "mean" else {})),
        extra=({"tile_attrs": _mean_tile} if _name == "mean" else
               {"no_split": _reduction_vars} if _name in ("max", "min", "prod") else {}),
        infer_shape=_make_infer(_name),
        forward=_make_forward(_name),
        gradient=_make_gradient(_name),
        tdl=_make_tdl(_name),
        doc=f"{_doc} over `axis` (all axes when None; the complement with exclude=True).",
    ))
alias("sum_axis", "sum")
alias("max_axis", "max")
alias("min_axis", "min")


# ----------------------------------------------------------------------------- backward ops

def _bwd_sum_forward(name):
    def forward(attrs, inputs, ctx):
        dy = inputs[0]
        shape = tuple(attrs["shape"])
        axes = _axes(name, attrs, shape)
        dx = np.broadcast_to(dy.reshape(_keep_shape(shape, axes)), shape)
        if name == "mean" and axes:
            dx = dx / (attrs.get("count") or np.prod([shape[d] for d in axes]))
        return [np.array(dx, dtype=dy.dtype)]

    return forward


def _bwd_sum_tdl(name):
    def tdl(attrs, in_shapes, out_shapes):
        shape = tuple(attrs["shape"])
        axes = _axes(name, attrs, shape)
        xv = index_vars(len(shape))
        body = access("dy", _dy_index(shape, axes, attrs["keepdims"], xv))
        if name == "mean" and axes:
            body += f" / {int(np.prod([shape[d] for d in axes]))}"
        return f"dy -> dx: {access('dx', xv)} = {body}"

    return tdl


def _bwd_sum_infer(name):
    def infer(attrs, in_shapes):
        shape = tuple(attrs["shape"])
        return [_out_shape(name, attrs, shape)], [shape]

    return infer


for _name in ("sum", "mean"):
    register(OpDef(
        name=f"_backward_{_name}",
        params=dict(_PARAMS, shape=Param("shape", required=True), **(_COUNT if _name == "mean" else {})),
        arguments=lambda attrs: ["dy"],
        extra={"tile_attrs": _bwd_sum_tile},
        infer_shape=_bwd_sum_infer(_name),
        forward=_bwd_sum_forward(_name),
        tdl=_bwd_sum_tdl(_name),
        doc=f"Gradient of {_name}: dy broadcast back to `shape`" + (" and divided by the count." if _name == "mean" else "."),
    ))


def _bwd_extreme_forward(name):
    def forward(attrs, inputs, ctx):
        dy, x, y = inputs
        keep = _keep_shape(x.shape, _axes(name, attrs, x.shape))
        dx = dy.reshape(keep) * (x == y.reshape(keep))
        return [np.asarray(dx, dtype=dy.dtype)]

    return forward


def _bwd_arg_infer(name, args):
    def infer(attrs, in_shapes):
        need_shapes(f"_backward_{name}", in_shapes[1:2], ["data"])
        shape = tuple(in_shapes[1])
        out = _out_shape(name, attrs, shape)
        return [out, shape] + [out] * (len(args) - 2), [shape]

    return infer


def _bwd_extreme_tdl(name):
    def tdl(attrs, in_shapes, out_shapes):
        shape = in_shapes[1]
        axes = _axes(name, attrs, shape)
        xv = index_vars(len(shape))
        k = _dy_index(shape, axes, attrs["keepdims"], xv)
        return (f"dy, data, out -> dx: {access('dx', xv)} = "
                f"route({access('dy', k)}, {access('data', xv)}, {access('out', k)})")

    return tdl


for _name in ("max", "min"):
    register(OpDef(
        name=f"_backward_{_name}",
        params=dict(_PARAMS),
        arguments=lambda attrs: ["dy", "data", "out"],
        infer_shape=_bwd_arg_infer(_name, ["dy", "data", "out"]),
        forward=_bwd_extreme_forward(_name),
        tdl=_bwd_extreme_tdl(_name),
        doc=f"Gradient of {_name}: dy routed to every element equal to the result.",
    ))


def _prod_of_others(x, axes):
    """For each element, the product of the other elements of its reduction group."""
    rest = [d for d in range(x.ndim) if d not in axes]
    perm = rest + list(axes)
    moved = np.transpose(x, perm)
    flat = moved.reshape(moved.shape[:len(rest)] + (-1,))
    ones = np.ones(flat.shape[:-1] + (1,), dtype=flat.dtype)
    left = np.concatenate([ones, np.cumprod(flat, axis=-1)[..., :-1]], axis=-1)
    right = np.concatenate([np.cumprod(flat[..., ::-1], axis=-1)[..., :-1][..., ::-1], ones], axis=-1)
    return np.transpose((left * right).reshape(moved.shape), np.argsort(perm))


def _bwd_prod_forward(attrs, inputs, ctx):
    dy, x = inputs
    axes = _axes("prod", attrs, x.shape)
    if not axes:
        return [np.array(dy, dtype=dy.dtype)]
    dx = dy.reshape(_keep_shape(x.shape, axes)) * _prod_of_others(x, axes)
    return [np.asarray(dx, dtype=dy.dtype)]


def _bwd_prod_tdl(attrs, in_shapes, out_shapes):
    shape = in_shapes[1]
    axes = _axes("prod", attrs, shape)
    xv = index_vars(len(shape))
    k = _dy_index(shape, axes, attrs["keepdims"], xv)
    group = [":" if d in axes else v for d, v in enumerate(xv)]
    return f"dy, data -> dx: {access('dx', xv)} = dprod({access('dy', k)}, {access('data', group)})"


register(OpDef(
    name="_backward_prod",
    params=dict(_PARAMS),
    arguments=lambda attrs: ["dy", "data"],
    infer_shape=_bwd_arg_infer("prod", ["dy", "data"]),
    forward=_bwd_prod_forward,
    tdl=_bwd_prod_tdl,
    doc="Gradient of prod: dy times the product of the other elements of each group.",
))
