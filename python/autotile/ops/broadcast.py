"""broadcast_to and broadcast_like: repeat size-1 dims (MXNet semantics: same rank).

The gradient sums the output gradient over the broadcast dims (keepdims, so it has the
input's shape); the TDL reads index 0 of every broadcast dim."""
from __future__ import annotations

import numpy as np

from ..errors import Error
from ._axes import need_shapes, norm_axes
from ._tiles import out_tile_shape
from .registry import OpDef, Param, register
from .tdl_helpers import access, header, index_vars


def _check_dims(op, shape, out, what):
    for d, (a, b) in enumerate(zip(shape, out)):
        if a != b and a != 1:
            raise Error(f"{op}: cannot broadcast input of shape {tuple(shape)} to {tuple(out)} ({what}): "
                        f"dim {d} has size {a}, not 1 or {b}")


def _to_out(attrs, shapes):
    shape, target = tuple(shapes[0]), tuple(attrs["shape"])
    if len(target) != len(shape) or any(d is None or d < 0 for d in target):
        raise Error(f"broadcast_to: shape={target} must have one non-negative size per dim of input shape {shape}")
    out = tuple(s if t == 0 else t for s, t in zip(shape, target))
    _check_dims("broadcast_to", shape, out, f"shape={target}")
    return out


def _like_out(attrs, shapes):
    lhs, rhs = tuple(shapes[0]), tuple(shapes[1])
    la, ra = attrs["lhs_axes"], attrs["rhs_axes"]
    if la is None and ra is None:
        if len(lhs) != len(rhs):
            raise Error(f"broadcast_like: lhs of shape {lhs} and rhs of shape {rhs} must have the same rank")
        out = rhs
    else:
        if la is None or ra is None or len(la) != len(ra):
            raise Error(f"broadcast_like: lhs_axes={la} and rhs_axes={ra} must both be given, of equal length")
        la = norm_axes("broadcast_like", la, len(lhs), "lhs_axes", lhs)
        ra = norm_axes("broadcast_like", ra, len(rhs), "rhs_axes", rhs)
        out = list(lhs)
        for a, b in zip(la, ra):
            out[a] = rhs[b]
        out = tuple(out)
    _check_dims("broadcast_like", lhs, out, f"rhs shape {rhs}")
    return out


def _infer(op, out_fn, names):
    def infer(attrs, in_shapes):
        need_shapes(op, in_shapes, names)
        return list(in_shapes), [out_fn(attrs, in_shapes)]

    return infer


def _forward(out_fn):
    def forward(attrs, inputs, ctx):
        out = out_fn(attrs, [np.shape(x) for x in inputs])
        return [np.ascontiguousarray(np.broadcast_to(inputs[0], out))]

    return forward


def _gradient(ctx):
    shape, out = tuple(ctx.in_shapes[0]), tuple(ctx.out_shapes[0])
    axes = tuple(d for d, (a, b) in enumerate(zip(shape, out)) if a != b)
    dy = ctx.out_grads[0]
    dx = ctx.op("sum", dy, axis=axes, keepdims=True) if axes else ctx.op("Reshape", dy, shape=shape)
    return [dx] + [None] * (len(ctx.inputs) - 1)


def _tdl(inputs):
    def tdl(attrs, in_shapes, out_shapes):
        shape, out = in_shapes[0], out_shapes[0]
        ov = index_vars(len(out))
        idx = ["0" if a != b else v for a, b, v in zip(shape, out, ov)]
        return f"{header(inputs, ['out'])}: {access('out', ov)} = {access(inputs[0], idx)}"

    return tdl


register(OpDef(
    name="broadcast_to",
    params={"shape": Param("shape", ())},
    infer_shape=_infer("broadcast_to", _to_out, ["data"]),
    forward=_forward(_to_out),
    gradient=_gradient,
    tdl=_tdl(["data"]),
    extra={"tile_attrs": out_tile_shape()},
    doc="Broadcast size-1 dims of data to `shape` (0 keeps a dim).",
))

register(OpDef(
    name="broadcast_like",
    params={"lhs_axes": Param("optional_shape", None), "rhs_axes": Param("optional_shape", None)},
    arguments=lambda attrs: ["lhs", "rhs"],
    infer_shape=_infer("broadcast_like", _like_out, ["lhs", "rhs"]),
    forward=_forward(_like_out),
    gradient=_gradient,
    # rhs supplies a shape only, but TDL cannot say so: it is listed, unread, hence replicated.
    tdl=_tdl(["lhs", "rhs"]),
    doc="Broadcast lhs to the shape of rhs (or of rhs's rhs_axes at lhs's lhs_axes).",
))
