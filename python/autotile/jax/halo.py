"""Halo exchange in the JAX step: a node that reads its input's mesh tile plus a few rows of
the neighbouring tiles (a spatially split convolution, Tofu's halo regions) runs as a
shard_map too, the neighbours' rows brought in by ``lax.ppermute`` -- the rows the plan's
MultiFetch fetches -- instead of leaving the node to XLA's global view, which gathers whole
tensors (and whose partitioning of convolutions is wrong on CPU, see step.WHOLE_IN_GLOBAL_VIEW).

Only ops whose rows past the tensor's ends are zeros take part (HALO_OPS: the convolution
family, whose padding is zeros): the first and last tiles receive zeros where the halo
lies outside the tensor, and their tile attributes are computed from the unclipped box, so
the kernel pads nothing twice."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np

#: ops whose reads past the tensor's ends are zero padding (a zero row received there is the
#: same): the convolution family
HALO_OPS = frozenset({"Convolution", "_backward_Convolution_data", "_backward_Convolution_weight", "Deconvolution"})


@dataclass(frozen=True)
class Halo:
    """Rows read past a tile of dimension `dim` (split `n` ways into tiles of `tile` rows by
    mesh axes `axes`, indices, major first): `lo` before its first row and `hi` after its last
    (negative: rows of the tile itself not read)."""

    dim: int
    lo: int
    hi: int
    axes: Tuple[int, ...]
    tile: int
    n: int


def split_axes(boxes, j, mesh_shape) -> Tuple[int, ...]:
    """The mesh axes along which dimension j's boxes (per device in mesh order) move, major
    first (the one moving them furthest)."""
    first = boxes[0]
    shifts = []
    for a, k in enumerate(mesh_shape):
        if k == 1:
            continue
        c = [0] * len(mesh_shape)
        c[a] = 1
        lo, hi = boxes[int(np.ravel_multi_index(c, mesh_shape))]
        s = max(abs(lo[j] - first[0][j]), abs(hi[j] - first[1][j]))
        if s:
            shifts.append((s, a))
    return tuple(a for _, a in sorted(shifts, reverse=True))


def tile_index(coords, axes, mesh_shape) -> int:
    """The index of a device (mesh coordinates) among the tiles of a dimension split by `axes`."""
    idx = 0
    for a in axes:
        idx = idx * mesh_shape[a] + coords[a]
    return idx


def halo_of(boxes, full, mesh_shape) -> Optional[Tuple[list, List[Halo], list]]:
    """When every device reads its mesh tile of a tensor of shape `full` widened by the same
    rows on each side (clipped to the tensor): (the tiles' boxes, the Halo of each widened
    dimension, each device's unclipped box); else None."""
    nd = len(full)
    coords = [tuple(int(c) for c in np.unravel_index(d, mesh_shape)) for d in range(len(boxes))]
    core = [([0] * nd, [0] * nd) for _ in boxes]
    wide = [([0] * nd, [0] * nd) for _ in boxes]
    halos = []
    for j in range(nd):
        axes = split_axes(boxes, j, mesh_shape)
        n = int(np.prod([mesh_shape[a] for a in axes])) if axes else 1
        if full[j] % n:
            return None
        tile = full[j] // n
        idx = [tile_index(c, axes, mesh_shape) for c in coords]
        los = {i * tile - b[0][j] for i, b in zip(idx, boxes) if i > 0}
        his = {b[1][j] - (i + 1) * tile for i, b in zip(idx, boxes) if i < n - 1}
        if len(los) > 1 or len(his) > 1:
            return None
        lo, hi = (los.pop() if los else 0), (his.pop() if his else 0)
        if not (-tile < lo <= tile and -tile < hi <= tile) or (n == 1 and (lo or hi)):
            return None
        for d, (i, b) in enumerate(zip(idx, boxes)):
            w = (i * tile - lo, (i + 1) * tile + hi)
            if (b[0][j], b[1][j]) != (max(0, w[0]), min(full[j], w[1])):
                return None
            core[d][0][j], core[d][1][j] = i * tile, (i + 1) * tile
            wide[d][0][j], wide[d][1][j] = w
        if lo or hi:
            halos.append(Halo(j, lo, hi, axes, tile, n))
    if not halos:
        return None
    return [(tuple(a), tuple(b)) for a, b in core], halos, [(tuple(a), tuple(b)) for a, b in wide]


def _neighbour_pairs(halo: Halo, mesh_shape) -> List[Tuple[int, int]]:
    """(device, the device holding the next tile of the halo's dimension), mesh order."""
    pairs = []
    for d in range(int(np.prod(mesh_shape))):
        c = list(np.unravel_index(d, mesh_shape))
        i = tile_index(c, halo.axes, mesh_shape)
        if i + 1 >= halo.n:
            continue
        rest = i + 1
        for a in reversed(halo.axes):
            c[a] = rest % mesh_shape[a]
            rest //= mesh_shape[a]
        pairs.append((d, int(np.ravel_multi_index(c, mesh_shape))))
    return pairs


def apply_halo(x, halos: List[Halo], axis_names, mesh_shape):
    """Inside the map: the tile `x` widened by its halos, one dimension after another (a
    dimension done first carries its halo into the next one's, which gives the corners).
    A tile at an end of the tensor receives zeros there."""
    import jax
    import jax.numpy as jnp

    axes = tuple(axis_names)
    for h in halos:
        pairs = _neighbour_pairs(h, mesh_shape)
        pieces = []
        if h.lo > 0:  # the previous tile's last rows
            tail = jax.lax.slice_in_dim(x, h.tile - h.lo, h.tile, axis=h.dim)
            pieces.append(jax.lax.ppermute(tail, axes, pairs))
        own = jax.lax.slice_in_dim(x, max(0, -h.lo), h.tile + min(0, h.hi), axis=h.dim)
        pieces.append(own)
        if h.hi > 0:  # the next tile's first rows
            head = jax.lax.slice_in_dim(x, 0, h.hi, axis=h.dim)
            pieces.append(jax.lax.ppermute(head, axes, [(b, a) for a, b in pairs]))
        x = jnp.concatenate(pieces, axis=h.dim) if len(pieces) > 1 else own
    return x
