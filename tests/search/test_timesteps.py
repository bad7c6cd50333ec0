"""Timestep merging (Tofu Sec 5.1): nodes of an unrolled RNN with the same
`__timestep_group__` (set by the lowering, planner/lower.py timestep_group()) share one
strategy per cut and their outputs one tiling; the DP stays exact for that coarsened problem."""
import re
from collections import defaultdict

import pytest

import autotile as at
from autotile import _core

from .graphs import Builder


def two_steps(shared):
    """Two steps of one cell op e_t = f(y_t) where y_0 comes from a stencil along dim 1 (cheapest
    split by rows) and y_1 from a stencil along dim 0 (cheapest split by columns): alone, e_0 and
    e_1 want different splits; as one shared step op they must agree and one of them pays."""
    b = Builder()
    es = []
    for t, window in enumerate([["i", ("j", -1, 1)], [("i", -1, 1), "j"]]):
        a = b.tensor(f"a{t}", (8, 8))
        x = b.tensor(f"x{t}", (8, 8))  # produced, so a replicated copy is not free
        b.node(f"p#{t}", [a], [x], "a -> x: x[i, j] = g(a[i, j])", {"out": [["i", "j"]], "red": [], "in": [["i", "j"]]})
        y = b.tensor(f"y{t}", (8, 8))
        tdl = ("x -> y: y[i, j] = sum(kx) { x[i, j + kx - 1] }" if t == 0
               else "x -> y: y[i, j] = sum(kx) { x[i + kx - 1, j] }")
        b.node(f"win#{t}", [x], [y], tdl, {"out": [["i", "j"]], "red": [], "in": [window]})
        z = b.tensor(f"z{t}", (8, 8))
        e = b.node(f"e#{t}", [y], [z], "y -> z: z[i, j] = f(y[i, j])",
                   {"out": [["i", "j"]], "red": [], "in": [["i", "j"]]})
        if shared:
            b.g.set_attr(e, "__timestep_group__", "cell:e")
        es.append(e)
    return b, es


def test_unshared_steps_choose_differently_shared_steps_agree():
    b, (e0, e1) = two_steps(shared=False)
    free = _core.plan_graph(b.g, 2, "tofu", strategy_provider=b.mock)
    assert free["node_strategies"][e0] != free["node_strategies"][e1]
    assert free["total_bytes"] == 0
    b, (e0, e1) = two_steps(shared=True)
    tied = _core.plan_graph(b.g, 2, "tofu", strategy_provider=b.mock)
    assert tied["node_strategies"][e0] == tied["node_strategies"][e1]
    z0, z1 = b.g.node(e0)["outputs"][0], b.g.node(e1)["outputs"][0]
    assert tied["tensor_tilings"][z0] == tied["tensor_tilings"][z1]
    assert tied["total_bytes"] > 0
    for devices in (2, 4):
        for dp, bf in _core._check_cuts_against_bruteforce(b.g, devices, strategy_provider=b.mock):
            assert dp == pytest.approx(bf)


def test_steps_of_other_shapes_are_not_shared():
    # Same op and TDL text but other shapes: sharing would make a cut infeasible, so the
    # shapes are part of what a shared step is.
    b = Builder()
    es = []
    for t, shape in enumerate([(3, 4), (4, 3)]):
        x, y = b.tensor(f"x{t}", shape), b.tensor(f"y{t}", shape)
        e = b.node(f"e#{t}", [x], [y], "x -> y: y[i, j] = f(x[i, j])",
                   {"out": [["i", "j"]], "red": [], "in": [["i", "j"]]})
        b.g.set_attr(e, "__timestep_group__", "cell:e")
        es.append(e)
    plan = _core.plan_graph(b.g, 2, "tofu", strategy_provider=b.mock)
    assert plan["node_strategies"][es[0]] == ["j"] and plan["node_strategies"][es[1]] == ["i"]
    assert plan["total_bytes"] == 0


@pytest.mark.parametrize("devices", [2, 8])
def test_unrolled_rnn_gives_every_timestep_of_an_op_the_same_strategy(devices):
    plan = at.plan("rnn-2-1", devices=devices, batch=8, algorithm="tofu", replicate_fallback=True)
    steps = defaultdict(dict)
    for name, strategy in plan.node_strategies.items():
        m = re.match(r"^(lstm\d+)_t(\d+)_(.*)$", name)  # {cell}_t{t}_{op}, backward and gradient sums too
        if m:
            steps[(m.group(1), m.group(3))][int(m.group(2))] = tuple(strategy)
    assert len(steps) >= 40
    # all but the gradient sums' chain links (one per timestep piece of a shared weight)
    sums = [n for n in plan.node_strategies if re.search(r"_grad_sum\d*$", n)]
    assert sum(len(v) for v in steps.values()) > 0.9 * (len(plan.node_strategies) - len(sums))
    for key, by_step in steps.items():
        assert len(set(by_step.values())) == 1, (key, by_step)
