"""Recursive k-cuts: factorisation, per-cut costs, bandwidth weighting, the data baseline's
closed form and non-power-of-two device counts."""
import time

import pytest

from autotile import _core

from .graphs import conv_net, mlp, residual


def check_plan(plan, g, monotone=True):
    """Shape of the result dict and, with `monotone`, delta_i <= delta_(i+1) between cuts of equal
    k (Tofu App. A, Theorem 2, a property of the recursion: a 3-way cut followed by a 2-way one
    may legitimately cost more than it, and tofu's refinement across cuts may end elsewhere)."""
    cuts = len(plan["factors"])
    assert len(plan["cut_costs"]) == cuts
    assert plan["total_bytes"] == pytest.approx(sum(plan["cut_costs"]))
    assert len(plan["tensor_tilings"]) == g.num_tensors
    assert len(plan["node_strategies"]) == g.num_nodes
    assert all(len(t) == cuts for t in plan["tensor_tilings"])
    assert all(len(s) == cuts for s in plan["node_strategies"])
    for i in range(cuts - 1):
        if monotone and plan["factors"][i] == plan["factors"][i + 1]:
            assert plan["cut_costs"][i] <= plan["cut_costs"][i + 1] + 1e-6


def test_factorize():
    assert _core.factorize(1) == []
    assert _core.factorize(8) == [2, 2, 2]
    assert _core.factorize(6) == [3, 2]
    assert _core.factorize(12) == [3, 2, 2]
    assert _core.factorize(9) == [3, 3]
    assert _core.factorize(7) == [7]


@pytest.mark.parametrize("devices", [2, 4, 8, 16])
@pytest.mark.parametrize("algorithm", ["tofu", "data"])
def test_cut_costs_do_not_decrease(devices, algorithm):
    for b in (mlp(3, 64, 32, relu=True), conv_net(16, 8, 32), residual(32, 16)):
        recursion = _core.plan_graph(b.g, devices, algorithm, strategy_provider=b.mock, refine=False)
        check_plan(recursion, b.g)
        # the refined plan (tofu's default) is never dearer, and prices to its own cut costs
        plan = _core.plan_graph(b.g, devices, algorithm, strategy_provider=b.mock)
        check_plan(plan, b.g, monotone=False)
        assert plan["total_bytes"] <= recursion["total_bytes"] + 1e-6
        priced = _core.price_plan(b.g, devices, plan["tensor_tilings"], plan["node_strategies"],
                                  strategy_provider=b.mock)
        assert priced["cut_costs"] == pytest.approx(plan["cut_costs"])


@pytest.mark.parametrize("devices", [6, 12])
def test_non_power_of_two_devices(devices):
    b = mlp(3, 48, 24, relu=True)
    plan = _core.plan_graph(b.g, devices, "tofu", strategy_provider=b.mock)
    assert plan["factors"] == _core.factorize(devices)
    # Theorem 2 holds for the recursion; the refinement across cuts may end non-monotone
    # (12 devices: 3-2-2 cuts of 24,576 + 21,760 + 20,736 B against the recursion's 70,400 B)
    recursion = _core.plan_graph(b.g, devices, "tofu", strategy_provider=b.mock, refine=False)
    check_plan(recursion, b.g)
    check_plan(plan, b.g, monotone=False)
    assert plan["total_bytes"] <= recursion["total_bytes"] + 1e-6
    # every split is even: the dim left after dividing by the k of each split cut is whole
    for t, tilings in enumerate(plan["tensor_tilings"]):
        shape = list(b.g.tensor(t)["shape"])
        for k, tl in zip(plan["factors"], tilings):
            if tl.startswith("split("):
                d = int(tl[6:-1])
                assert shape[d] % k == 0
                shape[d] //= k
    priced = _core.price_plan(b.g, devices, plan["tensor_tilings"], plan["node_strategies"], strategy_provider=b.mock)
    assert priced["cut_costs"] == pytest.approx(plan["cut_costs"])
    data = _core.plan_graph(b.g, devices, "data", strategy_provider=b.mock)
    assert plan["total_bytes"] <= data["total_bytes"] + 1e-6


@pytest.mark.parametrize("devices", [2, 4, 8, 6])
def test_data_baseline_closed_form(devices):
    # Data parallelism all-reduces every weight gradient (reduce-scatter into the update,
    # all-gather of the new weights): 2 (K-1) bytes(W) in all, i.e. 2 (K-1)/K bytes(W) per
    # device, and the same for the scalar loss; activations never move.
    b = mlp(3, 24, 24, in_units=12, relu=True)
    plan = _core.plan_graph(b.g, devices, "data", strategy_provider=b.mock)
    weights = sum(b.g.tensor(t)["bytes"] for t in range(b.g.num_tensors) if b.g.tensor(t)["is_param"])
    assert plan["total_bytes"] == pytest.approx(2 * (devices - 1) * (weights + 4))
    for t, tilings in enumerate(plan["tensor_tilings"]):
        info = b.g.tensor(t)
        if info["is_param"]:
            assert set(tilings) == {"replicate"}
        elif info["gradient_of"] < 0 or not b.g.tensor(info["gradient_of"])["is_param"]:
            if info["shape"] and not info["name"].endswith("_w_next"):
                assert set(tilings) == {"split(0)"}


def test_bandwidths_weight_each_cut_slowest_link_first():
    b = mlp(3, 64, 32)
    # with bandwidths the cuts keep the recursion's order (no refinement across cuts)
    plain = _core.plan_graph(b.g, 4, "tofu", strategy_provider=b.mock, refine=False)
    assert plain["weighted_cost"] == pytest.approx(plain["total_bytes"])
    bw = [100e9, 10e9]  # any order: the first (cheapest) cut crosses the slowest link
    plan = _core.plan_graph(b.g, 4, "tofu", bandwidths=bw, strategy_provider=b.mock)
    d1, d2 = plan["cut_costs"]
    assert plan["weighted_cost"] == pytest.approx(d1 / 10e9 + d2 / 100e9)
    assert plan["total_bytes"] == pytest.approx(plain["total_bytes"])


def test_single_device_plan_is_empty():
    b = mlp(2, 8, 8)
    plan = _core.plan_graph(b.g, 1, "tofu", strategy_provider=b.mock)
    assert plan["factors"] == [] and plan["total_bytes"] == 0
    assert plan["tensor_tilings"] == [[]] * b.g.num_tensors


def test_deep_chain_is_fast():
    # ~1000 nodes: the DP state stays small on a chain, so the search is linear in its length.
    b = mlp(150, 64, 64, relu=True)
    t0 = time.perf_counter()
    plan = _core.plan_graph(b.g, 8, "tofu", strategy_provider=b.mock)
    assert plan["search_seconds"] < 2.0
    assert time.perf_counter() - t0 < 10.0  # includes the Python mock provider
    assert plan["num_groups"] < b.g.num_nodes + b.g.num_tensors
    check_plan(plan, b.g, monotone=False)  # refined across cuts
