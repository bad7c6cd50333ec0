"""Hierarchical collectives (ExecOptions::hierarchical_above, csrc/exec/exec_convert.cc and
staged_collectives.cc): reductions sum over the innermost cut first, gathers copy over the
outermost cut first, re-indexing the plan's slabs where they need it, so that the first cuts
(the links between nodes) carry the smallest pieces.

Oracles: the single-device step (the numbers must not change), the flat build of the same plan
(total bytes within the re-indexing copies, 1/K of a tensor each) and a count of the bytes
whose source and destination differ in the first cut's digit, against the two-level
all-reduce's own figure."""
import numpy as np
import pytest

import autotile as at
from autotile import _core
from autotile.backend.multi_device import run_multi_device
from random_plans import random_plan

_build = _core.build_exec_graph


@pytest.fixture
def hierarchical(monkeypatch):
    """transform() builds every collective hierarchically while the fixture is active."""
    monkeypatch.setattr(_core, "build_exec_graph", lambda *a, **k: _build(*a, **{**k, "hierarchical_above": 0}))


def _outer_bytes(eg, factors):
    """Bytes fetched between devices whose first cut digit differs (the outer link)."""
    stride = int(np.prod(factors[1:]))
    total = 0
    for i in range(eg.num_ops):
        op = eg.op(i)
        if op["kind"] != "fetch":
            continue
        dst = eg.buffer(op["outputs"][0])["device"]
        for src_buf, lo, hi in op["pieces"]:
            src = eg.buffer(src_buf)
            if src["device"] // stride != dst // stride:
                total += int(np.prod([h - l for l, h in zip(lo, hi)])) * (src["bytes"] // max(1, int(np.prod(
                    [h - l for l, h in zip(src["lo"], src["hi"])]))))
    return total


def _fc_net():
    data = at.sym.Variable("data")
    fc = at.sym.FullyConnected(data, num_hidden=64, name="fc")
    return at.sym.SoftmaxOutput(fc, name="softmax")


def _data_parallel_64():
    """The FC net planned data parallel on 64 devices, its lowered graph and the build arguments."""
    net = _fc_net()
    shapes = {"data": (256, 128), "softmax_label": (256,)}
    plan = at.plan(net, devices=64, shapes=shapes, algorithm="data")
    low = at.transform(net, plan).lowered
    return plan, low, (low.core, plan.factors, [plan.tensor_tilings[n] for n in low.tensor_names],
                       [plan.node_strategies[n] for n in low.node_names])


def test_data_parallel_weight_sync_crosses_the_outer_cut_once_per_slab():
    """Data parallelism on 64 devices (six 2-way cuts): the weight gradient's reduce-scatter and
    the updated weight's gather. Flat, the first stage crosses the outer cut with half the
    weight per device; hierarchically each device sends its 1/64 slab across: the outer cut
    carries 1/32 of the flat build's bytes of those collectives, the total stays within one
    re-indexing copy of each weight."""
    plan, low, args = _data_parallel_64()
    flat, hier = _build(*args), _build(*args, hierarchical_above=0)
    weight, bias = 64 * 128 * 4, 64 * 4
    # the weight's reduce-scatter and gather: flat, each of the 64 devices moves half of it
    # across the outer cut in each (64 x weight); hierarchically the outer stage of a two-level
    # all-reduce (each device 1/64 of it, 2 x weight over both) plus the re-indexing copies
    # (at most 1/64 of it per device each, 2 x weight), the bias's likewise
    assert _outer_bytes(flat, plan.factors) >= 64 * weight
    assert _outer_bytes(hier, plan.factors) <= 4 * (weight + bias)
    assert flat.bytes_moved <= hier.bytes_moved <= flat.bytes_moved + 2 * (weight + bias)


def test_hierarchical_data_parallel_step_equals_one_device(hierarchical):
    net = _fc_net()
    rng = np.random.default_rng(0)
    vals = {"data": rng.standard_normal((256, 128)).astype(np.float32),
            "softmax_label": rng.integers(0, 64, 256).astype(np.float32),
            "fc_weight": (rng.standard_normal((64, 128)) * 0.1).astype(np.float32),
            "fc_bias": rng.standard_normal(64).astype(np.float32)}
    shapes = {"data": (256, 128), "softmax_label": (256,)}
    plan = at.plan(net, devices=64, shapes=shapes, algorithm="data")
    ref = at.backend.run(net, inputs={k: vals[k] for k in shapes},
                         params={k: v for k, v in vals.items() if k not in shapes}, train=True)
    from models import assert_same_step

    assert_same_step(run_multi_device(net, 64, vals, plan=plan), ref, "hierarchical")


@pytest.mark.parametrize("model,factors", [("mlp", [2, 2, 2]), ("mlp", [3, 2]), ("mlp", [2, 3, 2]),
                                           ("cnn", [2, 2, 2]), ("residual", [2, 2]), ("concat", [2, 3]),
                                           ("bn", [2, 2, 2])])
def test_random_plans_hierarchical_equal_one_device(hierarchical, model, factors):
    """Random plans re-layout, gather and reduce every way the plan format allows; with every
    collective hierarchical the step equals one device's, and the bytes exceed the flat
    build's by at most one re-indexing copy of each tensor."""
    from models import assert_same_step, random_plan_case

    sym, shapes, vals, low, ref = random_plan_case(model)
    rng = np.random.default_rng(len(factors) * 13 + sum(factors))
    sizes = sum(int(np.prod(s)) * 4 for s in low.tensor_shapes)
    for _ in range(3):
        plan = random_plan(low, factors, rng, input_shapes=shapes)
        args = (low.core, plan.factors, [plan.tensor_tilings[n] for n in low.tensor_names],
                [plan.node_strategies[n] for n in low.node_names])
        flat, hier = _build(*args), _build(*args, hierarchical_above=0)
        assert flat.bytes_moved <= hier.bytes_moved <= flat.bytes_moved + 2 * sizes
        assert_same_step(run_multi_device(sym, plan.devices, vals, plan=plan), ref, "hierarchical")


def _weight_fetch_rounds(eg, low, device):
    """Fetch ops on `device` making the weight gradient's or the updated weight's buffers."""
    names = {low.tensor_names.index(n) for n in ("fc_backward1_output", "fc_weight_update_output")}
    return sum(1 for i in range(eg.num_ops) if eg.op(i)["kind"] == "fetch" and eg.op(i)["device"] == device
               and eg.buffer(eg.op(i)["outputs"][0])["tensor"] in names)


def test_one_stage_per_link_level():
    """64 devices as 8 nodes of 8 (cut levels [1, 1, 1, 0, 0, 0]): the weight's reduce-scatter
    into the update's slabs and the updated weight's gather run one stage per level (and each a
    re-indexing copy: 6 fetches), not one per cut (12 and more); bytes and outer-cut bytes as
    with a stage per cut."""
    plan, low, args = _data_parallel_64()
    per_cut = _build(*args, hierarchical_above=0)
    per_level = _build(*args, hierarchical_above=0, cut_levels=[1, 1, 1, 0, 0, 0])
    assert _weight_fetch_rounds(per_cut, low, 5) >= 12
    assert _weight_fetch_rounds(per_level, low, 5) <= 6
    assert per_level.bytes_moved == per_cut.bytes_moved
    assert _outer_bytes(per_level, [8, 8]) <= _outer_bytes(per_cut, [8, 8])  # between nodes
    with pytest.raises(at.Error, match="3 cut levels for 6 cuts"):
        _build(*args, cut_levels=[0, 0, 1])


@pytest.mark.parametrize("model,factors,levels", [
    ("mlp", [2, 2, 2], [1, 0, 0]), ("mlp", [2, 3, 2], [1, 1, 0]), ("mlp", [3, 2], [1, 0]),
    ("cnn", [2, 2, 2], [1, 0, 0]), ("cnn", [2, 2, 2], [1, 1, 0]), ("bn", [2, 2, 2], [1, 0, 0]),
    ("bn", [2, 2, 2], [1, 1, 0]), ("residual", [2, 2, 2], [1, 0, 0]), ("concat", [2, 3, 2], [1, 0, 0])])
def test_random_plans_two_levels_equal_one_device(monkeypatch, model, factors, levels):
    """Random plans with every collective hierarchical over two link levels (a level's cuts in
    one stage; partial sums kept across a cut, reductions, re-layouts): the step equals one
    device's."""
    from models import assert_same_step, random_plan_case

    monkeypatch.setattr(_core, "build_exec_graph",
                        lambda *a, **k: _build(*a, **{**k, "hierarchical_above": 0, "cut_levels": levels}))
    sym, shapes, vals, low, ref = random_plan_case(model)
    rng = np.random.default_rng(len(factors) * 17 + sum(factors) + sum(levels))
    for _ in range(4):
        plan = random_plan(low, factors, rng, input_shapes=shapes)
        assert_same_step(run_multi_device(sym, plan.devices, vals, plan=plan), ref, "two levels")
