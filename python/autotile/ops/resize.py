"""Resize (ONNX Resize, nearest, linear and cubic modes) and its backward op.

resize(data; axes, sizes, scales, mode, coord, nearest_mode) resizes each axis in `axes` to
the matching entry of `sizes` (other axes pass through). Along one axis an output position o
maps to the input coordinate x(o) = (a*o + b) / c with integers a, b, c from the
coordinate_transformation_mode (`coord`) and the axis's scale (an exact fraction, `scales`):

- half_pixel: (o + 1/2) / scale - 1/2;  pytorch_half_pixel: the same, 0 when the axis has
  one output;  asymmetric: o / scale;  align_corners: o * (in - 1) / (scale*in - 1) (0 when
  scale*in is 1).

nearest takes the input row round(x) by `nearest_mode` (round_prefer_floor, round_prefer_ceil,
floor, ceil); linear blends rows floor(x) and floor(x) + 1 by the fraction of x; cubic blends
rows floor(x) - 1 ... floor(x) + 2 by Keys' cubic convolution weights of that fraction with
coefficient `cubic_coeff_a` (ONNX's default -0.75, PyTorch's bicubic). Rows past the ends are
clamped to the edge rows, or, with `exclude_outside`, weigh nothing and the other weights of
the output row are rescaled to sum to one. The arithmetic is exact (integers), so the rows a
kernel reads are exactly those the TDL says.

Every mode is a linear map along each axis: out = data x_axis M with M (out, in) holding one
(nearest), two (linear) or four (cubic) weights per row. The kernel applies M axis by axis (one tensordot
each); the gradient ``_backward_resize(dy)`` applies M^T.

TDL: the forward reads rows floor((A*o + B) / D) (+ 1 for linear, and the neighbour an end
clamp may fall on): ``out[i0, i1, i2, i3] = f(data[i0, i1, (2*i2 - 1) / 4, ...], data[i0, i1,
(2*i2 - 1) / 4 + 1, ...])``, so splits of any axis are exact up to a row of halo. The
backward is a sum over dy's resized axes, ``dx[i...] = sum(r2, r3) { w(i2, i3, r2, r3) *
dy[i0, i1, r2, r3] }``: splitting dx's rows reads all of dy's, splitting dy's rows leaves dx
partial. Tile hooks tell the kernels where their tiles start (tile_in, tile_out) and how
long the output tile is (tile_len).
"""
from __future__ import annotations

from fractions import Fraction
from typing import List, Sequence

import numpy as np

from ..errors import Error
from ._axes import need_shapes
from .conv import _affine
from .registry import OpDef, Param, register
from .tdl_helpers import access, index_vars

MODES = ("nearest", "linear", "cubic")
COORDS = ("half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners")
NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
MAX_SHIFTS = 6  # accesses per resized axis in the TDL (see AxisMap.tdl_indices)

_COMMON = {
    "axes": Param("shape", required=True),
    "sizes": Param("shape", required=True),
    "scales": Param("str", ""),  # one exact fraction per axis ("2,3/2"); empty: sizes / input sizes
    "mode": Param("str", "nearest", choices=MODES),
    "coord": Param("str", "half_pixel", choices=COORDS),
    "nearest_mode": Param("str", "round_prefer_floor", choices=NEAREST),
    "cubic_coeff_a": Param("float", -0.75),
    "exclude_outside": Param("bool", False),
    # tile hooks only: per resized axis where the input and output tiles start, the length of
    # the tile the kernel produces
    "tile_in": Param("shape", ()),
    "tile_out": Param("shape", ()),
    "tile_len": Param("shape", ()),
}


def format_scales(scales: Sequence) -> str:
    """The `scales` attribute text: Fractions as they are, numbers as the exact fractions of the
    shortest decimals that round-trip their float32 values (ONNX scales are float32; 0.6 means
    3/5, as a float32 computation treats it)."""
    return ",".join(str(s if isinstance(s, Fraction) else Fraction(str(np.float32(s)))) for s in scales)


class AxisMap:
    """Input rows and weights of one resized axis of `n_in` rows into `n_out`."""

    def __init__(self, op: str, n_in: int, n_out: int, scale: Fraction, coord: str, mode: str, nearest: str,
                 cubic_a: float = -0.75, exclude_outside: bool = False):
        if n_in <= 0 or n_out <= 0:
            raise Error(f"{op}: cannot resize an axis of {n_in} rows to {n_out}")
        if scale <= 0:
            raise Error(f"{op}: scale {scale} must be positive")
        self.n_in, self.n_out, self.mode = n_in, n_out, mode
        self.cubic_a, self.exclude_outside = float(cubic_a), bool(exclude_outside)
        p, q = scale.numerator, scale.denominator  # scale = p / q
        if coord == "half_pixel" or (coord == "pytorch_half_pixel" and n_out > 1):
            a, b, c = 2 * q, q - p, 2 * p  # ((o + 1/2) q - p/2) / p
        elif coord == "pytorch_half_pixel":
            a, b, c = 0, 0, 1
        elif coord == "asymmetric":
            a, b, c = q, 0, p
        elif coord == "align_corners":
            width = p * n_in - q  # (scale * n_in - 1) * q
            a, b, c = ((n_in - 1) * q, 0, width) if width != 0 else (0, 0, 1)
            if c < 0:
                raise Error(f"{op}: align_corners with scale {scale} of {n_in} rows has a negative width")
        else:
            raise Error(f"{op}: coordinate transformation {coord!r} is not supported (one of {', '.join(COORDS)})")
        self.a, self.b, self.c = a, b, c
        if mode in ("linear", "cubic"):  # the row floor(x)
            self.num, self.den = (a, b), c
        else:  # round(x) by nearest_mode, written floor((A o + B) / D)
            const, m = {"round_prefer_floor": (2 * b + c - 1, 2), "round_prefer_ceil": (2 * b + c, 2),
                        "floor": (b, 1), "ceil": (b + c - 1, 1)}[nearest]
            self.num, self.den = (m * a, const), m * c

    def rows(self, o: np.ndarray) -> np.ndarray:
        """Unclamped first row read by each output position o."""
        return (self.num[0] * o + self.num[1]) // self.den

    def matrix(self, out_begin: int, out_len: int, in_begin: int, in_len: int, dtype, strict: bool):
        """M (out_len, in_len): rows [out_begin, +out_len) of the axis's map restricted to input
        rows [in_begin, +in_len). `strict`: every row read must lie there (a forward tile)."""
        o = np.arange(out_begin, out_begin + out_len, dtype=np.int64)
        first = self.rows(o)
        if self.mode == "nearest":
            taps = [(first, np.ones(out_len))]
        else:
            frac = np.array([float(Fraction(int(self.a * v + self.b), self.c)) for v in o]) - first
            taps = ([(first, 1.0 - frac), (first + 1, frac)] if self.mode == "linear"
                    else [(first + k, w) for k, w in zip(self.TAPS["cubic"], self._cubic_weights(frac))])
            if self.exclude_outside:  # taps past an end weigh nothing; the rest sum to one
                taps = [(rows, np.where((rows >= 0) & (rows < self.n_in), w, 0.0)) for rows, w in taps]
                total = sum(w for _, w in taps)
                taps = [(rows, w / total) for rows, w in taps]
        m = np.zeros((out_len, in_len), dtype=dtype)
        for rows, w in taps:
            local = np.clip(rows, 0, self.n_in - 1) - in_begin
            keep = (local >= 0) & (local < in_len)
            if strict and not keep[w != 0].all():
                raise ValueError(f"resize: the input tile [{in_begin}, {in_begin + in_len}) lacks row "
                                 f"{int(np.clip(rows, 0, self.n_in - 1)[~keep][0])} its output rows read")
            np.add.at(m, (np.nonzero(keep)[0], local[keep]), w[keep].astype(dtype))
        return m

    def tdl_indices(self, var: str) -> List[str]:
        """Affine indices that together read every (clamped) row an output position reads. The
        analysis clips each access to the axis before taking their hull, so a tap that runs j
        rows past an end needs an access shifted back by j, which lands on the edge row the
        clamp reads: shifts t - 1 ... t - j (and t + 1 ... past the start). Past MAX_SHIFTS
        accesses (sizes far from what the scale gives) the axis is read whole."""
        first = self._affine(var)
        rows = self.rows(np.arange(self.n_out))
        shifts = set()
        for t in self.TAPS[self.mode]:
            shifts.add(t)
            shifts.update(t - j for j in range(1, int(rows.max()) + t - (self.n_in - 1) + 1))
            shifts.update(t + j for j in range(1, -(int(rows.min()) + t) + 1))
        if len(shifts) > MAX_SHIFTS:
            return [":"]
        return [_shifted(first, k) for k in sorted(shifts)]

    #: rows read by an output position, relative to its first row
    TAPS = {"nearest": (0,), "linear": (0, 1), "cubic": (-1, 0, 1, 2)}

    def _cubic_weights(self, t: np.ndarray) -> List[np.ndarray]:
        """Keys' cubic convolution weights of rows floor(x) - 1 ... floor(x) + 2 at fraction t
        (the kernel at distances 1 + t, t, 1 - t, 2 - t)."""
        a = self.cubic_a

        def near(d):  # |d| <= 1
            return ((a + 2) * d - (a + 3)) * d * d + 1

        def far(d):  # 1 < |d| < 2
            return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
        return [far(1 + t), near(t), near(1 - t), far(2 - t)]

    def _affine(self, var: str) -> str:
        (a, b), d = self.num, self.den
        if a == 0:
            return str(b // d)
        text = _affine([(a, var)], b)
        return text if d == 1 else f"({text}) / {d}"


def _shifted(index: str, k: int) -> str:
    return index if k == 0 else f"{index} {'+' if k > 0 else '-'} {abs(k)}"


def _scales(op, attrs, in_sizes):
    text = attrs["scales"].strip()
    if not text:
        return [Fraction(o, i) for o, i in zip(attrs["sizes"], in_sizes)]
    try:
        values = [Fraction(v.strip()) for v in text.split(",")]
    except (ValueError, ZeroDivisionError):
        raise Error(f"{op}: attribute 'scales'={text!r} is not a list of fractions") from None
    if len(values) != len(attrs["axes"]):
        raise Error(f"{op}: attribute 'scales'={text!r} needs one entry per axis of {tuple(attrs['axes'])}")
    return values


def axis_maps(op: str, attrs, in_sizes) -> List[AxisMap]:
    """One AxisMap per resized axis, from the full input sizes of those axes."""
    axes, sizes = tuple(attrs["axes"]), tuple(attrs["sizes"])
    if len(axes) != len(sizes) or len(set(axes)) != len(axes):
        raise Error(f"{op}: attributes 'axes'={axes} and 'sizes'={sizes} need one size per distinct axis")
    return [AxisMap(op, int(n), int(m), s, attrs["coord"], attrs["mode"], attrs["nearest_mode"],
                    attrs.get("cubic_coeff_a", -0.75), attrs.get("exclude_outside", False))
            for n, m, s in zip(in_sizes, sizes, _scales(op, attrs, in_sizes))]


def _check_axes(op, attrs, rank):
    bad = [a for a in attrs["axes"] if not 0 <= a < rank]
    if bad:
        raise Error(f"{op}: axis {bad[0]} is out of range for rank {rank}")
    return tuple(attrs["axes"])


def _tile_vec(attrs, name, default):
    return tuple(attrs[name]) if attrs[name] else tuple(default)


def _apply(x, mats, axes, transpose=False):
    """x multiplied along each axis by its matrix (M, or M^T for the gradient)."""
    for m, a in zip(mats, axes):
        x = np.moveaxis(np.tensordot(x, m, axes=([a], [0 if transpose else 1])), -1, a)
    return x


# ----------------------------------------------------------------------------- forward

def _infer(attrs, in_shapes):
    need_shapes("resize", in_shapes, ["data"])
    data = tuple(in_shapes[0])
    axes = _check_axes("resize", attrs, len(data))
    axis_maps("resize", attrs, [data[a] for a in axes])
    out = list(data)
    for a, n in zip(axes, attrs["sizes"]):
        out[a] = int(n)
    return [data], [tuple(out)]


def _forward(attrs, inputs, ctx):
    x = inputs[0]
    axes = _check_axes("resize", attrs, x.ndim)
    full_in = [x.shape[a] for a in axes] if not attrs["tile_in"] else attrs["in_sizes"]
    maps = axis_maps("resize", attrs, full_in)
    in_begin = _tile_vec(attrs, "tile_in", [0] * len(axes))
    out_begin = _tile_vec(attrs, "tile_out", [0] * len(axes))
    out_len = _tile_vec(attrs, "tile_len", attrs["sizes"])
    mats = [m.matrix(ob, ol, ib, x.shape[a], x.dtype, strict=True)
            for m, a, ib, ob, ol in zip(maps, axes, in_begin, out_begin, out_len)]
    return [np.ascontiguousarray(_apply(x, mats, axes)).astype(x.dtype, copy=False)]


def _tdl(attrs, in_shapes, out_shapes):
    data = in_shapes[0]
    axes = _check_axes("resize", attrs, len(data))
    maps = axis_maps("resize", attrs, [data[a] for a in axes])
    ov = index_vars(len(data))
    per_axis = {a: m.tdl_indices(ov[a]) for a, m in zip(axes, maps)}
    n_access = max((len(v) for v in per_axis.values()), default=1)
    reads = []
    for j in range(n_access):
        idx = [per_axis[d][min(j, len(per_axis[d]) - 1)] if d in per_axis else ov[d] for d in range(len(data))]
        reads.append(access("data", idx))
    return f"data -> out: {access('out', ov)} = f({', '.join(reads)})"


def _hook(attrs, ins, outs, in_shapes, out_shapes):
    axes = tuple(attrs["axes"])
    (ilo, _), (olo, ohi) = ins[0], outs[0]
    return {**attrs, "tile_in": tuple(int(ilo[a]) for a in axes), "tile_out": tuple(int(olo[a]) for a in axes),
            "tile_len": tuple(int(ohi[a]) - int(olo[a]) for a in axes),
            "in_sizes": tuple(int(in_shapes[0][a]) for a in axes)}


def _gradient(ctx):
    a = ctx.attrs
    axes = tuple(a["axes"])
    return [ctx.op("_backward_resize", ctx.out_grads[0], axes=axes, sizes=tuple(a["sizes"]),
                   in_sizes=tuple(ctx.in_shapes[0][d] for d in axes), scales=a["scales"], mode=a["mode"],
                   coord=a["coord"], nearest_mode=a["nearest_mode"], cubic_coeff_a=a["cubic_coeff_a"],
                   exclude_outside=a["exclude_outside"])]


register(OpDef(
    name="resize",
    params=dict(_COMMON, in_sizes=Param("shape", ())),  # in_sizes: set by the tile hook only
    infer_shape=_infer,
    forward=_forward,
    gradient=_gradient,
    tdl=_tdl,
    extra={"tile_attrs": _hook},
    doc="Resize axes by nearest, linear or cubic interpolation (ONNX Resize's common coordinate transformations).",
))


# ----------------------------------------------------------------------------- backward

def _bwd_infer(attrs, in_shapes):
    need_shapes("_backward_resize", in_shapes, ["dy"])
    dy = tuple(in_shapes[0])
    axes = _check_axes("_backward_resize", attrs, len(dy))
    if len(attrs["in_sizes"]) != len(axes) or any(dy[a] != n for a, n in zip(axes, attrs["sizes"])):
        raise Error(f"_backward_resize: dy of shape {dy} does not have sizes {tuple(attrs['sizes'])} on axes {axes} "
                    f"(or 'in_sizes'={tuple(attrs['in_sizes'])} does not name one size per axis)")
    axis_maps("_backward_resize", attrs, attrs["in_sizes"])
    dx = list(dy)
    for a, n in zip(axes, attrs["in_sizes"]):
        dx[a] = int(n)
    return [dy], [tuple(dx)]


def _bwd_forward(attrs, inputs, ctx):
    dy = inputs[0]
    axes = _check_axes("_backward_resize", attrs, dy.ndim)
    maps = axis_maps("_backward_resize", attrs, attrs["in_sizes"])
    in_begin = _tile_vec(attrs, "tile_in", [0] * len(axes))
    out_begin = _tile_vec(attrs, "tile_out", [0] * len(axes))
    in_len = _tile_vec(attrs, "tile_len", attrs["in_sizes"])
    # rows another tile of dx holds are dropped: that tile accumulates them
    mats = [m.matrix(ob, dy.shape[a], ib, il, dy.dtype, strict=False)
            for m, a, ib, ob, il in zip(maps, axes, in_begin, out_begin, in_len)]
    return [np.ascontiguousarray(_apply(dy, mats, axes, transpose=True)).astype(dy.dtype, copy=False)]


def _bwd_tdl(attrs, in_shapes, out_shapes):
    rank = len(out_shapes[0])
    axes = tuple(attrs["axes"])
    iv = index_vars(rank)
    rv = [f"r{a}" if a in axes else iv[a] for a in range(rank)]
    red = [f"r{a}" for a in axes]
    return (f"dy -> dx: {access('dx', iv)} = sum({', '.join(red)}) "
            f"{{ w({', '.join([iv[a] for a in axes] + red)}) * {access('dy', rv)} }}")


def _bwd_hook(attrs, ins, outs, in_shapes, out_shapes):
    axes = tuple(attrs["axes"])
    (ylo, _), (xlo, xhi) = ins[0], outs[0]
    return {**attrs, "tile_in": tuple(int(xlo[a]) for a in axes), "tile_out": tuple(int(ylo[a]) for a in axes),
            "tile_len": tuple(int(xhi[a]) - int(xlo[a]) for a in axes)}


register(OpDef(
    name="_backward_resize",
    params=dict(_COMMON, in_sizes=Param("shape", required=True)),
    arguments=lambda attrs: ["dy"],
    infer_shape=_bwd_infer,
    forward=_bwd_forward,
    tdl=_bwd_tdl,
    extra={"tile_attrs": _bwd_hook},
    doc="Gradient of resize: dy multiplied along each resized axis by the transposed interpolation map.",
))
