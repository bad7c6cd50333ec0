"""Pooling (max / avg / sum, MXNet 1.x semantics, NCW / NCHW / NCDHW) and `_backward_Pooling`.

MXNet rules matched here (src/operator/nn/pool.h):
- pooling_convention 'valid' floors the number of windows, 'full' ceils it (windows may run
  past the padded input; they are clipped).
- max ignores padding; a window with no input element gives the lowest finite value.
- avg divides by the window clipped to the padded input (count_include_pad, the default) or
  to the input itself (count_include_pad=False).
- global_pool uses the whole spatial extent as the kernel with stride 1 and no padding.
- the gradient of max goes to the first maximum of each window in row-major order.

`_backward_Pooling(dy, data)` -> dx: max pooling reads data (to find each window's argmax);
for avg/sum data only donates its shape (the TDL never reads it). With the attribute
``data_spatial`` given, avg/sum take dy alone.

TDL: n and c splits are exact. The window variables have no tensor dim of their own, so the
analysis ranges them over H - s*(Ho-1) (a valid window's extent): the forward description
uses windowed indices only where that covers the kernel, else reads the n, c slab whole
(':'). The backward reads dy at (i + p) / s for non-overlapping windows, else whole, and max
pooling reads its data slab whole (a window's first maximum needs the whole window). The
pooled value is wrapped in an opaque call, so windows are never top-level reductions.

Tiles: a sub-operator computes some windows (output rows, or dy rows for the backward)
from a slab of data, with the whole op's geometry (see Frame): the tile hooks pass the
whole data's spatial dims and where the tile's windows, data slab and dx rows lie, so a
spatial tile of global or average pooling divides by the whole window's count and a
window wider than the tile's slab runs (the slab's halo is data, not padding).
"""
from __future__ import annotations

import numpy as np

from ..errors import Error
from . import im2col
from .registry import OpDef, Param, register

_LAYOUTS = {1: "NCW", 2: "NCHW", 3: "NCDHW"}
_SPATIAL_VARS = {1: ["x"], 2: ["y", "x"], 3: ["z", "y", "x"]}

_PARAMS = {
    "kernel": Param("shape", ()),
    "pool_type": Param("str", "max", choices=("max", "avg", "sum", "lp")),
    "global_pool": Param("bool", False),
    "cudnn_off": Param("bool", False),
    "pooling_convention": Param("str", "valid", choices=("valid", "full", "same")),
    "stride": Param("shape", ()),
    "pad": Param("shape", ()),
    "p_value": Param("optional_int", None),
    "count_include_pad": Param("optional_bool", None),
    "layout": Param("optional_str", None),
    # Set only by tile hooks (see Frame): the whole data's spatial dims, the tile's windows
    # (lo..., hi...) and where its data slab starts.
    "tile_spatial": Param("shape", ()),
    "tile_windows": Param("shape", ()),
    "tile_data_lo": Param("shape", ()),
}


class Geometry:
    """Validated window parameters of one pooling op for a given data shape."""

    def __init__(self, attrs, data_shape):
        data_shape = tuple(int(d) for d in data_shape)
        if attrs["pool_type"] == "lp":
            raise Error("attribute 'pool_type'='lp' is not supported (max, avg, sum)")
        if attrs["pooling_convention"] == "same":
            raise Error("attribute 'pooling_convention'='same' is not supported (valid, full)")
        nd = len(data_shape) - 2
        if nd not in _LAYOUTS:
            raise Error(f"data has shape {data_shape}; pooling needs 3-D, 4-D or 5-D data (NCW, NCHW, NCDHW)")
        layout = attrs.get("layout")
        if layout is not None and layout != _LAYOUTS[nd]:
            raise Error(f"attribute 'layout'={layout!r} is not supported for {nd + 2}-D data (only {_LAYOUTS[nd]})")
        self.nd = nd
        self.spatial = data_shape[2:]
        self.shape = data_shape
        self.ceil = attrs["pooling_convention"] == "full"
        if attrs["global_pool"]:
            self.kernel, self.stride, self.pad = self.spatial, (1,) * nd, (0,) * nd
        else:
            kernel = tuple(attrs["kernel"])
            if len(kernel) != nd:
                raise Error(f"attribute 'kernel'={kernel} must have {nd} entries for data of shape {data_shape}")
            self.kernel = kernel
            self.stride = self._vec(attrs, "stride", 1)
            self.pad = self._vec(attrs, "pad", 0)
            if any(k <= 0 for k in kernel) or any(s <= 0 for s in self.stride) or any(p < 0 for p in self.pad):
                raise Error(f"attributes 'kernel'={kernel}, 'stride'={self.stride} must be positive and "
                            f"'pad'={self.pad} non-negative")
            for i in range(nd):
                if kernel[i] > self.spatial[i] + 2 * self.pad[i]:
                    raise Error(f"attribute 'kernel'={kernel} is larger than the padded input "
                                f"({self.spatial[i]} + 2*{self.pad[i]} in dim {i}) of data shape {data_shape}")
        self.out = tuple(im2col.out_size(self.spatial[i], self.kernel[i], self.stride[i], 1, self.pad[i], self.ceil)
                         for i in range(nd))

    def _vec(self, attrs, name, default):
        value = tuple(attrs.get(name) or ())
        if not value:
            return (default,) * self.nd
        if len(value) != self.nd:
            raise Error(f"attribute '{name}'={value} must have {self.nd} entries like 'kernel'")
        return value

    @property
    def out_shape(self):
        return self.shape[:2] + self.out

    def counts(self, include_pad: bool) -> np.ndarray:
        """Divisor of avg pooling per output position (shape `out`), MXNet's rule."""
        total = np.ones((), dtype=np.int64)
        for i in range(self.nd):
            start = np.arange(self.out[i]) * self.stride[i] - self.pad[i]
            end = np.minimum(start + self.kernel[i], self.spatial[i] + self.pad[i])
            if not include_pad:
                start, end = np.maximum(start, 0), np.minimum(end, self.spatial[i])
            total = np.multiply.outer(total, np.maximum(end - start, 0))
        return total


def _kernel_geometry(attrs, data_shape) -> Geometry:
    try:
        return Geometry(attrs, data_shape)
    except Error as e:  # ValueError: the executor adds the node name
        raise ValueError(str(e)) from None


def _infer_shape(attrs, in_shapes):
    if in_shapes[0] is None:
        raise Error("Pooling needs the shape of its data input")
    geo = Geometry(attrs, in_shapes[0])
    return [tuple(in_shapes[0])], [geo.out_shape]


def _lowest(dtype):
    return np.finfo(dtype).min if np.issubdtype(dtype, np.floating) else np.iinfo(dtype).min


def _xp(ctx):
    return ctx.xp if ctx is not None and getattr(ctx, "xp", None) is not None else np


class Frame:
    """Where a tile sits in the node's pooling, per spatial dim (tile hooks set it; the
    whole op is the tile of everything): windows (output positions, or dy positions for
    the backward) ``wlo`` .. ``wlo + wn``, the data tile starting at ``dlo`` and the dx tile
    ``xlo`` .. ``xlo + xn``. Window w covers input rows [w*s - p, w*s - p + k) of the whole
    input, so a tile pads or crops its slab to the rows its windows span, ``origin`` ..
    ``origin + span``: the halo of a split inside the tensor is real data, not padding, and
    the divisor of avg pooling is the whole op's."""

    def __init__(self, attrs, geo: Geometry, n_windows=None):
        nd = geo.nd
        win = tuple(attrs.get("tile_windows") or ())
        self.wlo = win[:nd] if win else (0,) * nd
        if n_windows is not None:
            self.wn = tuple(int(v) for v in n_windows)
        else:
            self.wn = tuple(h - l for l, h in zip(win[:nd], win[nd:])) if win else geo.out
        self.dlo = tuple(attrs.get("tile_data_lo") or ()) or (0,) * nd
        dx = tuple(attrs.get("tile_dx") or ())
        self.xlo = dx[:nd] if dx else (0,) * nd
        self.xn = tuple(h - l for l, h in zip(dx[:nd], dx[nd:])) if dx else geo.spatial
        self.origin = tuple(w * s - p for w, s, p in zip(self.wlo, geo.stride, geo.pad))
        self.span = tuple(max(0, (n - 1) * s + k) for n, s, k in zip(self.wn, geo.stride, geo.kernel))
        if any(w < 0 or w + n > o for w, n, o in zip(self.wlo, self.wn, geo.out)):
            raise ValueError(f"tile windows {self.wlo} + {self.wn} lie outside the pooling output {geo.out}")

    def counts(self, geo: Geometry, include_pad: bool) -> np.ndarray:
        """The divisors of avg pooling at this tile's windows (the whole op's rule)."""
        region = tuple(slice(w, w + n) for w, n in zip(self.wlo, self.wn))
        return np.maximum(geo.counts(include_pad)[region], 1)

    def windows(self, x, geo: Geometry, fill, xp=np):
        """(N, C, *kernel, *wn) windows of the data tile x (which starts at dlo)."""
        lo = [d - o for d, o in zip(self.dlo, self.origin)]
        hi = [o + sp - d - n for o, sp, d, n in zip(self.origin, self.span, self.dlo, x.shape[2:])]
        xpad = im2col.pad_or_crop(x, lo, hi, value=fill, xp=xp)
        return im2col.windows(xpad, geo.kernel, geo.stride, (1,) * geo.nd, self.wn, xp=xp)


_DEVICE_DIVISORS: dict = {}


def _divisor(frame: Frame, geo: Geometry, include_pad: bool, dtype, xp=np):
    """Avg pooling's divisors at the frame's windows. On a device (CuPy) an array of the
    data's dtype, built once per geometry and GPU: a float64 upload per call cost a host to
    device copy each time and turned the float32 division into a float64 one."""
    if xp is np:
        return frame.counts(geo, include_pad)
    key = (xp.cuda.Device().id, np.dtype(dtype).str, tuple(geo.shape), geo.kernel, geo.stride, geo.pad,
           frame.wlo, frame.wn, bool(include_pad))
    div = _DEVICE_DIVISORS.get(key)
    if div is None:
        div = _DEVICE_DIVISORS[key] = xp.asarray(frame.counts(geo, include_pad).astype(dtype))
    return div


def _forward(attrs, inputs, ctx):
    x = inputs[0]
    xp = _xp(ctx)
    geo = _kernel_geometry(attrs, tuple(x.shape[:2]) + _whole_spatial(attrs, x.shape[2:]))
    frame = Frame(attrs, geo)
    k_axes = tuple(range(2, 2 + geo.nd))
    if attrs["pool_type"] == "max":
        y = frame.windows(x, geo, _lowest(x.dtype), xp).max(axis=k_axes)
    else:
        y = frame.windows(x, geo, 0, xp).sum(axis=k_axes)
        if attrs["pool_type"] == "avg":
            y = y / _divisor(frame, geo, attrs["count_include_pad"] is not False, y.dtype, xp)
    return [xp.ascontiguousarray(y).astype(x.dtype, copy=False)]


def _whole_spatial(attrs, tile_spatial):
    """The spatial dims of the node's whole data (a tile hook's attribute, else the tile's own)."""
    return tuple(int(v) for v in (attrs.get("tile_spatial") or tile_spatial))


# ----------------------------------------------------------------------------- backward

def pool_backward(attrs, dy, x, geo: Geometry, xp=np):
    """dx of pooling: dy spread over each window (avg/sum) or routed to its first max.
    dy holds the windows of the tile's Frame; dx is the frame's dx tile."""
    nd = geo.nd
    frame = Frame(attrs, geo, dy.shape[2:])
    k_shape = geo.kernel
    if attrs["pool_type"] == "max":
        win = frame.windows(x, geo, _lowest(x.dtype), xp)  # (N, C, *K, *O)
        n_k = int(np.prod(k_shape))
        flat = win.reshape(tuple(win.shape[:2]) + (n_k,) + frame.wn)  # copies; the window order is row-major
        first = flat.argmax(axis=2)  # argmax returns the first maximum
        hot = xp.arange(n_k).reshape((1, 1, n_k) + (1,) * nd) == first[:, :, None]
        cols = (hot * dy[:, :, None]).reshape(win.shape)
    else:
        g = dy
        if attrs["pool_type"] == "avg":
            g = dy / _divisor(frame, geo, attrs["count_include_pad"] is not False, dy.dtype, xp)
        cols = xp.broadcast_to(g.reshape(tuple(g.shape[:2]) + (1,) * nd + frame.wn),
                               tuple(dy.shape[:2]) + k_shape + frame.wn)
    span = xp.zeros(tuple(dy.shape[:2]) + frame.span, dtype=dy.dtype)  # input rows origin .. origin + span
    im2col.col2im_add(span, cols, k_shape, geo.stride, (1,) * nd)
    lo = [o - x0 for o, x0 in zip(frame.origin, frame.xlo)]
    hi = [x0 + n - o - s for x0, n, o, s in zip(frame.xlo, frame.xn, frame.origin, frame.span)]
    return xp.ascontiguousarray(im2col.pad_or_crop(span, lo, hi, xp=xp))


def _gradient(ctx):
    keep = {k: v for k, v in ctx.attrs.items() if k in _PARAMS and v not in (None, ())}
    return [ctx.op("_backward_Pooling", ctx.out_grads[0], ctx.inputs[0], **keep)]


def _bwd_args(attrs):
    return ["dy"] if attrs["pool_type"] != "max" and attrs.get("data_spatial") else ["dy", "data"]


def _bwd_data_shape(attrs, dy_shape):
    if not attrs.get("data_spatial"):
        raise Error("_backward_Pooling needs the shape of data (its data input or 'data_spatial')")
    return tuple(dy_shape[:2]) + tuple(attrs["data_spatial"])


def _bwd_infer_shape(attrs, in_shapes):
    dy = in_shapes[0]
    if len(in_shapes) > 1 and in_shapes[1] is not None:
        data = tuple(in_shapes[1])
    elif dy is None:
        raise Error("_backward_Pooling needs the shape of dy")
    else:
        data = _bwd_data_shape(attrs, dy)
    geo = Geometry(attrs, data)
    if dy is not None and tuple(dy) != geo.out_shape:
        raise Error(f"dy has shape {tuple(dy)} but pooling data of shape {data} gives {geo.out_shape}")
    return [geo.out_shape] + [data] * (len(in_shapes) - 1), [data]


def _bwd_forward(attrs, inputs, ctx):
    dy = inputs[0]
    x = inputs[1] if len(inputs) > 1 else None
    data = x.shape if x is not None else _bwd_data_shape(attrs, dy.shape)
    geo = _kernel_geometry(attrs, tuple(dy.shape[:2]) + _whole_spatial(attrs, data[2:]))
    return [pool_backward(attrs, dy, x, geo, _xp(ctx))]


# ----------------------------------------------------------------------------- TDL

def _term(coef, var, const):
    text = var if coef == 1 else f"{coef}*{var}"
    if const > 0:
        return f"{text} + {const}"
    if const < 0:
        return f"{text} - {-const}"
    return text


def _tdl(attrs, in_shapes, out_shapes):
    geo = Geometry(attrs, in_shapes[0])
    ov = _SPATIAL_VARS[geo.nd]
    fn = {"max": "maxpool", "avg": "avgpool", "sum": "sumpool"}[attrs["pool_type"]]
    head = f"data -> out: out[{', '.join(['n', 'c'] + ov)}]"
    # The analysis gives a window variable k the extent H - s*(Ho-1) (what a valid window
    # fits); only where that covers the kernel is the windowed index a superset.
    if any(geo.spatial[i] - geo.stride[i] * (geo.out[i] - 1) < geo.kernel[i] for i in range(geo.nd)):
        return f"{head} = {fn}(data[n, c, {', '.join([':'] * geo.nd)}])"
    kv = ["k" + v for v in ov]
    idx = [_term(geo.stride[i], ov[i], 0) + f" + {kv[i]}" + (f" - {geo.pad[i]}" if geo.pad[i] else "")
           for i in range(geo.nd)]
    reducer = "max" if attrs["pool_type"] == "max" else "sum"
    return f"{head} = {fn}({reducer}({', '.join(kv)}) {{ data[{', '.join(['n', 'c'] + idx)}] }})"


def _bwd_tdl(attrs, in_shapes, out_shapes):
    geo = Geometry(attrs, out_shapes[0])
    iv = ["i" + v for v in _SPATIAL_VARS[geo.nd]]
    head = f"{', '.join(_bwd_args(attrs))} -> dx: dx[{', '.join(['n', 'c'] + iv)}]"
    # Non-overlapping windows (k <= s): input row i lies in window (i + p) / s only. Overlapping
    # windows have no tensor dim of kernel extent to range over, so dy is read whole (':').
    if all(geo.kernel[i] <= geo.stride[i] for i in range(geo.nd)):
        dy_idx = [_term(1, iv[i], geo.pad[i]) for i in range(geo.nd)]
        dy_idx = [e if geo.stride[i] == 1 else f"({e}) / {geo.stride[i]}" for i, e in enumerate(dy_idx)]
    else:
        dy_idx = [":"] * geo.nd
    if attrs["pool_type"] != "max":
        return f"{head} = dpool(dy[{', '.join(['n', 'c'] + dy_idx)}])"
    # The first maximum of a window needs the whole window of data; data is read whole, and
    # so is dy, so that a tile's kernel sees matching dy and data (it computes every row of
    # dx and keeps its slab).
    whole = ", ".join([":"] * geo.nd)
    return f"{head} = dmaxpool(dy[n, c, {whole}], data[n, c, {whole}])"


def _spatial_box(box):
    lo, hi = box
    return tuple(int(v) for v in lo[2:]), tuple(int(v) for v in hi[2:])


def _whole(box, shape):
    lo, hi = _spatial_box(box)
    return all(l == 0 for l in lo) and hi == tuple(int(v) for v in shape[2:])


def _tile(attrs, ins, outs, in_shapes, out_shapes):
    """A spatial tile pools its windows (the output box) over its data slab: see Frame."""
    if _whole(ins[0], in_shapes[0]) and _whole(outs[0], out_shapes[0]):
        return attrs
    (olo, ohi), (dlo, _) = _spatial_box(outs[0]), _spatial_box(ins[0])
    return {**attrs, "tile_spatial": tuple(in_shapes[0][2:]), "tile_windows": olo + ohi, "tile_data_lo": dlo}


def _bwd_tile(attrs, ins, outs, in_shapes, out_shapes):
    """A spatial tile of dx spreads its dy region's windows (over its data slab, for max)
    and keeps the dx rows of its box: see Frame."""
    boxes = list(ins[:2]) + [outs[0]]
    shapes = list(in_shapes[:2]) + [out_shapes[0]]
    if all(_whole(b, s) for b, s in zip(boxes, shapes)):
        return attrs
    (ylo, yhi), (xlo, xhi) = _spatial_box(ins[0]), _spatial_box(outs[0])
    out = {**attrs, "tile_spatial": tuple(out_shapes[0][2:]), "tile_windows": ylo + yhi, "tile_dx": xlo + xhi}
    if len(ins) > 1:  # max pooling's data slab (avg/sum only take its shape)
        out["tile_data_lo"] = _spatial_box(ins[1])[0]
    return out


register(OpDef(
    name="Pooling",
    params=_PARAMS,
    infer_shape=_infer_shape,
    forward=_forward,
    gradient=_gradient,
    tdl=_tdl,
    extra={"tile_attrs": _tile},
    doc="Max / average / sum pooling over 1-3 spatial dims (MXNet conventions).",
))

register(OpDef(
    name="_backward_Pooling",
    params=dict(_PARAMS, data_spatial=Param("shape", ()), tile_dx=Param("shape", ())),
    arguments=_bwd_args,
    infer_shape=_bwd_infer_shape,
    forward=_bwd_forward,
    tdl=_bwd_tdl,
    extra={"tile_attrs": _bwd_tile},
    doc="Gradient of Pooling: dy spread over windows (avg/sum) or routed to each window's first max.",
))
