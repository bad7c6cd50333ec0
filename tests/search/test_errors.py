"""Bad input raises autotile.Error naming what is at fault, quickly."""
import time

import pytest

from autotile import _core
from autotile.errors import Error

from .graphs import Builder, mlp


def test_devices_must_be_positive():
    b = mlp(1, 8, 8)
    for bad in (0, -2, 1.5, True):
        with pytest.raises(Error, match="devices"):
            _core.plan_graph(b.g, bad, "tofu", strategy_provider=b.mock)


def test_unknown_algorithm():
    b = mlp(1, 8, 8)
    with pytest.raises(Error, match="unknown search algorithm 'magic'"):
        _core.plan_graph(b.g, 2, "magic", strategy_provider=b.mock)


def no_tdl_graph():
    b = Builder()
    x = b.tensor("x", (8, 4))
    y = b.tensor("y", (8, 4))
    b.g.add_node("mystery", "Custom", [x], [y], "", "forward")
    return b


def test_node_without_tdl_needs_replicate_fallback():
    b = no_tdl_graph()
    with pytest.raises(Error, match="'mystery' \\(op Custom\\) has no TDL description"):
        _core.plan_graph(b.g, 2, "tofu")
    plan = _core.plan_graph(b.g, 2, "tofu", replicate_fallback=True)
    assert plan["node_strategies"] == [["replicate"]]
    assert plan["total_bytes"] == 0  # replicated input and output are free


def test_node_with_no_strategy_at_these_shapes_runs_replicated():
    # No dim divides 2 ways: the op runs whole on every device (a valid, redundant plan), with
    # or without replicate_fallback (which is about ops without TDL).
    b = Builder()
    x = b.tensor("x", (3, 5))
    y = b.tensor("y", (3, 5))
    b.g.add_node("odd", "Relu", [x], [y], "x -> y: y[i, j] = relu(x[i, j])", "forward")
    for fallback in (False, True):
        plan = _core.plan_graph(b.g, 2, "tofu", replicate_fallback=fallback)
        assert plan["node_strategies"] == [["replicate"]]
        assert plan["tensor_tilings"] == [["replicate"], ["replicate"]]
        assert plan["total_bytes"] == 0


def test_data_baseline_needs_a_divisible_batch():
    b = mlp(1, 6, 8)
    # batch 6 splits once (to 3); the second 2-way cut finds no batch split for the first op
    with pytest.raises(Error, match="node 'fc#l0' \\(op fc\\): no partition strategy allowed by 'data' for a "
                                    "2-way cut \\(cut 2\\) at input shapes \\(3, 8\\)"):
        _core.plan_graph(b.g, 4, "data", strategy_provider=b.mock)


def test_bruteforce_refuses_large_graphs_fast():
    b = mlp(12, 16, 16, relu=True)
    t0 = time.perf_counter()
    with pytest.raises(Error, match="bruteforce: cut 1 has .* tiling combinations"):
        _core.plan_graph(b.g, 2, "bruteforce", strategy_provider=b.mock)
    assert time.perf_counter() - t0 < 2.0


def test_bandwidths_must_match_the_cuts():
    b = mlp(1, 8, 8)
    with pytest.raises(Error, match="bandwidths has 1 entries but the plan has 2 cuts"):
        _core.plan_graph(b.g, 4, "tofu", bandwidths=[1e9], strategy_provider=b.mock)
    with pytest.raises(Error, match="bandwidths must be positive"):
        _core.plan_graph(b.g, 2, "tofu", bandwidths=[0], strategy_provider=b.mock)


def test_provider_errors_surface_unchanged():
    b = mlp(1, 8, 8)

    def broken(*args):
        raise ValueError("provider exploded")

    with pytest.raises(ValueError, match="provider exploded"):
        _core.plan_graph(b.g, 2, "tofu", strategy_provider=broken)


def test_price_plan_names_bad_entries():
    b = mlp(1, 8, 8)
    plan = _core.plan_graph(b.g, 2, "tofu", strategy_provider=b.mock)
    t, s = plan["tensor_tilings"], plan["node_strategies"]
    bad = [list(x) for x in t]
    bad[0] = ["split(7)"]
    with pytest.raises(Error, match="tensor 'data' \\(8, 8\\) cannot be split\\(7\\)"):
        _core.price_plan(b.g, 2, bad, s, strategy_provider=b.mock)
    bad[0] = ["diagonal"]
    with pytest.raises(Error, match="tensor 'data' cut 1: unknown tiling 'diagonal'"):
        _core.price_plan(b.g, 2, bad, s, strategy_provider=b.mock)
    bad_s = [list(x) for x in s]
    bad_s[0] = ["zz"]
    with pytest.raises(Error, match="node 'fc#l0' \\(op fc\\) has no strategy 'zz'"):
        _core.price_plan(b.g, 2, t, bad_s, strategy_provider=b.mock)
    with pytest.raises(Error, match="tilings for 2 cuts"):
        _core.price_plan(b.g, 4, t, s, strategy_provider=b.mock)


def test_graph_too_wide_for_the_exact_search_is_refused_fast():
    # 30 nodes each reading the same 30 tensors: every elimination order builds a table over
    # 30 variables (2^30 x 3 entries at least), past the DP's limit: a named error, no hang.
    # The tensors are computed (a graph input held replicated would serve every reader for
    # free, and the search would fix it: search/dominance.h).
    b = Builder()
    n = 30
    src = b.tensor("src", (4, 4))
    xs = [b.tensor(f"x{i}", (4, 4)) for i in range(n)]
    for i, x in enumerate(xs):
        b.node(f"copy#{i}", [src], [x], "a -> y: y[i, j] = a[i, j]", {"out": [["i", "j"]], "red": [], "in": [["i", "j"]]})
    args = ", ".join(f"a{i}" for i in range(n))
    body = " + ".join(f"a{i}[i, j]" for i in range(n))
    for k in range(n):
        y = b.tensor(f"y{k}", (4, 4))
        b.node(f"sum#{k}", xs, [y], f"{args} -> y: y[i, j] = {body}",
               {"out": [["i", "j"]], "red": [], "in": [["i", "j"]] * n})
    t0 = time.perf_counter()
    with pytest.raises(Error, match=r"the exact search would need a table of .* to eliminate "
                                    r"(the tiling of tensor 'x\d+'|the strategy of node 'sum#\d+').*too wide"):
        _core.plan_graph(b.g, 2, "tofu", strategy_provider=b.mock)
    assert time.perf_counter() - t0 < 5.0
