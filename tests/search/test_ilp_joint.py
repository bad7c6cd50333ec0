"""The recursive search against the joint optimum of all cuts (planner/ilp_joint.py, issue #14).

Oracles: with one cut the joint program is the cut problem itself, whose optimum the DP finds
(checked against bruteforce and the per-cut ILP elsewhere), so the two must be equal; the
program's edge tables evaluated at tofu's own plan must give tofu's cost (the joint program
prices plans as the recursion does); the joint solution is priced back independently by the
core's price_plan (inside joint_optimum). Then tofu >= joint optimum on MLPs, CNNs and
residual nets at 4 and 8 devices; the gap is what the recursion loses."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autotile import _core
from autotile.planner.ilp_joint import joint_optimum

from .graphs import conv_net, mlp, residual
from .random_graphs import RandomGraph

GRAPHS = {
    "mlp2": lambda: mlp(2, batch=32, units=48, relu=True, data_grad=True),
    "mlp3": lambda: mlp(3, batch=16, units=32, relu=True),
    "conv2": lambda: conv_net(8, 4, 16),
    "residual": lambda: residual(16, 32),
}


def _cost_at(problem, tensor_tilings, node_strategies):
    """The joint program's objective at a given plan (tilings and strategies per cut)."""
    values = [None] * len(problem["domain"])
    for t, seq in enumerate(tensor_tilings):
        v = problem["tensor_var"][t]
        values[v] = problem["tensor_values"][v].index(list(seq))
    total = 0.0
    for n, edges in enumerate(problem["edges"]):
        o = problem["node_values"][n].index(list(node_strategies[n]))
        total += sum(float(np.asarray(c)[o, values[v]]) for v, c in edges)
    return total


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_one_cut_joint_equals_tofu(name):
    b = GRAPHS[name]()
    tofu = _core.plan_graph(b.g, 2, "tofu", strategy_provider=b.mock)
    joint = joint_optimum(b.g, 2, strategy_provider=b.mock)
    assert joint["optimal"]
    assert joint["total_bytes"] == pytest.approx(tofu["total_bytes"], rel=1e-9, abs=1e-6)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_one_cut_joint_equals_tofu_on_random_graphs(data):
    b = RandomGraph(data, max_ops=10).b
    tofu = _core.plan_graph(b.g, 2, "tofu", strategy_provider=b.mock)
    joint = joint_optimum(b.g, 2, strategy_provider=b.mock, time_limit=60)
    assert joint["optimal"]
    assert joint["total_bytes"] == pytest.approx(tofu["total_bytes"], rel=1e-9, abs=1e-6)


@pytest.mark.parametrize("name", sorted(GRAPHS))
@pytest.mark.parametrize("devices", [4, 8])
def test_joint_program_prices_tofus_plan_as_the_recursion_does(name, devices):
    b = GRAPHS[name]()
    tofu = _core.plan_graph(b.g, devices, "tofu", strategy_provider=b.mock)
    problem = _core.joint_problem(b.g, devices, strategy_provider=b.mock)
    assert _cost_at(problem, tofu["tensor_tilings"], tofu["node_strategies"]) == pytest.approx(
        tofu["total_bytes"], rel=1e-9, abs=1e-6)


#: tofu / joint optimum measured on these graphs (the recursion's loss; 1.0 = none). A change in
#: the search or the cost model that moves them shows up here.
@pytest.mark.parametrize("name", sorted(GRAPHS))
@pytest.mark.parametrize("devices", [4, 8])
def test_tofu_is_never_below_the_joint_optimum(name, devices):
    b = GRAPHS[name]()
    tofu = _core.plan_graph(b.g, devices, "tofu", strategy_provider=b.mock)
    joint = joint_optimum(b.g, devices, strategy_provider=b.mock, time_limit=120)
    assert joint["optimal"], joint
    assert tofu["total_bytes"] >= joint["total_bytes"] * (1 - 1e-9) - 1e-6
    gap = tofu["total_bytes"] / joint["total_bytes"] - 1 if joint["total_bytes"] else 0.0
    print(f"{name} on {devices}: tofu {tofu['total_bytes']:.0f} B, joint {joint['total_bytes']:.0f} B, "
          f"gap {gap:.1%}, {joint['columns']} columns, {joint['seconds']:.2f} s")
    # the joint plan is a valid plan: price_plan accepted it and its cut costs add up
    priced = _core.price_plan(b.g, devices, joint["tensor_tilings"], joint["node_strategies"],
                              strategy_provider=b.mock)
    assert sum(priced["cut_costs"]) == pytest.approx(joint["total_bytes"])


def test_recursion_loses_on_a_three_layer_mlp_at_4_devices():
    """A measured case where the recursion is not optimal in its own cost model: both plans pay
    8192 B at the first cut (a tie among the first cut's optima), but the one the DP keeps leaves
    the second cut 10240 B where another costs 8192 B (16384 B in all against tofu's 18432 B).
    The recursion cannot see which of the tied first cuts is better for the cuts after it; tofu's
    refinement across cuts reaches the optimum (test_cut_refine.py)."""
    b = GRAPHS["mlp3"]()
    tofu = _core.plan_graph(b.g, 4, "tofu", strategy_provider=b.mock, refine=False)
    joint = joint_optimum(b.g, 4, strategy_provider=b.mock)
    priced = _core.price_plan(b.g, 4, joint["tensor_tilings"], joint["node_strategies"], strategy_provider=b.mock)
    assert tofu["cut_costs"] == [8192.0, 10240.0]
    assert priced["cut_costs"] == [8192.0, 8192.0]
    assert joint["total_bytes"] == 16384.0


def test_too_large_a_joint_program_is_refused_naming_the_tensor():
    b = GRAPHS["mlp2"]()
    with pytest.raises(Exception, match="the joint problem would give tensor '.*' .* sequences"):
        _core.joint_problem(b.g, 8, strategy_provider=b.mock, max_values=10)
