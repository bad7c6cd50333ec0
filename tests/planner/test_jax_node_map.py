"""The JAX step's shard_map lowering (autotile/jax/node_map.py), checked without JAX: the
re-layout and partial-sum reduction steps it plans are carried out by a NumPy simulation
of the collectives on 8 devices (all-gather, all-to-all, reduce-scatter, all-reduce,
collective-permute, each written from its definition), and every device's result must be
its tile of the global array, cut from the array by its mesh box."""
import itertools
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from autotile.jax.node_map import block_moves, reduction, relayout, spec_of
from .mesh_sim import AXES, NDEV, SHAPE, SIZES, box, group, index, summands, take

def simulate(tiles, steps):
    """The steps of node_map.relayout on per-device NumPy tiles."""
    for step in steps:
        if step[0] == "slice":
            _, j, axes = step
            n = int(np.prod([SIZES[a] for a in axes]))
            tiles = [take(t, j, index(d, axes) * (t.shape[j] // n), t.shape[j] // n) for d, t in enumerate(tiles)]
        elif step[0] == "a2a":
            _, i, j, moving, axes = step
            k = int(np.prod([SIZES[a] for a in moving]))
            if axes:
                n = int(np.prod([SIZES[a] for a in axes]))
                pre = []
                for d, t in enumerate(tiles):
                    rest = t.shape[j] // (k * n)
                    chunks = [take(t, j, (q * n + index(d, axes)) * rest, rest) for q in range(k)]
                    pre.append(np.concatenate(chunks, axis=j))
                tiles = pre
            new = []
            for d in range(NDEV):
                members = group(d, moving)
                g = members.index(d)
                size = tiles[d].shape[j] // k
                new.append(np.concatenate([take(tiles[e], j, g * size, size) for e in members], axis=i))
            tiles = new
        elif step[0] == "a2a2":  # chunk (p, q) of dimensions (j1, j2) to index p * k2 + q along first + second
            _, i, j1, first, j2, second = step
            k1, k2 = (int(np.prod([SIZES[a] for a in run])) for run in (first, second))
            new = []
            for d in range(NDEV):
                members = group(d, first + second)
                p, q = divmod(members.index(d), k2)
                parts = []
                for e in members:
                    t = tiles[e]
                    t = take(t, j1, p * (t.shape[j1] // k1), t.shape[j1] // k1)
                    parts.append(take(t, j2, q * (t.shape[j2] // k2), t.shape[j2] // k2))
                new.append(np.concatenate(parts, axis=i))
            tiles = new
        elif step[0] == "a2a2m":  # chunk p * k2 + q of j to index (p, q); from (p', q') into block (p', q')
            _, i1, first, i2, second, j = step
            k1, k2 = (int(np.prod([SIZES[a] for a in run])) for run in (first, second))
            new = []
            for d in range(NDEV):
                members = group(d, first + second)
                me = members.index(d)
                t0 = tiles[d]
                size = t0.shape[j] // (k1 * k2)
                shape = list(t0.shape)
                shape[j] = size
                shape[i1] *= k1
                shape[i2] *= k2
                out = np.empty(shape)
                for c, e in enumerate(members):
                    p, q = divmod(c, k2)
                    idx = [slice(None)] * len(shape)
                    idx[i1] = slice(p * t0.shape[i1], (p + 1) * t0.shape[i1])
                    idx[i2] = slice(q * t0.shape[i2], (q + 1) * t0.shape[i2])
                    out[tuple(idx)] = take(tiles[e], j, me * size, size)
                new.append(out)
            tiles = new
        elif step[0] == "gather":
            _, i, a = step
            tiles = [np.concatenate([tiles[e] for e in group(d, (a,))], axis=i) for d in range(NDEV)]
        elif step[0] == "exchange":  # all-to-all over `group`: slot g to member g, received by sender
            group_axes, piece, tile, send, recv = step[1]
            sent = [[t[tuple(slice(o, o + k) for o, k in zip(send[d][g], piece))] for g in range(len(send[d]))]
                    for d, t in enumerate(tiles)]
            new = []
            for d in range(NDEV):
                out = np.full(tile, np.nan)
                members = group(d, group_axes)
                for g, e in enumerate(members):
                    got = sent[e][members.index(d)]
                    idx = tuple(slice(o, o + k) for o, k in zip(recv[d][g], piece))
                    assert np.isnan(out[idx]).all()  # each piece lands on its own part of the tile
                    out[idx] = got
                new.append(out)
            tiles = new
        else:
            tile, local, rounds = step[1]
            new = [None] * NDEV
            for d in range(NDEV):
                if local[d] is not None:
                    new[d] = tiles[d][tuple(slice(o, o + t) for o, t in zip(local[d], tile))]
            for pairs, offset, _ in rounds:
                for s, d in pairs:
                    assert new[d] is None
                    new[d] = tiles[s][tuple(slice(o, o + t) for o, t in zip(offset[s], tile))]
            tiles = new
    return tiles


def specs(ndim=3):
    """Every mesh spec of a 3-d tensor over the three axes (each axis on one dimension or none,
    in every order)."""
    out = set()
    for place in itertools.product(range(ndim + 1), repeat=len(AXES)):
        for order in itertools.permutations(AXES):
            out.add(tuple(tuple(a for a in order if place[AXES.index(a)] == j) for j in range(ndim)))
    return sorted(out)


def test_relayout_steps_give_every_device_its_target_tile():
    x = np.arange(np.prod(SHAPE), dtype=np.float64).reshape(SHAPE)
    all_specs = specs()
    rng = np.random.default_rng(0)
    pairs = [(all_specs[i], all_specs[j]) for i, j in rng.integers(0, len(all_specs), (600, 2))]
    pairs += [(((), (), ()), s) for s in all_specs[:20]] + [(s, ((), (), ())) for s in all_specs[:20]]
    done = 0
    for src, dst in pairs:
        steps = relayout(src, dst, SIZES, SHAPE)
        if steps is None:
            continue
        done += 1
        got = simulate([x[box(src, d)] for d in range(NDEV)], steps)
        for d in range(NDEV):
            np.testing.assert_array_equal(got[d], x[box(dst, d)], err_msg=f"{src} -> {dst} {steps} device {d}")
    assert done >= 0.6 * len(pairs)  # the rest (mesh axes permuted within a dimension...) are left to XLA


@pytest.mark.parametrize("src,dst,kinds", [
    ((("a",), ()), ((), ("a",)), ["a2a"]),
    ((("a", "b", "c"), ()), ((), ("a", "b", "c")), ["a2a"]),
    ((("a",), ()), ((), ("a", "c")), ["a2a"]),  # keeps its c-part first: moves only what it needs
    ((("a",), ("b",)), ((), ()), ["gather", "gather"]),
    (((), ()), (("b",), ("a", "c")), ["slice", "slice"]),
    ((("c",), ()), (("a", "b", "c"), ()), ["move"]),
])
def test_relayout_picks_the_collectives_that_move_least(src, dst, kinds):
    steps = relayout(src, dst, SIZES, (16, 8))
    assert [s[0] for s in steps] == kinds
    x = np.arange(128.0).reshape(16, 8)
    got = simulate([x[box(src, d, (16, 8))] for d in range(NDEV)], steps)
    for d in range(NDEV):
        np.testing.assert_array_equal(got[d], x[box(dst, d, (16, 8))])


def test_block_moves_skip_devices_holding_their_target():
    """(c) -> (a, b, c) on 64 rows: a device's 8-row target lies in its own 32-row tile when
    its a and c coordinates agree (4 of 8), the others receive one tile each."""
    tile, local, rounds = block_moves((("c",), ()), (("a", "b", "c"), ()), SIZES, (64, 4))
    assert tile == (8, 4) and sum(o is not None for o in local) == 4
    assert sum(len(pairs) for pairs, _, _ in rounds) == 4
    assert block_moves((("a",), ()), ((), ()), SIZES, (64, 4)) is None  # a gather, not a permutation


def test_one_all_to_all_moves_axes_to_two_dimensions():
    """(-, -, a b c) -> (a b, c, -) (the Transformer mesh plan's embedding sum): one
    all-to-all over a, b, c, each device keeping 1/8 and sending the rest once."""
    shape = (8, 16, 32)
    steps = relayout(((), (), ("a", "b", "c")), (("a", "b"), ("c",), ()), SIZES, shape)
    assert [s[0] for s in steps] == ["a2a2"]
    x = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    got = simulate([x[box(((), (), ("a", "b", "c")), d, shape)] for d in range(NDEV)], steps)
    for d in range(NDEV):
        np.testing.assert_array_equal(got[d], x[box((("a", "b"), ("c",), ()), d, shape)])


def test_one_all_to_all_moves_axes_from_two_dimensions():
    """(a b, c, -) -> (-, -, a b c): the gradient's way back, one all-to-all over a, b, c."""
    shape = (8, 16, 32)
    src, dst = (("a", "b"), ("c",), ()), ((), (), ("a", "b", "c"))
    steps = relayout(src, dst, SIZES, shape)
    assert [s[0] for s in steps] == ["a2a2m"]
    x = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    got = simulate([x[box(src, d, shape)] for d in range(NDEV)], steps)
    for d in range(NDEV):
        np.testing.assert_array_equal(got[d], x[box(dst, d, shape)])


@pytest.mark.parametrize("src,dst,shape", [
    ((("a", "b", "c"), ()), ((), ("a", "c")), (64, 32)),  # the CNN mesh plan's flatten: target replicated over b
    ((("a", "c"), ("b",), ()), ((), (), ("a", "b", "c")), (8, 16, 32)),  # the Transformer's embedding sum
    (((), (), ("a", "b", "c")), (("a", "c"), ("b",), ()), (8, 16, 32)),  # and its gradient's way back
])
def test_one_all_to_all_exchanges_tiles_in_another_axis_order(src, dst, shape):
    """Tiles in another mesh-axis order: each device cuts its tile into the equal pieces the
    target tiles need and one all-to-all over the source's axes sends them (each device
    receiving its target tile less the piece it holds)."""
    steps = relayout(src, dst, SIZES, shape)
    assert [s[0] for s in steps] == ["exchange"]
    group_axes, piece, tile, _, _ = steps[0][1]
    assert set(group_axes) == {a for axes in src for a in axes}
    assert len(list(itertools.product(*[range(SIZES[a]) for a in group_axes]))) * np.prod(piece) == np.prod(tile)
    x = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    got = simulate([x[box(src, d, shape)] for d in range(NDEV)], steps)
    for d in range(NDEV):
        np.testing.assert_array_equal(got[d], x[box(dst, d, shape)])


def test_exchange_refuses_unequal_pieces():
    """(a b c) -> (c): a target half meets only half the source tiles (the others' pieces are
    empty), so one all-to-all would move more than the plan: left to XLA."""
    assert relayout((("a", "b", "c"), ()), (("c",), ()), SIZES, (16, 8)) is None


def test_relayout_refuses_tiles_that_do_not_divide():
    assert relayout((("a",), ()), ((), ("a", "b")), SIZES, (16, 6)) is None


PARTIAL_CASES = [
    (((), ()), ("a", "b", "c"), (("a", "b", "c"), ())),         # data parallelism: one reduce-scatter
    ((("c",), ()), ("a", "b"), (("a", "b", "c"), ())),           # scattered, then tiles permuted
    (((), ("a", "b")), ("c",), (("a", "b", "c"), ())),           # scattered along the other dimension
    ((("a",), ()), ("b", "c"), (("a",), ())),                     # stored replicated over b, c: all-reduce
    (((), ()), ("a",), ((), ("a",))),
    (((), ()), ("a",), (("a", "b", "c"), ())),                   # replicated over b, c: each keeps its part first
    (((), ()), ("b",), (("a", "b", "c"), ())),                   # a replicated axis before the partial one
    (((), ("c",)), ("a",), (("b", "a"), ("c",))),
]


@pytest.mark.parametrize("spec,summed,stored", PARTIAL_CASES)
def test_partial_sums_reduced_into_the_stored_layout(spec, summed, stored):
    shape = (16, 8)
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape)
    tiles = summands(x, spec, summed, rng)  # the P-group's members hold random summands of the tile
    tile = tiles[0].shape
    scatters, left, out_spec, _ = reduction(spec, summed, stored, tile, SIZES, shape)
    for j, axes, run in scatters:  # reduce-scatter: the group's sum, this device's chunk along j
        new = []                   # (chunk `index` in the order of `run`, replicated axes included)
        for d in range(NDEV):
            total = sum(tiles[e] for e in group(d, axes))
            size = total.shape[j] // int(np.prod([SIZES[a] for a in run]))
            new.append(take(total, j, index(d, run) * size, size))
        tiles = new
    if left:
        tiles = [sum(tiles[e] for e in group(d, left)) for d in range(NDEV)]
    steps = relayout(out_spec, stored, SIZES, shape)
    assert steps is not None
    got = simulate(tiles, steps)
    for d in range(NDEV):
        np.testing.assert_allclose(got[d], x[box(stored, d, shape)], atol=1e-12)
    if stored == (("a", "b", "c"), ()):
        assert not left  # reduce-scattered, never all-reduced


def test_spec_of_reads_mesh_tiles_and_refuses_others():
    full = (16, 8)
    for spec in [(("a",), ("b", "c")), (("c", "a"), ()), ((), ())]:
        boxes = [tuple(zip(*[(s.start, s.stop) for s in box(spec, d, full)])) for d in range(NDEV)]
        assert spec_of(boxes, full, [2, 2, 2], AXES) == spec
    halo = [((max(0, 2 * d - 1), 0), (2 * d + 2, 8)) for d in range(NDEV)]
    assert spec_of(halo, full, [2, 2, 2], AXES) is None


def test_reduce_partial_in_jax_moves_only_the_stored_pieces():
    """The same reductions run by JAX (node_map.reduce_partial inside a shard_map on 8 host
    devices, float64): every device ends with its stored tile of the sum, and a partial
    summed over axis a of a tile replicated over b and c but stored split over all three
    reduce-scatters only the pieces the pairs store (16 x 8 float64 = 1024 B: 8 devices each
    send an eighth, 1024 B in all; a reduce-scatter over a alone would send 4096)."""
    pytest.importorskip("jax", reason="jax is not installed (pip install 'autotile[jax]'; CI installs it)")
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "jax_reduce_check.py")],
                          input=json.dumps(PARTIAL_CASES), capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout)
    for i, case in enumerate(PARTIAL_CASES):
        assert got[str(i)]["err"] < 1e-12, (case, got[str(i)])
    weight_grad = PARTIAL_CASES.index((((), ()), ("a",), (("a", "b", "c"), ())))
    assert got[str(weight_grad)]["bytes"] == got[str(weight_grad)]["reduce_scatter_bytes"] == 1024
    # a boolean partial sum is their logical or, reduced in bytes as the plan counts it (was int32: 3584 B)
    assert got["bool"] == {"equal": True, "bytes": 8 * 7 * 16}


def test_reshape_reads_the_exact_run_of_its_output_tile():
    """jax/reshape_tiles.py: an output box that is one row-major run reads the input box
    holding exactly that run (oracle: the elements of np.arange reshaped both ways); a box
    that is no run, or whose run is no input box, gives None."""
    from autotile.jax.reshape_tiles import exact_input_boxes, flat_run

    rng, found = np.random.default_rng(0), 0
    cases = [((24, 96), (4, 6, 96)), ((8, 6, 16), (4, 2, 6, 16)), ((24,), (4, 1, 1, 6)), ((4, 6, 32), (24, 32))]
    for in_shape, out_shape in cases:
        x = np.arange(int(np.prod(in_shape)))
        whole_in, whole_out = x.reshape(in_shape), x.reshape(out_shape)
        for _ in range(200):
            lo = [int(rng.integers(0, n)) for n in out_shape]
            hi = [int(rng.integers(a + 1, n + 1)) for a, n in zip(lo, out_shape)]
            got = exact_input_boxes([(tuple(lo), tuple(hi))], in_shape, out_shape)
            want = whole_out[tuple(slice(a, b) for a, b in zip(lo, hi))].reshape(-1)
            contiguous = bool(np.all(np.diff(want) == 1))
            if flat_run(lo, hi, out_shape) is None:
                assert got is None and not contiguous
                continue
            assert contiguous
            if got is None:  # a run that is no box of the input
                continue
            (ilo, ihi), = got
            assert np.array_equal(whole_in[tuple(slice(a, b) for a, b in zip(ilo, ihi))].reshape(-1), want)
            found += 1
    assert found > 20
    # GPT-2's split: output (1, 3, 96) tiles of (4, 6, 96) read 3 rows of (24, 96), not a hull of 6
    assert exact_input_boxes([((0, 3, 0), (1, 6, 96))], (24, 96), (4, 6, 96)) == [((3, 0), (6, 96))]
    assert exact_input_boxes([((0, 0, 0), (2, 3, 96))], (24, 96), (4, 6, 96)) is None  # rows 0-3 and 6-9
