"""Axis and shape helpers shared by the shape-manipulation, reduction and slicing ops."""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

from ..errors import Error


def need_shapes(op: str, in_shapes, names: Sequence[str]) -> None:
    """Error naming the inputs whose shapes are unknown (these ops cannot deduce them)."""
    missing = [n for n, s in zip(names, in_shapes) if s is None]
    if missing:
        raise Error(f"{op} needs the shape of input(s) {missing}")


def norm_axis(op: str, axis: int, ndim: int, attr: str = "axis", shape=None, extra: int = 0) -> int:
    """`axis` in [0, ndim + extra), accepting negative values as NumPy does; Error names the
    attribute and the shape when it is out of range (`extra` = 1 for expand_dims)."""
    n = ndim + extra
    if not -n <= axis < n:
        where = f" of input shape {tuple(shape)}" if shape is not None else f" for rank {ndim}"
        raise Error(f"{op}: {attr}={axis} is out of range [{-n}, {n}){where}")
    return axis + n if axis < 0 else axis


def norm_axes(op: str, axes: Sequence[int], ndim: int, attr: str = "axis", shape=None) -> Tuple[int, ...]:
    """Normalized, duplicate-free axes (Error on a duplicate)."""
    out = tuple(norm_axis(op, a, ndim, attr, shape) for a in axes)
    if len(set(out)) != len(out):
        raise Error(f"{op}: {attr}={tuple(axes)} names an axis twice (input shape {tuple(shape or ())})")
    return out


def reduced_axes(op: str, axis: Optional[Sequence[int]], exclude: bool, shape) -> Tuple[int, ...]:
    """The axes MXNet's reductions reduce: all when `axis` is None or (), else `axis`
    (or its complement with exclude=True), sorted."""
    ndim = len(shape)
    if axis is None or len(axis) == 0:
        return tuple(range(ndim))
    axes = norm_axes(op, axis, ndim, "axis", shape)
    if exclude:
        axes = tuple(d for d in range(ndim) if d not in axes)
    return tuple(sorted(axes))


def reduced_shape(shape, axes, keepdims: bool) -> Tuple[int, ...]:
    """Shape after reducing `axes`; MXNet never returns rank 0 (a full reduction gives (1,))."""
    if keepdims:
        return tuple(1 if d in axes else s for d, s in enumerate(shape))
    out = tuple(s for d, s in enumerate(shape) if d not in axes)
    return out or (1,)
