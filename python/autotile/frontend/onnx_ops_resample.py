"""ONNX converters of the resampling and index ops: ConvTranspose, Resize (and Upsample),
ArgMax, ArgMin, ScatterND; Loop is refused with its reason.

- ConvTranspose -> Deconvolution. ONNX's pads (or auto_pad / output_shape) and output_padding
  become Deconvolution's pad (the pad before) and adj = pad_begin - pad_end + output_padding:
  the output depends only on where it starts and how long it is (ops/deconv.py).
- Resize -> resize for modes nearest, linear and cubic (cubic_coeff_a, exclude_outside) with
  the coordinate transformations half_pixel, pytorch_half_pixel, asymmetric and
  align_corners (all nearest_modes). tf_crop_and_resize, half_pixel_symmetric and
  antialiased downsampling are refused. Scales
  and sizes must be constants; axes whose size and coordinates do not change are left out.
- ArgMax / ArgMin -> argmax / argmin with int64 indices (no gradient flows through them).
- ScatterND -> ScatterND (reductions none, add, mul, max, min; gradients for none and add).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from .onnx_registry import _norm_axis, check_index_tuples, converter


# ----------------------------------------------------------------------------- ConvTranspose

def _transpose_pads(ctx, nsp, spatial, kernel, strides, dilations, out_pad):
    """(begin, end) pads of a ConvTranspose from pads, auto_pad or output_shape (ONNX spec)."""
    auto = ctx.attr("auto_pad", "NOTSET") or "NOTSET"
    out_shape = ctx.attr("output_shape")
    if out_shape is None and auto in ("SAME_UPPER", "SAME_LOWER"):
        out_shape = [n * s for n, s in zip(spatial, strides)]
    if out_shape is not None:
        out_shape = list(out_shape)[-nsp:]
        if len(out_shape) != nsp:
            raise ctx.error(f"output_shape {ctx.attr('output_shape')} should give {nsp} spatial sizes")
        begin, end = [], []
        for n, k, s, d, a, o in zip(spatial, kernel, strides, dilations, out_pad, out_shape):
            total = s * (n - 1) + a + (k - 1) * d + 1 - o
            small, large = total // 2, total - total // 2
            begin.append(small if auto == "SAME_UPPER" else large)
            end.append(large if auto == "SAME_UPPER" else small)
        return begin, end
    if auto in ("VALID", "NOTSET"):
        pads = (ctx.attr("pads") if auto == "NOTSET" else None) or [0] * (2 * nsp)
        if len(pads) != 2 * nsp:
            raise ctx.error(f"pads {pads} should have {2 * nsp} values for {nsp} spatial dims")
        return list(pads[:nsp]), list(pads[nsp:])
    raise ctx.error(f"unknown auto_pad '{auto}'")


def _check_output_padding(ctx, out_pad, strides, dilations):
    """The ONNX spec: each output_padding value is >= 0 and "less than the corresponding
    stride/dilation dimension" (onnxruntime: less than max(stride, dilation)); onnxruntime also
    refuses one not less than the stride, whose output a convolution of the same geometry would
    not read back to the input's size (a full row of stride-wide gaps)."""
    for what, values in (("strides", strides), ("dilations", dilations)):
        if any(v < 1 for v in values):
            raise ctx.error(f"{what} {values} must be positive")
    for d, (a, s, dil) in enumerate(zip(out_pad, strides, dilations)):
        if a < 0:
            raise ctx.error(f"output_padding {out_pad} has a negative value ({a}) in spatial dim {d}")
        if a >= s:
            limit = "max(stride, dilation)" if a >= max(s, dil) else "the stride"
            raise ctx.error(f"output_padding {out_pad} must be less than the stride {strides} in each spatial dim "
                            f"(ONNX spec; spatial dim {d}: {a} is not less than {limit}, "
                            f"stride {s}, dilation {dil}); onnxruntime refuses it")


@converter("ConvTranspose")
def conv_transpose(ctx):
    wshape = ctx.need_shape(1, "for the number of filters")
    nsp = len(wshape) - 2
    kernel = list(ctx.attr("kernel_shape") or wshape[2:])
    strides = list(ctx.attr("strides") or [1] * nsp)
    dilations = list(ctx.attr("dilations") or [1] * nsp)
    out_pad = list(ctx.attr("output_padding") or [0] * nsp)
    if not (len(kernel) == len(strides) == len(dilations) == len(out_pad) == nsp):
        raise ctx.error(f"kernel_shape {kernel}, strides {strides}, dilations {dilations} and output_padding "
                        f"{out_pad} must each have {nsp} values")
    _check_output_padding(ctx, out_pad, strides, dilations)
    needs_spatial = ctx.has_attr("output_shape") or (ctx.attr("auto_pad", "NOTSET") or "NOTSET").startswith("SAME")
    spatial = ctx.need_shape(0, "for output_shape / auto_pad", slice(2, None)) if needs_spatial else [None] * nsp
    begin, end = _transpose_pads(ctx, nsp, spatial, kernel, strides, dilations, out_pad)
    if any(b < 0 for b in begin):
        raise ctx.error(f"a negative pad before ({begin}: output_shape larger than the full transposed "
                        "convolution) is not supported")
    group = int(ctx.attr("group", 1))
    inputs = [ctx.input(0), ctx.input(1)] + ([ctx.input(2)] if ctx.has_input(2) else [])
    return [ctx.op("Deconvolution", *inputs, kernel=tuple(kernel), stride=tuple(strides), dilate=tuple(dilations),
                   pad=tuple(begin), adj=tuple(b - e + a for b, e, a in zip(begin, end, out_pad)),
                   num_filter=int(wshape[1]) * group, num_group=group, no_bias=not ctx.has_input(2))]


# ----------------------------------------------------------------------------- Resize

_COORDS = ("half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners")


def _const_or_none(ctx, i, what):
    if not ctx.has_input(i):
        return None
    value = np.asarray(ctx.const(i, what))
    return value if value.size else None


def _resize_targets(ctx, rank, shape, scales, sizes, axes):
    """(axis, input size, output size, exact scale) of every axis the node may change."""
    axes = list(range(rank)) if axes is None else [_norm_axis(ctx, int(a), rank) for a in axes]
    if (scales is None) == (sizes is None):
        raise ctx.error("exactly one of 'scales' and 'sizes' must be given")
    given = np.asarray(scales if scales is not None else sizes).ravel()
    if given.size != len(axes):
        raise ctx.error(f"{'scales' if sizes is None else 'sizes'} {given.tolist()} should have one value per "
                        f"axis of {axes}")
    out = []
    if sizes is not None:
        policy = ctx.attr("keep_aspect_ratio_policy", "stretch") or "stretch"
        known = [shape[a] for a in axes]
        if any(n is None for n in known):
            raise ctx.error(f"sizes {given.tolist()} resize an axis of unknown size (input shape {shape})")
        ratios = [Fraction(int(m), int(n)) for m, n in zip(given, known)]
        if policy in ("not_larger", "not_smaller"):
            common = min(ratios) if policy == "not_larger" else max(ratios)
            ratios = [common] * len(axes)
            given = [int(np.round(float(common) * n)) for n in known]
        elif policy != "stretch":
            raise ctx.error(f"unknown keep_aspect_ratio_policy '{policy}'")
        for a, n, m, r in zip(axes, known, given, ratios):
            out.append((a, n, int(m), r))
        return out
    for a, s in zip(axes, given):
        scale = Fraction(str(np.float32(s)))
        if scale <= 0:
            raise ctx.error(f"scale {float(s)} of axis {a} must be positive")
        n = shape[a]
        if n is None:
            if scale != 1:
                raise ctx.error(f"scale {float(s)} resizes axis {a}, whose size is unknown (input shape {shape})")
            continue
        out.append((a, n, int(np.floor(n * float(np.float32(s)))), scale))
    return out


def _resize(ctx, mode, coord, nearest, scales, sizes, axes=None):
    rank = ctx.need_rank(0, "to resize")
    shape = ctx.shape(0)
    if mode not in ("nearest", "linear", "cubic"):
        raise ctx.error(f"mode '{mode}' is not supported (autotile resizes by 'nearest', 'linear' or 'cubic')")
    if coord not in _COORDS:
        raise ctx.error(f"coordinate_transformation_mode '{coord}' is not supported (one of {', '.join(_COORDS)})")
    from ..ops.resize import NEAREST, format_scales

    if nearest not in NEAREST:
        raise ctx.error(f"nearest_mode '{nearest}' is not supported (one of {', '.join(NEAREST)})")
    targets = []
    for a, n, m, scale in _resize_targets(ctx, rank, shape, scales, sizes, axes):
        if m < 1:
            raise ctx.error(f"axis {a} of size {n} would be resized to {m} rows")
        if ctx.attr("antialias", 0) and m < n and mode != "nearest":
            raise ctx.error("antialiased downsampling (antialias=1) is not supported")
        identity = n == m and (scale == 1 or coord == "align_corners")
        if not identity:
            targets.append((a, m, scale))
    if not targets:
        return ctx.op("identity", ctx.input(0))
    return ctx.op("resize", ctx.input(0), axes=tuple(t[0] for t in targets), sizes=tuple(t[1] for t in targets),
                  scales=format_scales([t[2] for t in targets]),
                  mode=mode, coord=coord, nearest_mode=nearest, cubic_coeff_a=float(ctx.attr("cubic_coeff_a", -0.75)),
                  exclude_outside=bool(ctx.attr("exclude_outside", 0)))


@converter("Resize")
def resize(ctx):
    mode = ctx.attr("mode", "nearest") or "nearest"
    if ctx.opset < 11:  # Resize-10: (X, scales), Upsample's asymmetric floor mapping
        return [_resize(ctx, mode, "asymmetric", "floor", _const_or_none(ctx, 1, "scales"), None)]
    coord = ctx.attr("coordinate_transformation_mode", "half_pixel") or "half_pixel"
    nearest = ctx.attr("nearest_mode", "round_prefer_floor") or "round_prefer_floor"
    axes = ctx.attr("axes")
    return [_resize(ctx, mode, coord, nearest, _const_or_none(ctx, 2, "scales"), _const_or_none(ctx, 3, "sizes"),
                    axes)]


@converter("Upsample")
def upsample(ctx):
    scales = ctx.attr("scales") if ctx.has_attr("scales") else _const_or_none(ctx, 1, "scales")
    return [_resize(ctx, ctx.attr("mode", "nearest") or "nearest", "asymmetric", "floor", scales, None)]


# ----------------------------------------------------------------------------- ArgMax / ArgMin

def _arg(op_name):
    def convert(ctx):
        rank = ctx.need_rank(0, "for the axis")
        axis = _norm_axis(ctx, int(ctx.attr("axis", 0)), rank)
        return [ctx.op(op_name, ctx.input(0), axis=axis, keepdims=bool(ctx.attr("keepdims", 1)),
                       select_last_index=bool(ctx.attr("select_last_index", 0)), dtype="int64")]

    return convert


converter("ArgMax")(_arg("argmax"))
converter("ArgMin")(_arg("argmin"))


# ----------------------------------------------------------------------------- ScatterND

@converter("ScatterND")
def scatter_nd(ctx):
    from ..ops.scatter_nd import REDUCTIONS

    reduction = ctx.attr("reduction", "none") or "none"
    if reduction not in REDUCTIONS:
        raise ctx.error(f"reduction '{reduction}' is not supported (one of {', '.join(REDUCTIONS)})")
    if ctx.is_const(1):
        idx = np.asarray(ctx.const(1, "indices"))
        if idx.dtype.kind not in "iu":
            raise ctx.error(f"indices must be integers, got {idx.dtype}")
        check_index_tuples(ctx, idx, ctx.shape(0))
    return [ctx.op("ScatterND", ctx.input(0), ctx.input(1), ctx.input(2), reduction=reduction)]
