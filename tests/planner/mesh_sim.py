"""A 2x2x2 mesh of 8 devices (axes a, b, c) in plain NumPy, for the JAX lowering's tests
(test_jax_node_map.py, and jax_reduce_check.py, which runs the same cases in JAX): device
coordinates, the mesh tiles of a spec, and per-device summands of a partial sum."""
import numpy as np

SIZES = {"a": 2, "b": 2, "c": 2}
AXES = tuple(SIZES)
NDEV = 8
SHAPE = (16, 8, 4)


def coords(d):
    return dict(zip(AXES, np.unravel_index(d, [SIZES[a] for a in AXES])))


def index(d, axes):
    """Device d's index along `axes` (mixed radix, the first axis major)."""
    c, i = coords(d), 0
    for a in axes:
        i = i * SIZES[a] + int(c[a])
    return i


def group(d, axes):
    """Devices that differ from d only along `axes`, by their index along them."""
    members = [e for e in range(NDEV) if all(coords(e)[a] == coords(d)[a] for a in AXES if a not in axes)]
    return sorted(members, key=lambda e: index(e, axes))


def box(spec, d, shape=SHAPE):
    """Device d's tile of a tensor of `shape` laid out by mesh spec `spec`, as slices."""
    out = []
    for n, axes in zip(shape, spec):
        k = int(np.prod([SIZES[a] for a in axes])) if axes else 1
        t = n // k
        out.append(slice(index(d, axes) * t, index(d, axes) * t + t))
    return tuple(out)


def take(x, j, start, size):
    idx = [slice(None)] * x.ndim
    idx[j] = slice(start, start + size)
    return x[tuple(idx)]


def summands(x, spec, summed, rng):
    """Each device's summand of its tile (mesh spec `spec`) of `x`: the devices that differ only
    along the `summed` axes hold random parts adding up to the same tile."""
    tiles = [None] * NDEV
    for d in range(NDEV):
        members = group(d, summed)
        if d != members[0]:
            continue
        target = x[box(spec, d, x.shape)]
        parts = [rng.standard_normal(target.shape) for _ in members[1:]]
        parts.insert(0, target - sum(parts))
        for e, p in zip(members, parts):
            tiles[e] = p
    return tiles
