"""Arena offsets of the static memory plan (csrc/exec/arena_fit.h, issue #24) against the planner
they replaced, re-implemented here: for each block, largest first, gather the placed blocks it
may not share memory with, sort them by offset and take the smallest gap that holds it
(O(G^2 log G) per device). The core keeps the placed blocks ordered instead, ends a pass at an
exact fit and places devices with equal blocks once; the offsets, and so the peaks, must not
change. The blocks (a buffer and those that took its memory in place) are read back from the
execution graph's buffers: members of a block share an offset and follow one another in time."""
import numpy as np
import pytest

import autotile as at
from autotile.execgraph import transform
from models import MODELS
from random_plans import lowered_training_graph, random_plan

ALIGN = 64
FOREVER = (2 ** 63 - 1) // 4  # live_end of what is read at the end of the step


def device_blocks(eg, device):
    """[(size, begin, end, member buffer ids)] of `device`'s arena, in the planner's order (by
    the first member's live_begin, then buffer id)."""
    bufs = eg.buffers
    ids = sorted((i for i, b in enumerate(bufs) if b["device"] == device and not b.get("host")),
                 key=lambda i: bufs[i]["live"][0])
    blocks, last_at = [], {}  # offset -> the block last opened there
    for i in ids:
        b = bufs[i]
        begin, end = b["live"]
        k = last_at.get(b["offset"])
        if k is not None:
            tail = bufs[blocks[k][3][-1]]
            if tail["live"][1] == begin and tail["bytes"] == b["bytes"]:  # took the tail's memory in place
                blocks[k][3].append(i)
                blocks[k][2] = max(blocks[k][2], end)
                continue
        last_at[b["offset"]] = len(blocks)
        blocks.append([(max(b["bytes"], 1) + ALIGN - 1) // ALIGN * ALIGN, begin, end, [i]])
    return blocks


def node_ancestors(lowered):
    """Per core node: the set of nodes it depends on through data."""
    g = lowered.core
    producer = {}
    for n in range(g.num_nodes):
        for t in g.node(n)["outputs"]:
            producer[t] = n
    anc = {}

    def of(n):
        if n not in anc:
            anc[n] = set()
            for t in g.node(n)["inputs"]:
                p = producer.get(t)
                if p is not None:
                    anc[n] |= of(p) | {p}
        return anc[n]

    for n in range(g.num_nodes):
        of(n)
    return anc


def reference_offsets(eg, blocks, dataflow):
    """The pre-#24 placement of `blocks`; with `dataflow`, memory passes from one block to a
    later one only when every writer of the later depends (in the training graph) on every
    reader of the earlier."""
    bufs, ops = eg.buffers, eg.ops
    anc = node_ancestors(eg.lowered) if dataflow else None

    def reusable(o, b):
        if bufs[o]["live"][1] >= FOREVER:
            return False
        if not dataflow:
            return True
        if bufs[b]["producer"] < 0:
            return False
        nb = ops[bufs[b]["producer"]]["node"]
        return all(ops[r]["node"] == nb or ops[r]["node"] in anc[nb] for r in bufs[o]["readers"])

    def conflict(g, h):
        if g[1] <= h[2] and h[1] <= g[2]:
            return True
        first, second = (g, h) if g[2] < h[1] else (h, g)
        return any(not reusable(e, l) for e in first[3] for l in second[3])

    order = sorted(range(len(blocks)), key=lambda i: (-blocks[i][0], blocks[i][1]))
    offsets, placed = [None] * len(blocks), []
    for gi in order:
        g = blocks[gi]
        used = sorted((offsets[p], offsets[p] + blocks[p][0]) for p in placed if conflict(g, blocks[p]))
        end, best, best_gap = 0, -1, 0
        for lo, hi in used:
            if lo - end >= g[0] and (best < 0 or lo - end < best_gap):
                best, best_gap = end, lo - end
            end = max(end, hi)
        offsets[gi] = best if best >= 0 else end
        placed.append(gi)
    return offsets


def assert_reference_placement(eg, dataflow):
    """Every device's offsets and arena equal the reference's; returns the blocks placed."""
    placed = 0
    for dev in range(eg.devices):
        blocks = device_blocks(eg, dev)
        want = reference_offsets(eg, blocks, dataflow)
        for (size, begin, end, members), offset in zip(blocks, want):
            got = eg.buffers[members[0]]["offset"]
            assert got == offset, f"device {dev}: block of buffers {members} ({size} B, live {begin}..{end}) " \
                                  f"at {got}, the reference puts it at {offset}"
        assert eg.peak_memory(dev) == max((o + b[0] for o, b in zip(want, blocks)), default=0)
        placed += len(blocks)
    return placed


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("control_deps", [True, False])
def test_offsets_equal_the_reference(model, control_deps):
    sym, shapes, _ = MODELS[model]()
    plan = at.plan(sym, devices=4, shapes=shapes)
    assert assert_reference_placement(transform(sym, plan, control_deps=control_deps), not control_deps) > 0


@pytest.mark.parametrize("seed", range(8))
def test_offsets_equal_the_reference_for_random_plans(seed):
    # random tilings give devices different schedules (the core then places them apart)
    rng = np.random.default_rng(100 + seed)
    name = sorted(MODELS)[seed % len(MODELS)]
    sym, shapes, _ = MODELS[name]()
    plan = random_plan(lowered_training_graph(sym, shapes), [2, 2], rng, input_shapes=shapes)
    control_deps = seed % 3 != 0
    assert_reference_placement(transform(sym, plan, control_deps=control_deps), not control_deps)


@pytest.mark.parametrize("weight", [0.0, 4.0])
def test_offsets_equal_the_reference_on_a_transformer(weight):
    # hundreds of blocks per device, many of equal size (the ties of the largest-first order);
    # a memory weight as the budgeted search tries them
    from autotile import _core
    from autotile.execgraph.graph import ExecGraph
    from autotile.planner import lowered_training_graph as lowered_of

    _, _, _, low = lowered_of(at.models.get("gpt2", layers=2, d_model=64, heads=2, seq=16, batch=4, vocab=128))
    raw = _core.plan_graph(low.core, 4, "tofu", None, False, memory_weight=weight)
    core = _core.build_exec_graph(low.core, raw["factors"], raw["tensor_tilings"], raw["node_strategies"], True)
    assert assert_reference_placement(ExecGraph(core, low, None, None), False) > 400
