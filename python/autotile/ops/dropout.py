"""Dropout (MXNet 1.x semantics) and `_backward_Dropout`.

Dropout has two outputs, `output` and the hidden `mask` (visible_outputs = 1), as in MXNet.
When active (is_train, or mode='always') each element is kept with probability 1-p and the
mask holds 1/(1-p) where kept and 0 where dropped, so output = data * mask. `axes` shares
one draw along the listed axes (variational dropout); the mask output is still stored at
data's full shape so that it, the output and the backward are element-wise. Inactive
(inference with mode='training', or p == 0): output = data, mask = 1.

Draws come from ctx.rng (a numpy Generator); without one a fixed seed is used, so a kernel
run is reproducible. The backward op `_backward_Dropout(dy, mask)` = dy * mask uses the
mask the forward drew, never a new draw.
"""
from __future__ import annotations

import numpy as np

from ..errors import Error
from .registry import OpDef, Param, register
from .tdl_helpers import access, elementwise, index_vars

_PARAMS = {
    "p": Param("float", 0.5),
    "mode": Param("str", "training", choices=("training", "always")),
    "axes": Param("shape", ()),
    # set by the tile hook: where the tile starts and the whole tensor's shape
    "tile_lo": Param("shape", ()),
    "tile_full": Param("shape", ()),
    "cudnn_off": Param("optional_bool", False),
}


def _axes(attrs, ndim):
    axes = []
    for a in attrs["axes"]:
        if not -ndim <= a < ndim:
            raise Error(f"attribute 'axes'={tuple(attrs['axes'])} is out of range for data of rank {ndim}")
        axes.append(a % ndim)
    return axes


def _check_p(attrs):
    if not 0.0 <= attrs["p"] <= 1.0:
        raise Error(f"attribute 'p'={attrs['p']} must be in [0, 1]")


def _infer_shape(attrs, in_shapes):
    data = in_shapes[0]
    if data is None:
        raise Error("Dropout needs the shape of its data input")
    _check_p(attrs)
    _axes(attrs, len(data))
    return [tuple(data)], [tuple(data), tuple(data)]


def _forward(attrs, inputs, ctx):
    x = inputs[0]
    p = attrs["p"]
    active = (ctx.is_train or attrs["mode"] == "always") and p > 0
    if not active:
        return [x, np.ones_like(x)]
    try:
        _check_p(attrs)
        axes = _axes(attrs, x.ndim)
    except Error as e:  # ValueError: the executor adds the node name
        raise ValueError(str(e)) from None
    draw_shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape))
    if ctx.key is not None:
        # Draws are a function of (node key, global element index): a tile (attributes
        # tile_lo / tile_full from the tile hook) draws the whole tensor's mask and keeps its
        # part, so a partitioned step drops exactly what the single-device step drops.
        full = tuple(attrs["tile_full"]) or x.shape
        lo = tuple(attrs["tile_lo"]) or (0,) * x.ndim
        full_draw = tuple(1 if d in axes else s for d, s in enumerate(full))
        keep = np.random.default_rng(ctx.key).random(full_draw) >= p
        keep = keep[tuple(slice(0, 1) if d in axes else slice(lo[d], lo[d] + x.shape[d]) for d in range(x.ndim))]
    else:
        rng = ctx.rng if ctx.rng is not None else np.random.default_rng(0)
        keep = rng.random(draw_shape) >= p
    scale = 0.0 if p >= 1.0 else 1.0 / (1.0 - p)
    mask = np.broadcast_to((keep * scale).astype(x.dtype), x.shape).copy()
    return [x * mask, mask]


def draw_tile_attrs(attrs, ins, outs, in_shapes, out_shapes):
    """Tile hook of ops drawing random numbers per element: where the tile starts and the
    whole output's shape (tile_lo, tile_full), so a tile draws its part of the whole."""
    (lo, _hi) = outs[0]
    return {**attrs, "tile_lo": tuple(lo), "tile_full": tuple(out_shapes[0])}


def _tdl(attrs, in_shapes, out_shapes):
    v = index_vars(len(in_shapes[0]))
    # the mask is drawn per element; reading data[v] keeps the statement element-wise
    return (f"data -> out, mask: {access('out', v)} = dropout({access('data', v)}); "
            f"{access('mask', v)} = bernoulli({access('data', v)})")


def _gradient(ctx):
    return [ctx.op("_backward_Dropout", ctx.out_grads[0], ctx.outputs[1])]


def _bwd_infer_shape(attrs, in_shapes):
    known = next((s for s in in_shapes if s is not None), None)
    if known is None:
        raise Error("_backward_Dropout needs the shape of dy or mask")
    for name, s in zip(("dy", "mask"), in_shapes):
        if s is not None and tuple(s) != tuple(known):
            raise Error(f"input '{name}' has shape {tuple(s)}, expected {tuple(known)}")
    return [tuple(known), tuple(known)], [tuple(known)]


register(OpDef(
    name="Dropout",
    params=_PARAMS,
    outputs=lambda attrs: ["output", "mask"],
    visible_outputs=lambda attrs: 1,
    infer_shape=_infer_shape,
    forward=_forward,
    gradient=_gradient,
    tdl=_tdl,
    elementwise=True,
    extra={"tile_attrs": draw_tile_attrs},
    doc="Dropout: keeps each element with probability 1-p and scales it by 1/(1-p) (training only).",
))

register(OpDef(
    name="_backward_Dropout",
    params=_PARAMS,
    arguments=lambda attrs: ["dy", "mask"],
    infer_shape=_bwd_infer_shape,
    forward=lambda attrs, ins, ctx: [(ins[0] * ins[1]).astype(ins[0].dtype, copy=False)],
    tdl=lambda attrs, i, o: elementwise(i, o[0], "mul", ["dy", "mask"], output="dx"),
    elementwise=True,
    doc="Gradient of Dropout: dy times the mask the forward pass drew.",
))
