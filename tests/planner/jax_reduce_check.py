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
from mesh_sim import AXES, SIZES, summands

SHAPE = (16, 8)


def main():
    cases = json.load(sys.stdin)
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 2, 2), AXES)
    rng = np.random.default_rng(0)
    out = {}
    for i, (spec, summed, stored) in enumerate(cases):
        spec, stored = tuple(tuple(a) for a in spec), tuple(tuple(a) for a in stored)
        x = rng.standard_normal(SHAPE)
        tiles = summands(x, spec, summed, rng)
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
    # a boolean partial (NumPy's sum of booleans is their logical or) over all 8 devices,
    # stored split over all three axes: reduced in bytes, 7/8 of 128 B sent by each device
    flags = rng.random((8,) + SHAPE) < 0.2
    fn = jax.jit(jax.shard_map(lambda t: reduce_partial(t[0], [(0, AXES, AXES)], (), SIZES), mesh=mesh,
                               in_specs=PartitionSpec(AXES), out_specs=PartitionSpec(AXES), check_vma=False))
    got = np.asarray(fn(jnp.asarray(flags)))
    found = atj.collectives(fn.lower(jnp.asarray(flags)).compile().as_text(), 8)
    out["bool"] = {"equal": bool(got.dtype == np.bool_ and np.array_equal(got, flags.any(axis=0))),
                   "bytes": sum(c["bytes"] for c in found)}
    print(json.dumps(out))


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    main()
