"""Collectives in stages (csrc/exec/exec_build.cc: reduce-scatter by recursive halving,
gathers by recursive doubling, one cut at a time) give the same step as one MultiFetch per
region, move exactly the same bytes, and keep the pieces per device to the sum of the cut
factors instead of their product (what lets 4096 devices build and run; bench/scaling.py).

Staging normally starts above 8 devices per group; these tests force it on every group
(stage_above=1) so that small plans, random ones included, run through it."""
import numpy as np
import pytest

import autotile as at
from autotile import _core
from autotile.backend.multi_device import run_multi_device
from random_plans import random_plan

_build = _core.build_exec_graph


@pytest.fixture
def staged(monkeypatch):
    """transform() builds with stage_above=1 while the fixture is active."""
    monkeypatch.setattr(_core, "build_exec_graph", lambda *a, **k: _build(*a, **{**k, "stage_above": 1}))


def _fc(hidden=8, inputs=16):
    data = at.sym.Variable("data")
    fc = at.sym.FullyConnected(data, num_hidden=hidden, name="fc")
    return at.sym.SoftmaxOutput(fc, name="softmax")


def _fc_values(batch, rng):
    return {"data": rng.standard_normal((batch, 16)).astype(np.float32),
            "softmax_label": rng.integers(0, 8, batch).astype(np.float32),
            "fc_weight": (rng.standard_normal((8, 16)) * 0.3).astype(np.float32),
            "fc_bias": rng.standard_normal(8).astype(np.float32)}


def _assert_same(res, ref):
    """Outputs, gradients, updated params, optimizer and BatchNorm states (models.assert_same_step)."""
    from models import assert_same_step

    assert_same_step(res, ref, "staged")


def _pieces_per_op(eg):
    return max(len(o["pieces"]) for o in eg.ops if o["kind"] == "fetch")


def test_data_parallel_64_devices_staged_equals_one_device():
    """64 devices (six 2-way cuts): the weight gradient's reduce-scatter and the updated
    weights' gather run in stages by default; same step as one device, same bytes as the plan."""
    net = _fc()
    rng = np.random.default_rng(0)
    vals = _fc_values(256, rng)
    shapes = {"data": (256, 16), "softmax_label": (256,)}
    plan = at.plan(net, devices=64, shapes=shapes, algorithm="data")
    eg = at.transform(net, plan)
    assert eg.stats()["bytes"] == pytest.approx(plan.comm_bytes)
    flat = at.execgraph.ExecGraph(
        _build(eg.lowered.core, plan.factors, [plan.tensor_tilings[n] for n in eg.lowered.tensor_names],
               [plan.node_strategies[n] for n in eg.lowered.node_names], True, 0, 1 << 30),
        eg.lowered, eg.training, plan)
    assert flat.stats()["bytes"] == eg.stats()["bytes"]
    # one MultiFetch per region pulls from all 64 holders; in stages at most 2 per cut (+1 own)
    assert _pieces_per_op(flat) == 64
    assert _pieces_per_op(eg) <= 2 * len(plan.factors)
    ref = at.backend.run(net, inputs={k: vals[k] for k in shapes},
                         params={k: v for k, v in vals.items() if k not in shapes}, train=True)
    _assert_same(run_multi_device(net, 64, vals, plan=plan), ref)


@pytest.mark.parametrize("model,factors", [("mlp", [2, 2, 2]), ("mlp", [3, 2]), ("mlp", [2, 3, 2]),
                                           ("cnn", [2, 2, 2]), ("residual", [2, 2]), ("concat", [2, 3]),
                                           ("bn", [2, 2, 2])])
def test_random_plans_staged_equal_one_device_and_move_the_same_bytes(staged, model, factors):
    """Random plans re-layout, gather and reduce every way the plan format allows; with every
    collective staged the step equals one device's and the bytes equal the unstaged graph's."""
    from models import random_plan_case

    sym, shapes, vals, low, ref = random_plan_case(model)
    rng = np.random.default_rng(len(factors) * 11 + sum(factors))
    for _ in range(3):
        plan = random_plan(low, factors, rng, input_shapes=shapes)
        eg = at.transform(sym, plan)
        flat = _build(eg.lowered.core, plan.factors, [plan.tensor_tilings[n] for n in eg.lowered.tensor_names],
                      [plan.node_strategies[n] for n in eg.lowered.node_names], True, 0, 1 << 30)
        assert eg.core.bytes_moved == flat.bytes_moved
        _assert_same(run_multi_device(sym, plan.devices, vals, plan=plan), ref)


def test_staged_searched_plans_equal_one_device(staged):
    """Plans the search finds for a CNN on 8 devices (batch, channel and spatial splits)."""
    from models import MODELS, values

    sym, shapes, classes = MODELS["cnn"]()
    vals = values(sym, shapes, classes)
    ref = at.backend.run(sym, inputs={k: vals[k] for k in shapes},
                         params={k: v for k, v in vals.items() if k not in shapes}, train=True)
    for algorithm in ("tofu", "data", "owt"):
        plan = at.plan(sym, devices=8, shapes=shapes, algorithm=algorithm)
        res = run_multi_device(sym, 8, vals, plan=plan)
        assert res.stats["bytes"] == pytest.approx(plan.comm_bytes), algorithm
        _assert_same(res, ref)
