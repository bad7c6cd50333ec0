"""Graphs too wide for the exact one-cut DP still get a plan (issue #14): torchvision's
DenseNet-121/169, whose dense layers each concatenate every earlier feature map of their
block, need DP tables over 2^26 entries; those cuts go to the integer program (planner/ilp.py,
with a time limit) and the plan says so, with its optimality gap. Inception-v3's branches stay
within the DP."""
import pytest

import autotile as at
from autotile.planner import ilp
from autotile.planner.plan import Plan

from .wide_models import densenet, inception_v3

DENSE_SHAPES = {"data": (32, 3, 224, 224), "softmax_label": (32,)}


@pytest.mark.slow  # ~20 s: one integer program over 136,000 columns
def test_densenet121_plans_through_the_integer_program():
    sym = densenet(121, 32)
    plan = at.plan(sym, devices=2, shapes=DENSE_SHAPES)
    assert plan.cut_solvers == ["ilp"] and plan.optimality_gaps == [0.0]
    assert "cut 1: too wide for the exact DP, solved by the integer program: optimal" in plan.summary()
    # One cut solved exactly: data parallelism restricts that same problem.
    data = at.plan(sym, devices=2, shapes=DENSE_SHAPES, algorithm="data")
    assert data.cut_solvers == ["dp"]
    assert plan.comm_bytes <= data.comm_bytes * (1 + 1e-9)
    assert at.transform(sym, plan).stats()["bytes"] == pytest.approx(plan.comm_bytes)


def test_without_scipy_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setattr(ilp, "wide_fallback", lambda log, time_limit=None: None)
    with pytest.raises(at.Error, match=r"too wide for the exact search.*install SciPy"):
        at.plan(densenet(121, 32), devices=2, shapes=DENSE_SHAPES)


def test_summary_reports_a_time_limited_cut():
    plan = Plan(algorithm="tofu", devices=4, factors=[2, 2], cut_costs=[1e6, 2e6], comm_bytes=3e6,
                search_seconds=1.0, tensor_tilings={}, node_strategies={}, cut_solvers=["dp", "ilp"],
                optimality_gaps=[0.0, 0.0123])
    assert "cut 2: too wide for the exact DP, solved by the integer program: within 1.23% of the optimum" \
        in plan.summary()
    assert Plan.from_json(plan.to_json()).optimality_gaps == [0.0, 0.0123]


@pytest.mark.parametrize("devices", [2, 8])
def test_inception_v3_stays_within_the_exact_dp(devices):
    shapes = {"data": (32, 3, 299, 299), "softmax_label": (32,)}
    plan = at.plan(inception_v3(32), devices=devices, shapes=shapes)
    assert plan.cut_solvers == ["dp"] * len(plan.factors)
    data = at.plan(inception_v3(32), devices=devices, shapes=shapes, algorithm="data")
    assert plan.cut_costs[0] <= data.cut_costs[0] * (1 + 1e-9)
    assert "too wide" not in plan.summary()


@pytest.mark.slow
@pytest.mark.parametrize("depth", [121, 169])
def test_densenets_plan_on_8_devices(depth):
    sym = densenet(depth, 32)
    plan = at.plan(sym, devices=8, shapes=DENSE_SHAPES)
    assert plan.cut_solvers == ["ilp"] * 3 and all(g is not None and g <= 1e-6 for g in plan.optimality_gaps)
    data = at.plan(sym, devices=8, shapes=DENSE_SHAPES, algorithm="data")
    assert plan.cut_costs[0] <= data.cut_costs[0] * (1 + 1e-9)
    assert plan.comm_bytes < data.comm_bytes


def test_wide_cut_program_drops_dominated_values_at_the_same_optimum():
    """A torch-exported 2-layer LSTM (unrolled: the shared weight slices, the per-step gradient
    sums and the layer-2 input tie every step) is too wide for the DP; the integer program it
    goes to is built without dominated values (search/dominance.h), so it is smaller, and its
    optimum is the full program's (algorithm 'ilp' solves the unreduced problem)."""
    import os

    from autotile import _core
    from autotile.planner import lowered_training_graph

    path = os.path.join(os.path.dirname(__file__), "..", "fixtures", "onnx_torch", "lstm_ts17.onnx")
    core = lowered_training_graph(at.onnx.load(path, batch_size=4))[3].core
    reduced, full = [], []
    wide = _core.plan_graph(core, 2, "tofu", cut_solver=ilp.make_cut_solver(log=reduced))
    exact = _core.plan_graph(core, 2, "ilp", cut_solver=ilp.make_cut_solver(log=full))
    assert len(reduced) == len(full) == 1 and reduced[0]["gap"] == full[0]["gap"] == 0.0
    assert reduced[0]["columns"] < full[0]["columns"]
    assert wide["cut_costs"] == pytest.approx(exact["cut_costs"], rel=1e-12)
