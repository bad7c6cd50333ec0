"""Inputs shared by many layers (LLaMA's rotary cos/sin tables, masks) and the dominated
values the search drops (csrc/search/dominance.h): the one-cut DP stays exact -- every cut
equals bruteforce (or, past what it enumerates, the exact integer program) on random layered
graphs whose layers read shared read-only tables and on the random graphs of the DP tests, and
the integer program on the LLaMA training graph and on random graphs far beyond bruteforce,
in the default mode (variables with one dominant value fixed), when every dominated value and
option is dropped (AUTOTILE_SEARCH_DOMINANCE=all, what a too-wide cut falls back to) and when
the cut is solved once per tiling of the shared inputs (=condition, what a memory-weighted
search does, csrc/search/shared_inputs.h). With all of it off (=off) the plain DP finds the
same cut costs, with and without a memory weight, and where no input is shared the plans are
identical. Search times are measured by bench/transformers.py."""
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autotile as at
from autotile import _core
from autotile.errors import Error
from autotile.planner import lowered_training_graph

from .graphs import Builder
from .random_graphs import RandomGraph
from .test_ilp import _dp_vs_ilp

MODES = ["default", "all", "condition"]
LIMIT = 200_000  # tiling combinations bruteforce may enumerate per cut (else the ILP)
TINY_LLAMA = dict(batch=4, seq=16, layers=2, d_model=32, heads=4, d_ff=64, vocab=64)


def examples(n):
    """Hypothesis settings: n examples, no deadline (the fixture only sets an env variable)."""
    return settings(max_examples=n, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.fixture
def dominance(monkeypatch):
    """Sets the search's dominance mode (default, all, condition or off) for the rest of the test."""

    def use(mode):
        if mode == "default":
            monkeypatch.delenv("AUTOTILE_SEARCH_DOMINANCE", raising=False)
        else:
            monkeypatch.setenv("AUTOTILE_SEARCH_DOMINANCE", mode)

    return use


def shared_table_net(data):
    """FC layers whose outputs are multiplied by read-only tables fed as graph inputs (no
    producer, no gradient), each table read by several layers' forward and backward nodes,
    as LLaMA's rotary tables are: a (batch, units) mask-like table or a (units,) row."""
    b = Builder()
    B = data.draw(st.sampled_from([2, 4, 6, 8]), "batch")
    U = data.draw(st.sampled_from([2, 4, 6, 8]), "units")
    layers = data.draw(st.integers(1, 4), "layers")
    tables = [b.tensor("table_full", (B, U)), b.tensor("table_row", (U,))]
    x = b.tensor("data", (B, U))
    stack = []
    for l in range(layers):
        y, f, W = b.fc(f"l{l}", x, None, U)
        stack.append(("fc", f"l{l}", f, x, W))
        x = y
        use = data.draw(st.sampled_from([None, 0, 1]), f"table of layer {l}")
        if use is None:
            continue
        c = tables[use]
        acc = ["i", "j"] if use == 0 else ["j"]
        y = b.tensor(f"m{l}_y", (B, U))
        f = b.node(f"mul#m{l}", [x, c], [y], f"x, c -> y: y[i, j] = x[i, j] * c[{', '.join(acc)}]",
                   {"out": [["i", "j"]], "red": [], "in": [["i", "j"], acc]})
        stack.append(("mul", f"m{l}", f, x, c))
        x = y
    dy = b.loss(x)
    for kind, name, f, xin, other in reversed(stack):
        if kind == "fc":
            dy = b.fc_backward(name, f, xin, other, dy, dx_needed=xin != 0)
            if dy is None:
                break
            continue
        acc = ["i", "j"] if b.g.tensor(other)["shape"] == b.g.tensor(xin)["shape"] else ["j"]
        dx = b.tensor(f"{name}_dx", (B, U))
        b.node(f"mulb#{name}", [dy, other], [dx], f"dy, c -> dx: dx[i, j] = dy[i, j] * c[{', '.join(acc)}]",
               {"out": [["i", "j"]], "red": [], "in": [["i", "j"], acc]}, "backward", f)
        b.grad(xin, dx)
        dy = dx
    return b


def _cuts_vs_exact(b, devices):
    """(DP, exact) cost of every cut: bruteforce where it can enumerate the cut, else the ILP."""
    try:
        return _core._check_cuts_against_bruteforce(b.g, devices, strategy_provider=b.mock, bruteforce_limit=LIMIT)
    except Error as e:
        if "bruteforce: cut" not in str(e):
            raise
    return _dp_vs_ilp(b.g, devices, strategy_provider=b.mock)


def random_graph(data):
    """The DP tests' random graphs: fan-out, halos, rank-changing reductions, tied updates,
    timestep-shared strategies."""
    return RandomGraph(data).b


@pytest.mark.parametrize("graph", [shared_table_net, random_graph])
@pytest.mark.parametrize("mode", MODES)
@examples(40)
@given(data=st.data(), devices=st.sampled_from([2, 4, 6]))
def test_every_cut_is_exact(dominance, mode, graph, data, devices):
    dominance(mode)
    b = graph(data)
    checks = _cuts_vs_exact(b, devices)
    assert len(checks) == len(_core.factorize(devices))
    for dp, exact in checks:
        assert dp == pytest.approx(exact, rel=1e-12, abs=1e-9)


def first_cut_objective(b, plan, weight):
    """What a memory-weighted search minimises in its first cut (search/memory_term.h): the
    cut's bytes plus `weight` x every tensor's bytes per device (1/k of it when split)."""
    k = plan["factors"][0]
    total = plan["cut_costs"][0]
    for t, tilings in enumerate(plan["tensor_tilings"]):
        size = 4.0  # float32
        for d in b.g.tensor(t)["shape"]:
            size *= d
        total += weight * (size / k if tilings[0].startswith("split") else size)
    return total


@examples(40)
@given(data=st.data(), devices=st.sampled_from([2, 4, 6]), weight=st.sampled_from([0.05, 0.5, 3.0]))
def test_memory_weighted_first_cut_is_exact_with_shared_tables(dominance, data, devices, weight):
    # replicated tables cost memory: nothing dominates and the search conditions on them
    b = shared_table_net(data)
    objective = {}
    for mode in ("off", "default"):
        dominance(mode)
        plan = _core.plan_graph(b.g, devices, "tofu", strategy_provider=b.mock, memory_weight=weight)
        objective[mode] = first_cut_objective(b, plan, weight)
    assert objective["default"] == pytest.approx(objective["off"], rel=1e-12)


@pytest.mark.parametrize("mode", MODES)
@examples(15)
@given(data=st.data(), devices=st.sampled_from([2, 4, 8]))
def test_every_cut_equals_ilp_on_random_graphs_beyond_bruteforce(dominance, mode, data, devices):
    dominance(mode)
    b = RandomGraph(data, max_ops=40).b
    for dp, exact in _dp_vs_ilp(b.g, devices, strategy_provider=b.mock):
        assert dp == pytest.approx(exact, rel=1e-9, abs=1e-6)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("devices", [4, 8])
def test_llama_cuts_equal_ilp(dominance, mode, devices):
    # the rotary tables feed every layer's queries and keys (forward and backward)
    dominance(mode)
    *_, lowered = lowered_training_graph(at.models.get("llama-7b", **TINY_LLAMA))
    names = [lowered.core.tensor(t)["name"] for t in range(lowered.core.num_tensors)]
    assert {"rope_cos", "rope_sin"} <= set(names)
    checks = _dp_vs_ilp(lowered.core, devices)
    assert len(checks) == len(_core.factorize(devices))
    for dp, exact in checks:
        assert dp == pytest.approx(exact, rel=1e-9, abs=1e-6)


def test_llama_plan_costs_as_the_plain_dp(dominance):
    # LLaMA-7B shapes, 2 layers, 64 devices: the case of issue #12 (3 s of search without the
    # reduction, 0.1 s with it); all six cuts cost what the plain DP's cuts cost.
    sym = at.models.get("llama-7b", batch=8, seq=2048, layers=2)
    plans = {}
    for mode in ("off", "default"):
        dominance(mode)
        plans[mode] = at.plan(sym, devices=64)
    assert plans["default"].cut_costs == pytest.approx(plans["off"].cut_costs, rel=1e-12)
    assert plans["default"].comm_bytes == pytest.approx(plans["off"].comm_bytes, rel=1e-12)


@pytest.mark.parametrize("devices", [4, 8, 16])
@pytest.mark.parametrize("weight", [0.5, 3.0, 100.0])
def test_memory_weighted_llama_costs_as_the_plain_dp(dominance, devices, weight):
    # With a memory term replicating the rotary tables costs memory, nothing dominates, and
    # the search conditions on their tilings instead: the same cut costs as the plain DP.
    *_, lowered = lowered_training_graph(at.models.get("llama-7b", **TINY_LLAMA))
    costs = {}
    for mode in ("off", "default"):
        dominance(mode)
        costs[mode] = _core.plan_graph(lowered.core, devices, "tofu", memory_weight=weight)["cut_costs"]
    assert costs["default"] == pytest.approx(costs["off"], rel=1e-12)


@pytest.mark.parametrize("model, batch, devices", [("alexnet", 32, 8), ("resnet50", 8, 4), ("gpt2-small", 8, 8),
                                                   ("bert-base", 16, 4)])
def test_plans_without_shared_inputs_are_unchanged(dominance, model, batch, devices):
    # Only read-only inputs get fixed, and their tilings are polished back to the DP's own
    # tie-break: the same plan, tiling for tiling, as the plain DP. The recursion's plan: the
    # refinement across cuts that follows is a local search within a budget set by the DP's
    # work, which dominance lowers, so the two refinements may stop at different plans.
    kw = {"layers": 2, "seq": 128} if model in ("gpt2-small", "bert-base") else {}
    sym = at.models.get(model, batch=batch, **kw)
    plans = {}
    for mode in ("off", "default"):
        dominance(mode)
        plans[mode] = at.plan(sym, devices=devices, refine=False)
    assert plans["default"].tensor_tilings == plans["off"].tensor_tilings
    assert plans["default"].node_strategies == plans["off"].node_strategies
    assert plans["default"].cut_costs == plans["off"].cut_costs


def test_replicated_shared_input_is_what_the_reduction_assumes():
    # The premise, in the cost model itself: a graph input held replicated is read under any
    # strategy for free, so replicating every shared table never costs more than the plan's
    # own tilings (same strategies, tables re-tiled).
    b = Builder()
    c = b.tensor("table", (8, 8))
    x = b.tensor("data", (8, 8))
    for l in range(3):
        y = b.tensor(f"y{l}", (8, 8))
        b.node(f"mul#{l}", [x, c], [y], "x, c -> y: y[i, j] = x[i, j] * c[j, i]",
               {"out": [["i", "j"]], "red": [], "in": [["i", "j"], ["j", "i"]]})
        x = y
    b.loss(x)
    plan = _core.plan_graph(b.g, 4, "tofu", strategy_provider=b.mock)
    table = [b.g.tensor(t)["name"] for t in range(b.g.num_tensors)].index("table")
    tilings = [list(t) for t in plan["tensor_tilings"]]
    tilings[table] = ["replicate"] * len(tilings[table])
    priced = _core.price_plan(b.g, 4, tilings, plan["node_strategies"], strategy_provider=b.mock)
    assert priced["total_bytes"] <= plan["total_bytes"] + 1e-9
