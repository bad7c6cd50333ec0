"""Sliding-window helpers shared by Convolution and Pooling (NC + 1..3 spatial dims).

`windows` is im2col without a copy: a strided view of shape (N, C, *kernel, *out) whose
element [n, c, k..., o...] is xpad[n, c, o*stride + k*dilate ...]. `col2im_add` is its
adjoint: it scatter-adds such an array back into a padded buffer, one strided slice per
kernel offset (so a 3x3 kernel costs 9 vectorised adds, never a Python loop over pixels).
`pad_or_crop` pads or crops each spatial dim by signed amounts: a tile of a partitioned op
runs on a slab (with halo) of its input, whose first window may start before the slab
(padding) or inside it (crop).

The helpers take the array module (`xp`: numpy, or cupy on a GPU) from their array's type
through the array API they share, so the GPU runtime runs the same kernels.
"""
from __future__ import annotations

from typing import Sequence, Tuple

import numpy as np
from numpy.lib.stride_tricks import as_strided


def out_size(size: int, kernel: int, stride: int, dilate: int, pad: int, ceil: bool = False) -> int:
    """Number of window positions along one dim (floor, or ceil for MXNet's 'full')."""
    span = size + 2 * pad - dilate * (kernel - 1) - 1
    if ceil:
        return -(-span // stride) + 1
    return span // stride + 1


def pad_spatial(x: np.ndarray, pad: Sequence[int], extra: Sequence[int] = None, value=0) -> np.ndarray:
    """x padded by pad[i] before and pad[i] + extra[i] after each spatial dim (dims 2...)."""
    extra = extra or [0] * len(pad)
    if not any(pad) and not any(extra):
        return x
    widths = [(0, 0), (0, 0)] + [(p, p + e) for p, e in zip(pad, extra)]
    return np.pad(x, widths, mode="constant", constant_values=value)


def pad_or_crop(x, lo: Sequence[int], hi: Sequence[int], value=0, xp=np):
    """x zero-padded (or `value`-padded) by lo[i] before and hi[i] after spatial dim i;
    negative amounts crop instead."""
    crop = (slice(None), slice(None)) + tuple(slice(max(0, -a), x.shape[2 + i] - max(0, -b))
                                              for i, (a, b) in enumerate(zip(lo, hi)))
    x = x[crop]
    if not any(v > 0 for v in tuple(lo) + tuple(hi)):
        return x
    widths = [(0, 0), (0, 0)] + [(max(0, a), max(0, b)) for a, b in zip(lo, hi)]
    return xp.pad(x, widths, mode="constant", constant_values=value)


def windows(xpad, kernel: Sequence[int], stride: Sequence[int], dilate: Sequence[int], out: Sequence[int], xp=np):
    """Read-only strided view (N, C, *kernel, *out) of the windows of padded `xpad`."""
    s = xpad.strides
    nd = len(kernel)
    shape = tuple(xpad.shape[:2]) + tuple(kernel) + tuple(out)
    strides = tuple(s[:2]) + tuple(s[2 + i] * dilate[i] for i in range(nd)) + tuple(s[2 + i] * stride[i] for i in range(nd))
    if xp is np:
        return as_strided(xpad, shape=shape, strides=strides, writeable=False)
    return xp.lib.stride_tricks.as_strided(xpad, shape=shape, strides=strides)


def _slab(k: int, dilate: int, stride: int, out: int) -> slice:
    start = k * dilate
    return slice(start, start + stride * (out - 1) + 1, stride)


def col2im_add(dxpad, cols, kernel: Sequence[int], stride: Sequence[int],
               dilate: Sequence[int]) -> None:
    """dxpad[n, c, o*stride + k*dilate] += cols[n, c, k..., o...] for every k (in place)."""
    nd = len(kernel)
    out = cols.shape[2 + nd:]
    for k in np.ndindex(*kernel):
        region = (slice(None), slice(None)) + tuple(_slab(k[i], dilate[i], stride[i], out[i]) for i in range(nd))
        dxpad[region] += cols[(slice(None), slice(None)) + k]


def crop_spatial(xpad: np.ndarray, pad: Sequence[int], size: Sequence[int]) -> np.ndarray:
    """The interior xpad[:, :, pad : pad + size] (undoes pad_spatial)."""
    region = (slice(None), slice(None)) + tuple(slice(p, p + s) for p, s in zip(pad, size))
    return xpad[region]


def batch_chunks(n: int, per_item: int, limit: int = 1 << 25) -> Tuple[slice, ...]:
    """Batch slices whose im2col buffers stay below `limit` elements (bounds peak memory)."""
    step = max(1, limit // max(1, per_item))
    return tuple(slice(i, min(n, i + step)) for i in range(0, n, step))
