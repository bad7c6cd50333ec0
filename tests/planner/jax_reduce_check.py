"""Run by tests/planner/test_jax_node_map.py in a subprocess with 8 host devices
(XLA_FLAGS=--xla_force_host_platform_device_count=8 set before jax is imported): partial
sums reduced inside a ``jax.shard_map`` by node_map.reduce_partial and re-laid out by
apply_relayout, for the cases given as JSON on stdin ([spec, summed, stored] each), against
the array the per-device summands add up to. Prints {"case index": max abs error, ...} and
the compiled program's reduce-scatter bytes per case."""
import json
import sys

import numpy as np

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec

import autotile.jax as atj
from autotile.jax.node_map import apply_relayout, reduce_partial, reduction, relayout

SIZES = {"a": 2, "b": 2, "c": 2}
AXES = tuple(SIZES)
SHAPE = (16, 8)


def coords(d):
    return dict(zip(AXES, np.unravel_index(d, [SIZES[a] for a in AXES])))


def index(d, axes):
    c, i = coords(d), 0
    for a in axes:
        i = i * SIZES[a] + int(c[a])
    return i


def box(spec, d):
    out = []
    for n, axes in zip(SHAPE, spec):
        t = n // int(np.prod([SIZES[a] for a in axes]))
        out.append(slice(index(d, axes) * t, index(d, axes) * t + t))
    return tuple(out)


def summands(spec, summed, rng):
    """x and each device's summand of its tile of x (the devices that differ only along the
    `summed` axes hold parts adding up to the same tile)."""
    x = rng.standard_normal(SHAPE)
    parts = {}
    for d in range(8):
        key = tuple(int(coords(d)[a]) for a in AXES if a not in summed)
        parts.setdefault(key, []).append(d)
    tiles = [None] * 8
    for members in parts.values():
        target = x[box(spec, members[0])]
        pieces = [rng.standard_normal(target.shape) for _ in members[1:]]
        pieces.insert(0, target - sum(pieces))
        for d, p in zip(members, pieces):
            tiles[d] = p
    return x, tiles


def main():
    cases = json.load(sys.stdin)
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 2, 2), AXES)
    rng = np.random.default_rng(0)
    out = {}
    for i, (spec, summed, stored) in enumerate(cases):
        spec, stored = tuple(tuple(a) for a in spec), tuple(tuple(a) for a in stored)
        x, tiles = summands(spec, summed, rng)
        scatters, left, result, _ = reduction(spec, tuple(summed), stored, tiles[0].shape, SIZES, SHAPE)
        steps = relayout(result, stored, SIZES, SHAPE)

        def body(t):
            y = reduce_partial(t[0], scatters, left, SIZES)
            return apply_relayout(y, steps, SIZES)

        # each device's summand enters along a leading dimension split over every mesh axis
        fn = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=PartitionSpec(AXES),
                                   out_specs=PartitionSpec(*[a if a else None for a in stored]), check_vma=False))
        stacked = jnp.asarray(np.stack(tiles))
        got = np.asarray(fn(stacked))
        found = atj.collectives(fn.lower(stacked).compile().as_text(), 8)
        out[str(i)] = {"err": float(np.abs(got - x).max()),
                       "reduce_scatter_bytes": sum(c["bytes"] for c in found if c["kind"] == "reduce-scatter"),
                       "bytes": sum(c["bytes"] for c in found)}
    print(json.dumps(out))


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    main()
