"""Transposed convolution (MXNet Deconvolution, ONNX ConvTranspose; NCW / NCHW / NCDHW).

A Deconvolution is the data gradient of the Convolution that maps its output back to its
input: out[n, c, i...] = sum(ci, k...) data[n, ci, o...] * weight[ci, c, k...] over the
o with s*o + d*k - pad = i, plus bias[c]. The weight has shape (Cin, num_filter / num_group,
k...). Output size per spatial dim: s*(in - 1) + d*(k - 1) + 1 - 2*pad + adj. ``adj`` may be
negative or reach the stride: ONNX's asymmetric pads and output_padding become pad = the
pad before and adj = pad_begin - pad_end + output_padding (the output only depends on where
it starts and how long it is).

Kernels reuse Convolution's (ops/conv.py): the forward is conv_backward_data (col2im of
weight . data) under the geometry of that convolution, whose padding after is pad - adj
(``tile_pad`` holds both, as the conv's tile hooks write them). Gradients are the other two
convolution products, ordinary Convolution ops with their own TDL, tiles and kernels:
d data = Convolution(dy, weight) (num_filter = Cin), d weight =
_backward_Convolution_weight(data, dy), d bias = _backward_Convolution_bias(dy).

TDL: ``out[n, c, y, x] = sum(ci, ky, kx) { data[n, ci, (y + p - d*ky) / s, ...] *
weight[ci, c, ky, kx] } + bias[c]`` (floor division; where s does not divide no element is
read, and the interval analysis reads a superset, at most s - 1 rows of extra halo). A
depthwise one (num_group = Cin = num_filter) reads data and weight channel c only; other
grouped ones read all channels (``:``) and veto channel splits, as Convolution does.
"""
from __future__ import annotations

import numpy as np

from ..errors import Error
from .conv import _SPATIAL_VARS, Geometry, _affine, _xp, conv_backward_data
from .registry import OpDef, Param, register

_PARAMS = {
    "kernel": Param("shape", required=True),
    "stride": Param("shape", ()),
    "dilate": Param("shape", ()),
    "pad": Param("shape", ()),
    "adj": Param("shape", ()),
    "num_filter": Param("int", required=True),
    "num_group": Param("int", 1),
    "no_bias": Param("bool", True),
    "workspace": Param("int", 512),
    "cudnn_tune": Param("optional_str", None, choices=(None, "off", "limited_workspace", "fastest")),
    "cudnn_off": Param("bool", False),
    "layout": Param("optional_str", None),
    # Set only by the tile hook: per spatial dim the padding before, then after, of the
    # convolution whose data gradient this tile computes (see the module docstring).
    "tile_pad": Param("shape", ()),
}


def _vec(attrs, name, nd, default):
    value = tuple(attrs.get(name) or ())
    if not value:
        return (default,) * nd
    if len(value) != nd:
        raise Error(f"attribute '{name}'={value} must have {nd} entries like 'kernel'={tuple(attrs['kernel'])}")
    return value


class DeconvGeometry:
    """Validated shapes of one Deconvolution: `conv` is the Geometry of the convolution whose
    data gradient it is (its data is this op's output, its output this op's data)."""

    def __init__(self, attrs, data_shape):
        kernel = tuple(attrs["kernel"])
        nd = len(kernel)
        if nd not in _SPATIAL_VARS:
            raise Error(f"attribute 'kernel'={kernel} must have 1, 2 or 3 dims")
        if len(data_shape) != 2 + nd:
            raise Error(f"data has shape {tuple(data_shape)} but a {nd}-D kernel {kernel} needs {2 + nd}-D data")
        groups, cout = attrs["num_group"], attrs["num_filter"]
        if groups <= 0 or cout <= 0 or cout % groups:
            raise Error(f"attribute 'num_filter'={cout} must be positive and divisible by 'num_group'={groups}")
        cin = int(data_shape[1])
        if cin % groups:
            raise Error(f"data has {cin} channels, not divisible by attribute 'num_group'={groups}")
        stride, dilate = _vec(attrs, "stride", nd, 1), _vec(attrs, "dilate", nd, 1)
        pad, adj = _vec(attrs, "pad", nd, 0), _vec(attrs, "adj", nd, 0)
        if any(v <= 0 for v in stride + dilate + kernel):
            raise Error(f"attributes 'kernel'={kernel}, 'stride'={stride} and 'dilate'={dilate} must be positive")
        tile_pad = tuple(attrs.get("tile_pad") or ()) or pad + tuple(p - a for p, a in zip(pad, adj))
        if len(tile_pad) != 2 * nd:
            raise Error(f"attribute 'tile_pad'={tile_pad} must have {2 * nd} entries")
        ins = tuple(int(v) for v in data_shape[2:])
        spans = [d * (k - 1) + 1 for d, k in zip(dilate, kernel)]
        spatial = tuple((o - 1) * s + span - lo - hi
                        for o, s, span, lo, hi in zip(ins, stride, spans, tile_pad[:nd], tile_pad[nd:]))
        if any(v <= 0 for v in spatial):
            raise Error(f"Deconvolution of data {tuple(data_shape)} with kernel {kernel}, stride {stride}, pad {pad} "
                        f"and adj {adj} has output size {spatial}, which is not positive")
        self.nd, self.groups, self.cin, self.cout = nd, groups, cin, cout
        self.pad, self.stride, self.dilate, self.kernel = pad, stride, dilate, kernel
        self.conv_attrs = {"kernel": kernel, "stride": stride, "dilate": dilate, "pad": pad, "num_filter": cin,
                           "num_group": groups, "layout": attrs.get("layout"), "tile_pad": tile_pad}
        self.conv = None  # a tile whose data region is empty (its rows lie in adj's zeros) has none
        if all(n > 0 for n in ins):
            try:
                self.conv = Geometry(self.conv_attrs, (int(data_shape[0]), cout) + spatial)
            except Error as e:
                raise Error(f"Deconvolution: {e}") from None
        self.out_shape = (int(data_shape[0]), cout) + spatial
        self.weight_shape = (cin, cout // groups) + kernel


def _args(attrs):
    return ["data", "weight"] if attrs["no_bias"] else ["data", "weight", "bias"]


def _infer_shape(attrs, in_shapes):
    if in_shapes[0] is None:
        raise Error("Deconvolution needs the shape of its data input")
    geo = DeconvGeometry(attrs, in_shapes[0])
    want = [tuple(in_shapes[0]), geo.weight_shape] + ([] if attrs["no_bias"] else [(geo.cout,)])
    return want, [geo.out_shape]


def _tile_groups(attrs, x_shape, w_shape):
    """A channel tile of a depthwise deconvolution is depthwise over its own channels (as in
    conv._depthwise_tile); other tiles keep the node's groups. num_filter follows the weight."""
    g = attrs["num_group"]
    if g > 1 and x_shape[1] % g and w_shape[1] == 1 and w_shape[0] == x_shape[1]:
        g = int(x_shape[1])
    return dict(attrs, num_group=g, num_filter=int(w_shape[1]) * g)


def _forward(attrs, inputs, ctx):
    x, w = inputs[0], inputs[1]
    try:
        geo = DeconvGeometry(_tile_groups(attrs, x.shape, w.shape), x.shape)
    except Error as e:
        raise ValueError(str(e)) from None
    if tuple(w.shape) != geo.weight_shape:
        raise ValueError(f"weight has shape {tuple(w.shape)}, expected {geo.weight_shape}")
    xp = _xp(ctx)
    y = conv_backward_data(x, w, geo.conv, xp) if geo.conv is not None else xp.zeros(geo.out_shape, x.dtype)
    if not attrs["no_bias"]:
        y += inputs[2].reshape((1, -1) + (1,) * geo.nd)
    return [y.astype(x.dtype, copy=False)]


# ----------------------------------------------------------------------------- TDL and tiles

def _depthwise(geo: DeconvGeometry) -> bool:
    return geo.groups > 1 and geo.groups == geo.cin == geo.cout


def _tdl(attrs, in_shapes, out_shapes):
    geo = DeconvGeometry(attrs, in_shapes[0])
    ov = _SPATIAL_VARS[geo.nd]
    kv = ["k" + v for v in ov]
    idx = []
    for i in range(geo.nd):
        num = _affine([(1, ov[i]), (-geo.dilate[i], kv[i])], geo.pad[i])
        idx.append(num if geo.stride[i] == 1 else f"({num}) / {geo.stride[i]}")
    bias = "" if attrs["no_bias"] else " + bias[c]"
    head = f"{', '.join(_args(attrs))} -> out: out[{', '.join(['n', 'c'] + ov)}]"
    if _depthwise(geo):
        return (f"{head} = sum({', '.join(kv)}) {{ data[{', '.join(['n', 'c'] + idx)}] * "
                f"weight[{', '.join(['c', '0'] + kv)}] }}{bias}")
    w_c = "c" if geo.groups == 1 else ":"
    return (f"{head} = sum({', '.join(['ci'] + kv)}) {{ data[{', '.join(['n', 'ci'] + idx)}] * "
            f"weight[{', '.join(['ci', w_c] + kv)}] }}{bias}")


def _no_split(attrs, in_shapes, out_shapes):
    """The kernel window's variables (a tile over part of it would need its own kernel) and,
    for a grouped deconvolution that is not depthwise, the channels (a slab would need its
    groups regrouped)."""
    geo = DeconvGeometry(attrs, in_shapes[0])
    grouped = geo.groups > 1 and not _depthwise(geo)
    return ["k" + v for v in _SPATIAL_VARS[geo.nd]] + (["c", "ci"] if grouped else [])


def _tile(attrs, ins, outs, in_shapes, out_shapes):
    """Paddings of a tile whose output covers outs[0] and whose data is the region ins[0]: in
    the column image of that data region the tile's first output row sits at
    out_lo + pad - data_lo*stride; the padding after makes the output length the tile's."""
    (xlo, xhi), (ylo, yhi) = ins[0], outs[0]
    geo = DeconvGeometry(attrs, in_shapes[0])
    lo, hi = [], []
    for i in range(geo.nd):
        span = geo.dilate[i] * (geo.kernel[i] - 1) + 1
        n_x, n_y = int(xhi[2 + i] - xlo[2 + i]), int(yhi[2 + i] - ylo[2 + i])
        lo.append(int(ylo[2 + i]) + geo.pad[i] - int(xlo[2 + i]) * geo.stride[i])
        hi.append((n_x - 1) * geo.stride[i] + span - n_y - lo[-1])
    return {**attrs, "tile_pad": tuple(lo + hi)}


# ----------------------------------------------------------------------------- gradient

def _gradient(ctx):
    dy = ctx.out_grads[0]
    x, w = ctx.inputs[0], ctx.inputs[1]
    geo = DeconvGeometry(ctx.attrs, ctx.in_shapes[0])
    conv = {k: v for k, v in geo.conv_attrs.items() if k != "tile_pad" and v is not None}
    adj = _vec(ctx.attrs, "adj", geo.nd, 0)
    if any(a < 0 or a >= s for a, s in zip(adj, geo.stride)):
        # Convolution's symmetric padding would not give data's length back
        conv["tile_pad"] = geo.conv_attrs["tile_pad"]
    grads = [ctx.op("Convolution", dy, w, no_bias=True, **conv),
             ctx.op("_backward_Convolution_weight", x, dy, **conv)]
    if not ctx.attrs["no_bias"]:
        grads.append(ctx.op("_backward_Convolution_bias", dy, kernel=geo.kernel, num_filter=geo.cout))
    return grads


register(OpDef(
    name="Deconvolution",
    params=_PARAMS,
    arguments=_args,
    infer_shape=_infer_shape,
    forward=_forward,
    gradient=_gradient,
    tdl=_tdl,
    extra={"tile_attrs": _tile, "no_split": _no_split},
    doc="N-D transposed convolution (MXNet Deconvolution, ONNX ConvTranspose) with groups and output padding.",
))
