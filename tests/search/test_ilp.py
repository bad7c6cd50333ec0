"""The one-cut DP against the exact integer program of each cut (planner/ilp.py, HiGHS):
equal costs on graphs far beyond what bruteforce can enumerate -- random graphs with up to
40 ops (fan-out, residual adds, halos, rank-changing reductions, timestep-shared cells), deep
MLPs, and the zoo's CNNs (training graphs) at 2 to 8 devices. And algorithm="ilp" plans whole
models: its per-cut costs equal tofu's and its plan prices back to its own cost."""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autotile as at
from autotile import _core
from autotile.planner import ilp, lowered_training_graph

from .graphs import mlp
from .random_graphs import RandomGraph


def _dp_vs_ilp(g, devices, **kw):
    log = []
    checks = _core._check_cuts_against_bruteforce(g, devices, cut_solver=ilp.make_cut_solver(log=log), **kw)
    for stats in log:
        assert stats["status"] == 0, stats  # optimal, not a time-limited incumbent
    return checks


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), devices=st.sampled_from([2, 4, 8]))
def test_dp_equals_ilp_on_random_graphs_beyond_bruteforce(data, devices):
    b = RandomGraph(data, max_ops=40).b
    for dp, exact in _dp_vs_ilp(b.g, devices, strategy_provider=b.mock):
        assert dp == pytest.approx(exact, rel=1e-9, abs=1e-6)


@pytest.mark.parametrize("layers", [6, 16])
@pytest.mark.parametrize("devices", [2, 8])
def test_dp_equals_ilp_on_deep_mlps(layers, devices):
    b = mlp(layers, batch=32, units=48, relu=True, data_grad=True)
    for dp, exact in _dp_vs_ilp(b.g, devices, strategy_provider=b.mock):
        assert dp == pytest.approx(exact, rel=1e-9, abs=1e-6)


@pytest.mark.parametrize("model, batch, devices", [("alexnet", 32, 8), ("vgg16", 32, 4), ("wresnet-50-1", 8, 2)])
def test_dp_equals_ilp_on_zoo_training_graphs(model, batch, devices):
    *_, lowered = lowered_training_graph(model, batch=batch)
    checks = _dp_vs_ilp(lowered.core, devices)
    assert len(checks) == len(_core.factorize(devices))
    for dp, exact in checks:
        assert dp == pytest.approx(exact, rel=1e-9, abs=1e-6)


def test_ilp_algorithm_plans_like_tofu():
    sym = at.models.get("alexnet", batch=64)
    tofu = at.plan(sym, devices=4, batch=64, refine=False)  # the recursion, cut by cut like the ILP
    exact = at.plan(sym, devices=4, batch=64, algorithm="ilp")
    assert exact.algorithm == "ilp"
    assert exact.cut_costs == pytest.approx(tofu.cut_costs, rel=1e-9)


def test_solver_answer_is_checked_by_the_core():
    b = mlp(2, batch=8, units=8)
    with pytest.raises(at.Error, match="returned 0 values"):
        _core.plan_graph(b.g, 2, "ilp", strategy_provider=b.mock, cut_solver=lambda problem: [])
    with pytest.raises(at.Error, match="outside its domain"):
        _core.plan_graph(b.g, 2, "ilp", strategy_provider=b.mock,
                         cut_solver=lambda problem: [d for d in problem["domain"]])

    def fails(problem):
        raise ValueError("solver broke")

    with pytest.raises(ValueError, match="solver broke"):
        _core.plan_graph(b.g, 2, "ilp", strategy_provider=b.mock, cut_solver=fails)
