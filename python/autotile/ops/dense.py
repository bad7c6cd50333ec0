"""FullyConnected and its backward ops (MXNet semantics: out = data . weight^T + bias)."""
from __future__ import annotations

import numpy as np

from ..errors import Error
from ._tiles import adds_bias
from .registry import OpDef, Param, out_array, register


def _args(attrs):
    return ["data", "weight"] if attrs["no_bias"] else ["data", "weight", "bias"]


def _flat_k(attrs, data_shape):
    if attrs["flatten"]:
        return int(np.prod(data_shape[1:])) if len(data_shape) > 1 else 1
    return data_shape[-1]


def _out_shape(attrs, data_shape):
    if attrs["flatten"]:
        return (data_shape[0], attrs["num_hidden"])
    return tuple(data_shape[:-1]) + (attrs["num_hidden"],)


def _infer_shape(attrs, in_shapes):
    data = in_shapes[0]
    if data is None:
        raise Error("FullyConnected needs the shape of its data input")
    k = _flat_k(attrs, data)
    want = [tuple(data), (attrs["num_hidden"], k)] + ([] if attrs["no_bias"] else [(attrs["num_hidden"],)])
    return want, [_out_shape(attrs, data)]


def _as2d(attrs, x):
    k = _flat_k(attrs, x.shape)
    return x.reshape(-1, k)


def _matmul_out(ctx, a, b, shape, rest=()):
    """The runtime's buffer for output 0 of `shape`, viewed as a @ b's 2-D result, when every
    operand has its dtype (a product in one float dtype, as the plain expression computes
    it); `rest` are further operands read after the product is written (the bias)."""
    dtype = a.dtype
    if dtype.kind != "f" or any(x.dtype != dtype for x in (b,) + tuple(rest)):
        return None
    out = out_array(ctx, 0, shape, dtype, reads_after=rest)
    return None if out is None else out.reshape(a.shape[0], b.shape[1])


def _forward(attrs, inputs, ctx):
    x, w = inputs[0], inputs[1]
    bias = (inputs[2],) if adds_bias(attrs) else ()
    x2 = _as2d(attrs, x)
    out = _matmul_out(ctx, x2, w.T, _out_shape(attrs, x.shape), bias)
    if out is not None:  # straight into the runtime's buffer: the same BLAS call, no copy
        np.matmul(x2, w.T, out=out)
        if bias:
            np.add(out, bias[0], out=out)
        return [ctx.out[0]]
    y = x2 @ w.T
    if bias:
        y = y + bias[0]
    return [y.reshape(_out_shape(attrs, x.shape)).astype(x.dtype, copy=False)]


def _data_vars(attrs, data_shape):
    """Index variables of data and the matching affine index into weight's second dim."""
    if attrs["flatten"]:
        rest = list(data_shape[1:])
        vs = [f"k{d}" for d in range(len(rest))] or []
        strides = [int(np.prod(rest[d + 1:])) for d in range(len(rest))]
        wk = " + ".join(f"{s}*{v}" if s != 1 else v for s, v in zip(strides, vs)) or "0"
        return ["n"], vs, wk
    lead = [f"n{d}" for d in range(len(data_shape) - 1)]
    return lead, ["k"], "k"


def _inner_flat_vars(attrs, data_shape):
    """The TDL variables of data's non-leading flattened dims (k1, k2...): vetoed. A slab of
    one of them reads weight columns strided through the whole row (3*k0 + k1), of which
    its region holds the hull; the kernel's matmul needs exactly the columns of its slab."""
    _, red, _ = _data_vars(attrs, data_shape)
    return red[1:] if attrs["flatten"] else []


def _tdl(attrs, in_shapes, out_shapes):
    """The bias is added inside the sum at k == 0 only (the same value as after it), so the
    sum stays the top-level reduction and k a strategy: a tile holding another k slab adds
    no bias (adds_bias), and the partial outputs sum to data . weight^T + bias once."""
    lead, red, wk = _data_vars(attrs, in_shapes[0])
    data_idx = lead + red
    inputs = _args(attrs)
    bias = "" if attrs["no_bias"] else " + bias[o]"
    if red:
        first = "" if attrs["no_bias"] else f" + ({' + '.join(red)} == 0) * bias[o]"
        body = f"sum({', '.join(red)}) {{ data[{', '.join(data_idx)}] * weight[o, {wk}]{first} }}"
    else:
        body = f"data[n] * weight[o, 0]{bias}"
    return f"{', '.join(inputs)} -> out: out[{', '.join(lead + ['o'])}] = {body}"



def _gradient(ctx):
    dy = ctx.out_grads[0]
    x, w = ctx.inputs[0], ctx.inputs[1]
    common = dict(num_hidden=ctx.attrs["num_hidden"], flatten=ctx.attrs["flatten"])
    dx = ctx.op("_backward_FullyConnected_data", dy, w, x, **common)
    dw = ctx.op("_backward_FullyConnected_weight", dy, x, **common)
    grads = [dx, dw]
    if not ctx.attrs["no_bias"]:
        grads.append(ctx.op("_backward_FullyConnected_bias", dy, **common))
    return grads


_PARAMS = {
    "num_hidden": Param("int", required=True),
    "no_bias": Param("bool", False),
    "flatten": Param("bool", True),
    "tile_bias": Param("bool", True),  # set by the tile hook only: False on a k slab other than the first
}

def _fc_tile(attrs, ins, outs, in_shapes, out_shapes):
    """On a tile the output has as many units as the tile's last dim; a tile whose data starts
    past the first element of the contraction (a k slab other than the first) adds no bias."""
    lo, hi = outs[0]
    dlo = ins[0][0]
    first_slab = all(v == 0 for v in (dlo[1:] if attrs["flatten"] else dlo[-1:]))
    return {**attrs, "num_hidden": hi[-1] - lo[-1], "tile_bias": first_slab}


def _fc_backward_tile(attrs, ins, outs, in_shapes, out_shapes):
    lo, hi = ins[0]  # dy
    return {**attrs, "num_hidden": hi[-1] - lo[-1]}


register(OpDef(
    name="FullyConnected",
    params=_PARAMS,
    arguments=_args,
    infer_shape=_infer_shape,
    forward=_forward,
    gradient=_gradient,
    tdl=_tdl,
    extra={"tile_attrs": _fc_tile, "no_split": lambda a, i, o: _inner_flat_vars(a, i[0])},
    doc="out = flatten(data) . weight^T + bias",
))

_BWD_PARAMS = {"num_hidden": Param("int", required=True), "flatten": Param("bool", True)}


# d data = dy . W, reshaped like data (the third input only supplies data's shape).
def _bwd_data_shape(attrs, in_shapes):
    dy, w, x = in_shapes
    return [dy, w, x], [x]


def _bwd_data_forward(attrs, inputs, ctx):
    dy, w, x = inputs
    dy2 = dy.reshape(-1, attrs["num_hidden"])
    out = _matmul_out(ctx, dy2, w, x.shape)
    if out is not None:
        np.matmul(dy2, w, out=out)
        return [ctx.out[0]]
    return [(dy2 @ w).reshape(x.shape).astype(dy.dtype, copy=False)]


def _bwd_data_tdl(attrs, in_shapes, out_shapes):
    lead, red, wk = _data_vars(attrs, in_shapes[2])
    return (f"dy, weight, data -> dx: dx[{', '.join(lead + red)}] = "
            f"sum(o) {{ dy[{', '.join(lead + ['o'])}] * weight[o, {wk}] }}")


register(OpDef(
    name="_backward_FullyConnected_data",
    params=_BWD_PARAMS,
    arguments=lambda a: ["dy", "weight", "data"],
    infer_shape=_bwd_data_shape,
    forward=_bwd_data_forward,
    tdl=_bwd_data_tdl,
    extra={"tile_attrs": _fc_backward_tile, "no_split": lambda a, i, o: _inner_flat_vars(a, i[2])},
))


def _bwd_weight_shape(attrs, in_shapes):
    dy, x = in_shapes
    return [dy, x], [(attrs["num_hidden"], _flat_k(attrs, x))]


def weight_grad_columns(attrs, x2):
    """The columns of flattened data `x2` whose weight gradient a tile computes: all, or on a
    slab of kk inside the whole rows of data's tile, those the tile hook names (tile_cols).
    Every runtime's kernel of _backward_FullyConnected_weight goes through it."""
    if not attrs.get("tile_cols"):
        return x2
    first, count = attrs["tile_cols"]
    return x2[:, first:first + count]


def _bwd_weight_forward(attrs, inputs, ctx):
    dy, x = inputs
    dy2t, x2 = dy.reshape(-1, attrs["num_hidden"]).T, weight_grad_columns(attrs, _as2d(attrs, x))
    out = _matmul_out(ctx, dy2t, x2, (dy2t.shape[0], x2.shape[1]))
    if out is not None:
        np.matmul(dy2t, x2, out=out)
        return [ctx.out[0]]
    return [(dy2t @ x2).astype(dy.dtype, copy=False)]


def _bwd_weight_tdl(attrs, in_shapes, out_shapes):
    lead, _, _ = _data_vars(attrs, in_shapes[1])
    return (f"dy, data -> dw: dw[o, kk] = sum({', '.join(lead)}) "
            f"{{ dy[{', '.join(lead + ['o'])}] * data[{', '.join(lead)}, {_unflatten(attrs, in_shapes[1])}] }}")


def _unflatten(attrs, data_shape):
    """Index expressions of data's non-batch dims in terms of the flattened index kk.
    Only the leading non-batch dim is affine in kk (kk / stride); the others use % and are
    written as ':' (whole dim): a slab of kk reads the whole rows it touches, and the tile
    hook tells the kernel which of their columns are its own."""
    if not attrs["flatten"]:
        return "kk"
    rest = list(data_shape[1:])
    if len(rest) <= 1:
        return "kk"
    stride = int(np.prod(rest[1:]))
    return ", ".join([f"kk / {stride}"] + [":"] * (len(rest) - 1))


def _bwd_weight_tile(attrs, ins, outs, in_shapes, out_shapes):
    """dw's slab of kk may start and end inside a row of data's leading non-batch dim (a
    3-way split of 2 rows of 3): data's tile then holds whole rows, and the kernel keeps
    the columns of its slab (tile_cols = first column in the tile's flattened data, count)."""
    (dlo, _), (olo, ohi) = ins[1], outs[0]
    shape = in_shapes[1]
    if attrs["flatten"] and len(shape) > 1:
        start = dlo[1] * int(np.prod(shape[2:]))
    else:
        start = dlo[-1]
    return {**_fc_backward_tile(attrs, ins, outs, in_shapes, out_shapes),
            "tile_cols": (olo[1] - start, ohi[1] - olo[1])}


register(OpDef(
    name="_backward_FullyConnected_weight",
    params={**_BWD_PARAMS, "tile_cols": Param("shape", ())},  # tile_cols: set by the tile hook only
    arguments=lambda a: ["dy", "data"],
    infer_shape=_bwd_weight_shape,
    forward=_bwd_weight_forward,
    tdl=_bwd_weight_tdl,
    extra={"tile_attrs": _bwd_weight_tile},
))


def _bwd_bias_forward(attrs, inputs, ctx):
    dy = inputs[0]
    dy2 = dy.reshape(-1, attrs["num_hidden"])
    out = out_array(ctx, 0, (dy2.shape[1],), dy.dtype, reads_after=(dy,))
    if out is not None:
        return [np.sum(dy2, axis=0, out=out)]
    return [dy2.sum(axis=0).astype(dy.dtype, copy=False)]


def _bwd_bias_tdl(attrs, in_shapes, out_shapes):
    lead = [f"n{d}" for d in range(len(in_shapes[0]) - 1)]
    return f"dy -> db: db[o] = sum({', '.join(lead)}) {{ dy[{', '.join(lead + ['o'])}] }}"


register(OpDef(
    name="_backward_FullyConnected_bias",
    params=_BWD_PARAMS,
    arguments=lambda a: ["dy"],
    infer_shape=lambda attrs, s: ([s[0]], [(attrs["num_hidden"],)]),
    forward=_bwd_bias_forward,
    tdl=_bwd_bias_tdl,
    extra={"tile_attrs": _fc_backward_tile},
))
