"""Convolution (MXNet 1.x semantics, NCW / NCHW / NCDHW) and its backward ops.

out[n, co, o...] = sum(ci, k...) data[n, g*Cin_g + ci, s*o + d*k - p] * weight[co, ci, k...] + bias[co]
with g = co / Cout_g the group of output channel co.

Kernels: im2col as a strided view (ops/im2col.py) contracted with the weights by one
tensordot (BLAS GEMM) per group and batch chunk; backward data scatters the columns back
(col2im), backward weight contracts dy with the same columns.

Backward ops (each a registered op with kernel and TDL):
- ``_backward_Convolution_data(dy, weight, data)`` -> dx; `data` only donates its shape (a
  strided conv may drop trailing rows, so dy does not determine it): the TDL never reads it.
  With the attribute ``data_spatial`` given instead, the op takes (dy, weight) only.
- ``_backward_Convolution_weight(dy, data)`` -> dweight.
- ``_backward_Convolution_bias(dy)`` -> dbias.

TDL and the strategies it allows:
- num_group == 1: exact (n, co, spatial dims as output splits; ci and the kernel dims as
  reductions). Spatial splits read halos; out-of-range indices are the zero padding.
- num_group > 1 with one input channel per group (depthwise, channel multiplier M):
  the data channel is written ``co / M``, which is exact, so n, co and spatial splits read
  exactly the data they need.
- other grouped convolutions: the data channel index is ``:`` (all channels), a superset.
  Splits of n and spatial dims are exact; a co split (or a ci reduction split) reads all
  data channels, and its tile is NOT a plain Convolution of the tiles: it would need
  num_group scaled down and data sliced to the slab's groups (no tile_attrs hook does that yet).

The depthwise data gradient (multiplier 1) is exact too: dx channel c reads dy and weight
channel c, so its channel splits are output splits (never a reduction over co).

Tiles: the tile hooks set num_filter (and num_group = the tile's channels for a depthwise
tile) and the tile padding; kernels also take num_filter from their inputs (weight rows, dy
channels) and run a depthwise slab whose channel count num_group does not divide as
depthwise over its channels, so a slab runs with the node's attributes too.
- backward data: dy is indexed ``(i + p - d*k) / s`` (floor division). Where s does not
  divide i + p - d*k no dy element is read; the interval analysis over-approximates that
  set, which is a superset of the true region (correct, at most s-1 rows of extra halo).
"""
from __future__ import annotations

from typing import List, Sequence

import numpy as np

from ..errors import Error
from . import im2col
from ._tiles import adds_bias
from .registry import OpDef, Param, register

_LAYOUTS = {1: "NCW", 2: "NCHW", 3: "NCDHW"}
_SPATIAL_VARS = {1: ["x"], 2: ["y", "x"], 3: ["z", "y", "x"]}

_PARAMS = {
    "kernel": Param("shape", required=True),
    "stride": Param("shape", ()),
    "dilate": Param("shape", ()),
    "pad": Param("shape", ()),
    "num_filter": Param("int", required=True),
    "num_group": Param("int", 1),
    "workspace": Param("int", 1024),
    "no_bias": Param("bool", False),
    "cudnn_tune": Param("optional_str", None, choices=(None, "off", "limited_workspace", "fastest")),
    "cudnn_off": Param("bool", False),
    "layout": Param("optional_str", None),
    # Set only by tile hooks: per spatial dim the padding before, then after, of a tile whose
    # input region is a slab (halo) of the whole input; negative values crop.
    "tile_pad": Param("shape", ()),
    # Set only by the tile hook: False on a tile holding an input-channel slab other than the
    # first (its partial output sums with the others', which add the bias once).
    "tile_bias": Param("bool", True),
}


class Geometry:
    """Validated shape parameters of one convolution."""

    def __init__(self, attrs, data_shape: Sequence[int], spatial: Sequence[int] = None):
        kernel = tuple(attrs["kernel"])
        nd = len(kernel)
        if nd not in _LAYOUTS:
            raise Error(f"attribute 'kernel'={kernel} must have 1, 2 or 3 dims")
        layout = attrs.get("layout")
        if layout is not None and layout != _LAYOUTS[nd]:
            raise Error(f"attribute 'layout'={layout!r} is not supported for a {nd}-D kernel "
                        f"(only {_LAYOUTS[nd]}; channels-last layouts are not implemented)")
        self.nd = nd
        self.kernel = kernel
        self.stride = self._vec(attrs, "stride", 1)
        self.dilate = self._vec(attrs, "dilate", 1)
        self.pad = self._vec(attrs, "pad", 0)
        if any(k <= 0 for k in kernel):
            raise Error(f"attribute 'kernel'={kernel} must be positive")
        if any(v <= 0 for v in self.stride + self.dilate):
            raise Error(f"attributes 'stride'={self.stride} and 'dilate'={self.dilate} must be positive")
        if any(v < 0 for v in self.pad):
            raise Error(f"attribute 'pad'={self.pad} must be non-negative")
        self.groups = attrs["num_group"]
        self.cout = attrs["num_filter"]
        if self.groups <= 0 or self.cout <= 0:
            raise Error(f"attributes 'num_filter'={self.cout} and 'num_group'={self.groups} must be positive")
        if self.cout % self.groups:
            raise Error(f"attribute 'num_filter'={self.cout} is not divisible by 'num_group'={self.groups}")
        if len(data_shape) != 2 + nd:
            raise Error(f"data has shape {tuple(data_shape)} but a {nd}-D kernel {kernel} needs "
                        f"{2 + nd}-D data ({_LAYOUTS[nd]})")
        self.batch, self.cin = int(data_shape[0]), int(data_shape[1])
        if self.cin % self.groups:
            raise Error(f"data has {self.cin} channels, not divisible by attribute 'num_group'={self.groups}")
        self.cin_g = self.cin // self.groups
        self.cout_g = self.cout // self.groups
        self.spatial = tuple(int(v) for v in (spatial if spatial is not None else data_shape[2:]))
        tile_pad = tuple(attrs.get("tile_pad") or ())
        if tile_pad and len(tile_pad) != 2 * nd:
            raise Error(f"attribute 'tile_pad'={tile_pad} must have {2 * nd} entries")
        self.pad_lo = tile_pad[:nd] if tile_pad else self.pad
        self.pad_hi = tile_pad[nd:] if tile_pad else self.pad
        for i in range(nd):
            span = self.dilate[i] * (kernel[i] - 1) + 1
            if span > self.spatial[i] + self.pad_lo[i] + self.pad_hi[i]:
                raise Error(f"attribute 'kernel'={kernel} (dilated extent {span} in dim {i}) is larger than "
                            f"the padded input ({self.spatial[i]} + 2*{self.pad[i]}) of data shape {tuple(data_shape)}")
        self.out = tuple((self.spatial[i] + self.pad_lo[i] + self.pad_hi[i] - self.dilate[i] * (kernel[i] - 1) - 1)
                         // self.stride[i] + 1 for i in range(nd))

    def _vec(self, attrs, name, default):
        value = tuple(attrs.get(name) or ())
        if not value:
            return (default,) * self.nd
        if len(value) != self.nd:
            raise Error(f"attribute '{name}'={value} must have {self.nd} entries like 'kernel'={self.kernel}")
        return value

    @property
    def weight_shape(self):
        return (self.cout, self.cin_g) + self.kernel

    @property
    def out_shape(self):
        return (self.batch, self.cout) + self.out


def _kernel_geometry(attrs, data_shape, spatial=None) -> Geometry:
    """Geometry for a kernel: a bad shape becomes ValueError so the executor names the node."""
    try:
        return Geometry(attrs, data_shape, spatial)
    except Error as e:
        raise ValueError(str(e)) from None


def _args(attrs):
    return ["data", "weight"] if attrs["no_bias"] else ["data", "weight", "bias"]


def _infer_shape(attrs, in_shapes):
    data = in_shapes[0]
    if data is None:
        raise Error("Convolution needs the shape of its data input")
    geo = Geometry(attrs, data)
    want = [tuple(data), geo.weight_shape] + ([] if attrs["no_bias"] else [(geo.cout,)])
    return want, [geo.out_shape]


# ----------------------------------------------------------------------------- kernels

def _xp(ctx):
    """The kernels' array module: numpy, or cupy when the GPU runtime runs them on device tiles."""
    return ctx.xp if ctx is not None and getattr(ctx, "xp", None) is not None else np


def conv_forward(x, w, geo: Geometry, xp=np):
    """Grouped N-D convolution of x (N, C, *S) with w (Cout, Cin_g, *K), no bias (im2col +
    GEMM: cuBLAS under CuPy)."""
    nd, g_in, g_out = geo.nd, geo.cin_g, geo.cout_g
    xpad = im2col.pad_or_crop(x, geo.pad_lo, geo.pad_hi, xp=xp)
    out = xp.empty((x.shape[0], geo.cout) + geo.out, dtype=np.result_type(x.dtype, w.dtype))
    red = tuple(range(1, 2 + nd))  # (ci, k...) in both the weights and the window view
    per_item = g_in * int(np.prod(geo.kernel)) * int(np.prod(geo.out))
    for chunk in im2col.batch_chunks(x.shape[0], per_item):
        cols = im2col.windows(xpad[chunk], geo.kernel, geo.stride, geo.dilate, geo.out, xp=xp)
        for g in range(geo.groups):
            wg = w[g * g_out:(g + 1) * g_out]
            yg = xp.tensordot(wg, cols[:, g * g_in:(g + 1) * g_in], axes=(red, red))  # (Cout_g, n, *O)
            out[chunk, g * g_out:(g + 1) * g_out] = xp.moveaxis(yg, 0, 1)
    return out


def conv_backward_data(dy, w, geo: Geometry, xp=np):
    """d data of the convolution: columns w^T . dy scattered back onto the input (col2im)."""
    nd, g_in, g_out = geo.nd, geo.cin_g, geo.cout_g
    # col2im writes (O-1)*s + span positions; the padded input may be shorter (a tile whose
    # padding after is negative): allocate what is written, then keep [pad_lo, pad_lo + S).
    padded = tuple(max(s + lo + hi, (o - 1) * st + d * (k - 1) + 1)
                   for s, lo, hi, o, st, d, k in zip(geo.spatial, geo.pad_lo, geo.pad_hi, geo.out, geo.stride,
                                                     geo.dilate, geo.kernel))
    dxpad = xp.zeros((dy.shape[0], geo.cin) + padded, dtype=np.result_type(dy.dtype, w.dtype))
    for g in range(geo.groups):
        wg = w[g * g_out:(g + 1) * g_out]
        cols = xp.tensordot(wg, dy[:, g * g_out:(g + 1) * g_out], axes=([0], [1]))  # (Cin_g, *K, N, *O)
        cols = xp.moveaxis(cols, 1 + nd, 0)  # (N, Cin_g, *K, *O)
        im2col.col2im_add(dxpad[:, g * g_in:(g + 1) * g_in], cols, geo.kernel, geo.stride, geo.dilate)
    # a negative pad before means the tile starts before the region written: zeros there
    return xp.ascontiguousarray(im2col.pad_or_crop(dxpad, [-v for v in geo.pad_lo],
                                                   [s - p + v for s, p, v in zip(geo.spatial, padded, geo.pad_lo)],
                                                   xp=xp))


def conv_backward_weight(dy, x, geo: Geometry, xp=np):
    """d weight of the convolution: dy contracted with the input windows over n and o."""
    nd, g_in, g_out = geo.nd, geo.cin_g, geo.cout_g
    xpad = im2col.pad_or_crop(x, geo.pad_lo, geo.pad_hi, xp=xp)
    dw = xp.zeros(geo.weight_shape, dtype=np.result_type(dy.dtype, x.dtype))
    dy_axes = (0,) + tuple(range(2, 2 + nd))
    col_axes = (0,) + tuple(range(2 + nd, 2 + 2 * nd))
    per_item = g_in * int(np.prod(geo.kernel)) * int(np.prod(geo.out))
    for chunk in im2col.batch_chunks(x.shape[0], per_item):
        cols = im2col.windows(xpad[chunk], geo.kernel, geo.stride, geo.dilate, geo.out, xp=xp)
        for g in range(geo.groups):
            dw[g * g_out:(g + 1) * g_out] += xp.tensordot(
                dy[chunk, g * g_out:(g + 1) * g_out], cols[:, g * g_in:(g + 1) * g_in], axes=(dy_axes, col_axes))
    return dw


def _from_inputs(attrs, cout):
    """Kernels take num_filter from their inputs, so a tile (sub-operator) of a channel split runs
    with the node's attributes; num_group is never guessed (see the module docstring)."""
    return dict(attrs, num_filter=int(cout))


def _depthwise_tile(attrs, channels, w_shape):
    """A channel tile of a depthwise conv (one input channel per group, multiplier 1) is itself
    depthwise with num_group = its channel count; other groupings keep the node's num_group."""
    g = attrs["num_group"]
    if g > 1 and channels % g and w_shape[1] == 1 and w_shape[0] == channels:  # the node's grouping cannot apply
        return dict(attrs, num_group=int(channels))
    return attrs


def _forward(attrs, inputs, ctx):
    x, w = inputs[0], inputs[1]
    geo = _kernel_geometry(_from_inputs(_depthwise_tile(attrs, x.shape[1], w.shape), w.shape[0]), x.shape)
    if tuple(w.shape) != geo.weight_shape:
        raise ValueError(f"weight has shape {tuple(w.shape)}, expected {geo.weight_shape}")
    y = conv_forward(x, w, geo, _xp(ctx))
    if adds_bias(attrs):
        y += inputs[2].reshape((1, -1) + (1,) * geo.nd)
    return [y.astype(x.dtype, copy=False)]


# ----------------------------------------------------------------------------- gradient

_GEOMETRY_ATTRS = ("kernel", "stride", "dilate", "pad", "num_filter", "num_group", "layout")


def _gradient(ctx):
    dy = ctx.out_grads[0]
    x, w = ctx.inputs[0], ctx.inputs[1]
    common = {k: ctx.attrs[k] for k in _GEOMETRY_ATTRS if ctx.attrs.get(k) not in (None, ())}
    grads = [ctx.op("_backward_Convolution_data", dy, w, x, **common),  # x: shape donor
             ctx.op("_backward_Convolution_weight", dy, x, **common)]
    if not ctx.attrs["no_bias"]:
        grads.append(ctx.op("_backward_Convolution_bias", dy, **common))
    return grads


# ----------------------------------------------------------------------------- TDL

def _affine(terms, const=0) -> str:
    """'2*y + ky - 1' from [(2, 'y'), (1, 'ky')] and -1; coefficients 0 are dropped."""
    parts = []
    for coef, var in terms:
        if coef == 0:
            continue
        mag = abs(coef)
        text = var if mag == 1 else f"{mag}*{var}"
        parts.append(("- " if coef < 0 else "+ ") + text)
    if const:
        parts.append(("- " if const < 0 else "+ ") + str(abs(const)))
    if not parts:
        return "0"
    first = parts[0]
    text = (first[2:] if first.startswith("+ ") else "-" + first[2:]) + "".join(" " + p for p in parts[1:])
    return text


def _names(nd):
    out = _SPATIAL_VARS[nd]
    return out, ["k" + v for v in out]


def _window_index(geo: Geometry, out_vars, k_vars) -> List[str]:
    """Input index of each spatial dim: s*o + d*k - p."""
    return [_affine([(geo.stride[i], out_vars[i]), (geo.dilate[i], k_vars[i])], -geo.pad[i]) for i in range(geo.nd)]


def _data_channel(geo: Geometry) -> str:
    """data's channel index in terms of co and ci (see the module docstring)."""
    if geo.groups == 1:
        return "ci"
    if geo.cin_g == 1:
        return "co" if geo.cout_g == 1 else f"co / {geo.cout_g}"
    return ":"


def _tdl(attrs, in_shapes, out_shapes):
    """The bias is added inside the sum where every reduced variable is 0 (the same value as
    after it), so the sum stays the top-level reduction and ci a strategy: a tile holding
    another input-channel slab adds no bias (adds_bias), as FullyConnected's."""
    geo = Geometry(attrs, in_shapes[0])
    ov, kv = _names(geo.nd)
    data_idx = ["n", _data_channel(geo)] + _window_index(geo, ov, kv)
    first = "" if attrs["no_bias"] else f" + ({' + '.join(['ci'] + kv)} == 0) * bias[co]"
    return (f"{', '.join(_args(attrs))} -> out: out[{', '.join(['n', 'co'] + ov)}] = "
            f"sum({', '.join(['ci'] + kv)}) {{ data[{', '.join(data_idx)}] * "
            f"weight[{', '.join(['co', 'ci'] + kv)}]{first} }}")



def _depthwise(groups, cin, cout) -> bool:
    """One input and one output channel per group: channel slabs are depthwise convs."""
    return groups > 1 and groups == cin == cout


def _channel_tile(attrs, data_box, out_box, data_shape, out_shape):
    """Filters and groups of a tile whose data channels are data_box's and output (or dy)
    channels out_box's: num_filter is the tile's output channels; a depthwise tile has one
    group per channel. A grouped convolution (not depthwise) split along channels would
    need its groups regrouped: refused (its no_split vetoes such plans)."""
    groups = attrs["num_group"]
    (ilo, ihi), (olo, ohi) = data_box, out_box
    channels_split = (ihi[1] - ilo[1], ohi[1] - olo[1]) != (data_shape[1], out_shape[1])
    depthwise = _depthwise(groups, data_shape[1], out_shape[1])
    if groups > 1 and channels_split and not depthwise:
        raise Error(f"grouped convolution (num_group={groups}) split along channels: the sub-operator "
                    "would need its groups regrouped; plan this node with splits of other dims")
    local = int(ohi[1] - olo[1])
    return {**attrs, "num_filter": local, **({"num_group": local} if depthwise else {})}


def _tile(attrs, ins, outs, in_shapes, out_shapes):
    """A tile's convolution has as many filters as the tile's output channels (_channel_tile)
    and pads its data slab as the tile_pad its halo leaves."""
    attrs = _channel_tile(attrs, ins[0], outs[0], in_shapes[0], out_shapes[0])
    if not attrs["no_bias"]:  # weight[co, ci, k...]: a ci slab past the first adds no bias
        attrs = {**attrs, "tile_bias": ins[1][0][1] == 0}
    return _with_tile_pad(attrs, ins[0], outs[0], in_shapes[0], out_shapes[0])


def _with_tile_pad(attrs, data_box, out_box, data_shape, out_shape):
    """Paddings of a tile whose output covers out_box and whose input is data_box (a halo
    region clipped to the tensor): inside the tensor the halo replaces the padding."""
    (dlo, dhi), (olo, ohi) = data_box, out_box
    nd = len(data_shape) - 2
    if all((dlo[2 + i], dhi[2 + i], olo[2 + i], ohi[2 + i]) == (0, data_shape[2 + i], 0, out_shape[2 + i])
           for i in range(nd)):
        return attrs  # the whole spatial extent: the node's own padding
    kernel = tuple(attrs["kernel"])
    stride = tuple(attrs.get("stride") or ()) or (1,) * nd
    dilate = tuple(attrs.get("dilate") or ()) or (1,) * nd
    pad = tuple(attrs.get("pad") or ()) or (0,) * nd
    lo, hi = [], []
    for i in range(nd):
        span = dilate[i] * (kernel[i] - 1) + 1
        first = olo[2 + i] * stride[i] - pad[i]  # input index of the tile's first window
        n_out, n_in = ohi[2 + i] - olo[2 + i], dhi[2 + i] - dlo[2 + i]
        lo.append(dlo[2 + i] - first)
        hi.append((n_out - 1) * stride[i] + span - n_in - lo[-1])
    return {**attrs, "tile_pad": tuple(lo + hi)}


def _unsplittable(attrs, data_shape, out_channels):
    """Variables no tile of a convolution (or its gradients) may be split along: the kernel
    window's (ky, kx...: a tile over part of the window would need its own kernel size and a
    shifted padding, which the tile hooks do not compute; a 3-way split of a 3x3 window made
    the data gradient index past its one-row weight tile), and the channels of a grouped one."""
    nd = len(data_shape) - 2
    return ["k" + v for v in _SPATIAL_VARS.get(nd, [])] + _grouped_channels(attrs, data_shape, out_channels)


def _grouped_channels(attrs, data_shape, out_channels):
    """Channel variables a grouped (not depthwise) convolution's kernel cannot run split along:
    a channel slab of it is a convolution with fewer groups over a subset of the data channels,
    which the node's kernel does not compute (OpDef.extra['no_split'], honoured by the search)."""
    groups = attrs["num_group"]
    if groups > 1 and not (groups == data_shape[1] == out_channels):
        return ["co", "ci"]
    return []


def _bwd_weight_tile(attrs, ins, outs, in_shapes, out_shapes):
    """d weight reads dy and data as the forward reads out and data: the same filters,
    groups and paddings."""
    attrs = _channel_tile(attrs, ins[1], ins[0], in_shapes[1], in_shapes[0])
    return _with_tile_pad(attrs, ins[1], ins[0], in_shapes[1], in_shapes[0])


def _bwd_data_tile(attrs, ins, outs, in_shapes, out_shapes):
    """d data of a tile: dx covers outs[0] and dy the region ins[0]. In the column image of
    that dy region, dx's first row sits at a'*1 + pad - lo_dy*stride; the padding after makes
    the geometry's output length equal the dy region's."""
    (ylo, yhi), (xlo, xhi) = ins[0], outs[0]
    full_dy, full_dx = in_shapes[0], out_shapes[0]
    attrs = _channel_tile(attrs, outs[0], ins[0], full_dx, full_dy)
    nd = len(full_dx) - 2
    if all((ylo[2 + i], yhi[2 + i], xlo[2 + i], xhi[2 + i]) == (0, full_dy[2 + i], 0, full_dx[2 + i])
           for i in range(nd)):
        return attrs
    kernel = tuple(attrs["kernel"])
    stride = tuple(attrs.get("stride") or ()) or (1,) * nd
    dilate = tuple(attrs.get("dilate") or ()) or (1,) * nd
    pad = tuple(attrs.get("pad") or ()) or (0,) * nd
    lo, hi = [], []
    for i in range(nd):
        span = dilate[i] * (kernel[i] - 1) + 1
        n_dy, n_dx = yhi[2 + i] - ylo[2 + i], xhi[2 + i] - xlo[2 + i]
        lo.append(xlo[2 + i] + pad[i] - ylo[2 + i] * stride[i])
        hi.append((n_dy - 1) * stride[i] + span - n_dx - lo[-1])
    return {**attrs, "tile_pad": tuple(lo + hi)}


register(OpDef(
    name="Convolution",
    params=_PARAMS,
    arguments=_args,
    infer_shape=_infer_shape,
    forward=_forward,
    gradient=_gradient,
    tdl=_tdl,
    extra={"tile_attrs": _tile, "no_split": lambda a, i, o: _unsplittable(a, i[0], o[0][1])},
    doc="N-D convolution (NCW/NCHW/NCDHW) with stride, dilation, zero padding and groups.",
))


# ----------------------------------------------------------------------------- backward ops

_BWD_PARAMS = {k: _PARAMS[k] for k in ("kernel", "stride", "dilate", "pad", "num_filter", "num_group", "layout",
                                        "tile_pad")}


def _data_shape_from(attrs, dy_shape, w_shape, data_shape=None):
    """Shape of data: the donor input's, else from dy, weight and the data_spatial attribute."""
    if data_shape is not None:
        return tuple(data_shape)
    if dy_shape is None or w_shape is None or not attrs["data_spatial"]:
        raise Error("_backward_Convolution_data needs the shape of data (its third input or 'data_spatial')")
    return (dy_shape[0], w_shape[1] * attrs["num_group"]) + tuple(attrs["data_spatial"])


def _bwd_data_args(attrs):
    return ["dy", "weight"] if attrs.get("data_spatial") else ["dy", "weight", "data"]


def _check_dy(geo: Geometry, dy_shape):
    if dy_shape is not None and tuple(dy_shape) != geo.out_shape:
        raise Error(f"dy has shape {tuple(dy_shape)} but the convolution output has shape {geo.out_shape}")


def _bwd_data_shape(attrs, in_shapes):
    dy, w = in_shapes[0], in_shapes[1]
    donor = in_shapes[2] if len(in_shapes) > 2 else None
    data = _data_shape_from(attrs, dy, w, donor)
    geo = Geometry(attrs, data)
    _check_dy(geo, dy)
    return [geo.out_shape, geo.weight_shape] + [data] * (len(in_shapes) - 2), [data]


def _bwd_data_forward(attrs, inputs, ctx):
    dy, w = inputs[0], inputs[1]
    donor = inputs[2].shape if len(inputs) > 2 else None
    attrs = _from_inputs(attrs, w.shape[0])
    if donor is not None:
        attrs = _depthwise_tile(attrs, donor[1], w.shape)
    geo = _kernel_geometry(attrs, _data_shape_from(attrs, dy.shape, w.shape, donor))
    return [conv_backward_data(dy, w, geo, _xp(ctx)).astype(dy.dtype, copy=False)]


def _bwd_data_tdl(attrs, in_shapes, out_shapes):
    geo = Geometry(attrs, out_shapes[0])
    iv = ["i" + v for v in _SPATIAL_VARS[geo.nd]]
    _, kv = _names(geo.nd)
    dy_idx = []
    for i in range(geo.nd):
        num = _affine([(1, iv[i]), (-geo.dilate[i], kv[i])], geo.pad[i])
        dy_idx.append(num if geo.stride[i] == 1 else f"({num}) / {geo.stride[i]}")
    head = f"{', '.join(_bwd_data_args(attrs))} -> dx: dx[{', '.join(['n', 'ci'] + iv)}]"
    if _depthwise(geo.groups, geo.cin, geo.cout):
        # dx channel c reads dy and weight channel c only: exact, so a channel split is a
        # depthwise conv of the slab (a co reduction split would leave each tile a
        # grouping of all channels with part of the filters, which no kernel runs)
        return (f"{head} = sum({', '.join(kv)}) "
                f"{{ dy[{', '.join(['n', 'ci'] + dy_idx)}] * weight[{', '.join(['ci', '0'] + kv)}] }}")
    w_ci = "ci" if geo.groups == 1 else ":"
    return (f"{head} = sum({', '.join(['co'] + kv)}) "
            f"{{ dy[{', '.join(['n', 'co'] + dy_idx)}] * weight[{', '.join(['co', w_ci] + kv)}] }}")


register(OpDef(
    name="_backward_Convolution_data",
    params=dict(_BWD_PARAMS, data_spatial=Param("shape", ())),
    arguments=_bwd_data_args,
    infer_shape=_bwd_data_shape,
    forward=_bwd_data_forward,
    tdl=_bwd_data_tdl,
    extra={"tile_attrs": _bwd_data_tile, "no_split": lambda a, i, o: _unsplittable(a, o[0], i[0][1])},
    doc="Gradient of Convolution with respect to data (col2im of weight^T . dy).",
))


def _bwd_weight_shape(attrs, in_shapes):
    dy, x = in_shapes
    if x is None:
        raise Error("_backward_Convolution_weight needs the shape of data")
    geo = Geometry(attrs, x)
    _check_dy(geo, dy)
    return [geo.out_shape, tuple(x)], [geo.weight_shape]


def _bwd_weight_forward(attrs, inputs, ctx):
    dy, x = inputs
    attrs = _from_inputs(attrs, dy.shape[1])
    attrs = _depthwise_tile(attrs, x.shape[1], (dy.shape[1], 1))
    geo = _kernel_geometry(attrs, x.shape)
    return [conv_backward_weight(dy, x, geo, _xp(ctx)).astype(dy.dtype, copy=False)]


def _bwd_weight_tdl(attrs, in_shapes, out_shapes):
    geo = Geometry(attrs, in_shapes[1])
    ov, kv = _names(geo.nd)
    data_idx = ["n", _data_channel(geo)] + _window_index(geo, ov, kv)
    return (f"dy, data -> dw: dw[{', '.join(['co', 'ci'] + kv)}] = sum({', '.join(['n'] + ov)}) "
            f"{{ dy[{', '.join(['n', 'co'] + ov)}] * data[{', '.join(data_idx)}] }}")


register(OpDef(
    name="_backward_Convolution_weight",
    params=_BWD_PARAMS,
    arguments=lambda attrs: ["dy", "data"],
    infer_shape=_bwd_weight_shape,
    forward=_bwd_weight_forward,
    tdl=_bwd_weight_tdl,
    extra={"tile_attrs": _bwd_weight_tile, "no_split": lambda a, i, o: _unsplittable(a, i[1], i[0][1])},
    doc="Gradient of Convolution with respect to weight (dy contracted with im2col(data)).",
))


def _bwd_bias_shape(attrs, in_shapes):
    dy = in_shapes[0]
    if dy is None:
        raise Error("_backward_Convolution_bias needs the shape of dy")
    if len(dy) < 3 or dy[1] != attrs["num_filter"]:
        raise Error(f"dy has shape {tuple(dy)}, expected (N, num_filter={attrs['num_filter']}, ...)")
    return [tuple(dy)], [(attrs["num_filter"],)]


def _bwd_bias_tdl(attrs, in_shapes, out_shapes):
    ov = _SPATIAL_VARS[len(in_shapes[0]) - 2]
    return f"dy -> db: db[co] = sum({', '.join(['n'] + ov)}) {{ dy[{', '.join(['n', 'co'] + ov)}] }}"


register(OpDef(
    name="_backward_Convolution_bias",
    params=_BWD_PARAMS,
    arguments=lambda attrs: ["dy"],
    infer_shape=_bwd_bias_shape,
    forward=lambda attrs, ins, ctx: [ins[0].sum(axis=(0,) + tuple(range(2, ins[0].ndim))).astype(ins[0].dtype, copy=False)],
    tdl=_bwd_bias_tdl,
    doc="Gradient of Convolution with respect to bias (dy summed over all but channels).",
))
