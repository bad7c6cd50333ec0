"""The README MLP on the 2x4 mesh with the README's layout rules against XLA's own choice for
the same parameter layouts (issue 23: "the plans move no more than XLA's own choice").

Left to lay out the gradients itself, XLA all-reduces fc1's weight gradient over `batch` (a
contraction over the batch, output partial) and updates the weight replicated there. autotile's
tofu search has no replicated-compute strategy, but the same bytes in its own terms are: the
weight gradient partial over `batch`, reduce-scattered, updated split and the update
all-gathered (one all-reduce), with the ReLU gradient left split over `batch`. That plan is in
the search space; the recursive search misses it because the batch cut, searched first, is
cheaper with the gradient computed on feature slabs (2,574,416 B against 3,516,496 B at that
cut) and the model cuts then pay for that choice (1,662,292 B against 261,460 B): a per-cut
decomposition artefact, not a missing option or a miscount. The joint program over all cuts
(planner/ilp_joint.py, with the rules as constraints) finds it and more."""
import dataclasses
import inspect

import numpy as np
import pytest

import autotile as at
from autotile import _core
from autotile.bench.engines import readme_mlp
from autotile.planner import layout_rules, lowered_training_graph

MESH = {"batch": 2, "model": 4}
RULES = {"fc1_weight": {0: "model"}, "data": {0: "batch"}}
NET, SHAPES = readme_mlp()  # the model `autotile bench engines` compiles (batch 256)


# XLA's choice, written out per cut (batch, model, model): fc1's weight gradient summed over
# the batch at the batch cut ("n", partial, reduce-scattered to the split the update reads),
# from the ReLU gradient as split as the data; every other tensor and node as the rules and
# the MLP's usual layout have them
_S0, _S1, _REP = "split(0)", "split(1)", "replicate"
XLA_TILINGS = {
    "data": [_S0, _REP, _REP], "fc1_weight": [_REP, _S0, _S0], "fc1_bias": [_REP, _S0, _S0],
    "fc1_output": [_S0, _S1, _S1], "relu1_output": [_S0, _S1, _S1], "fc2_weight": [_REP, _S1, _S1],
    "fc2_bias": [_REP, _REP, _REP], "fc2_output": [_S0, _S0, _S0], "softmax_label": [_S0, _S0, _S0],
    "softmax_output": [_S0, _S0, _S0], "softmax_backward0_output": [_S0, _REP, _REP],
    "fc2_backward0_output": [_S0, _S1, _S1], "relu1_backward0_output": [_S0, _S1, _S1],
    "fc1_backward1_output": [_S1, _S0, _S0], "fc1_backward2_output": [_S0, _S0, _S0],
    "fc2_backward1_output": [_S0, _S1, _S1], "fc2_backward2_output": [_S0, _REP, _REP],
    "fc1_weight_update_output": [_REP, _S0, _S0], "fc1_bias_update_output": [_REP, _S0, _S0],
    "fc2_weight_update_output": [_REP, _S1, _S1], "fc2_bias_update_output": [_REP, _REP, _REP]}
XLA_STRATEGIES = {
    "fc1": ["n", "o", "o"], "relu1": ["i0", "i1", "i1"], "fc2": ["n", "k0", "k0"], "softmax": ["i0"] * 3,
    "softmax_backward0": ["i0"] * 3, "fc2_backward0": ["n", "k0", "k0"], "relu1_backward0": ["i0", "i1", "i1"],
    "fc1_backward1": ["n", "o", "o"], "fc1_backward2": ["o", "o", "o"], "fc2_backward1": ["n", "kk", "kk"],
    "fc2_backward2": ["n0", "o", "n0"], "fc1_weight_update": ["i1", "i0", "i0"], "fc1_bias_update": ["i0"] * 3,
    "fc2_weight_update": ["i0", "i1", "i1"], "fc2_bias_update": ["i0", _REP, _REP]}


def _xla_choice(plan):
    """`plan` (of the README MLP under MESH and RULES, at any batch) with XLA's choice."""
    return dataclasses.replace(plan, algorithm="hand", tensor_tilings=XLA_TILINGS, node_strategies=XLA_STRATEGIES)


@pytest.fixture(scope="module")
def plans():
    plan = at.plan(NET, mesh=MESH, shapes=SHAPES, layout=RULES)
    return NET, plan, _xla_choice(plan)


def _graph_bytes(net, plan):
    return at.transform(net, plan).stats()["bytes"]


def _priced(net, plan):
    """`plan` priced by the search's cost model (total and per cut)."""
    _, _, _, low = lowered_training_graph(net, SHAPES)
    factors, _ = layout_rules.mesh_cuts(MESH)
    return _core.price_plan(low.core, 8, [plan.tensor_tilings[n] for n in low.tensor_names],
                            [plan.node_strategies[n] for n in low.node_names], factors=factors)


def test_xla_choice_priced_alike_and_under_xla(plans):
    net, plan, xla = plans
    # the search's cost model and the execution graph agree on both plans
    assert _graph_bytes(net, plan) == plan.comm_bytes
    priced = _priced(net, xla)
    assert priced["total_bytes"] == _graph_bytes(net, xla)
    # at most what XLA compiled for these rules with the gradients left to it (3,868,992 B,
    # `autotile bench engines`, docs/layouts.md): XLA's own all-reduce, in autotile's terms
    assert priced["total_bytes"] <= 3_868_992


def test_xla_choice_trains_as_one_device(plans):
    net, _, xla = plans
    rng = np.random.default_rng(0)
    small = {"data": (16, 784), "softmax_label": (16,)}
    inputs = {"data": rng.standard_normal(small["data"]),
              "softmax_label": rng.integers(0, 10, small["softmax_label"]).astype(np.float64)}
    params = {"fc1_weight": rng.standard_normal((512, 784)) * 0.05, "fc1_bias": rng.standard_normal(512),
              "fc2_weight": rng.standard_normal((10, 512)) * 0.05, "fc2_bias": rng.standard_normal(10)}
    hand = _xla_choice(at.plan(net, mesh=MESH, shapes=small, layout=RULES))
    want = at.backend.run(net, devices=1, inputs=inputs, params=params, train=True)
    got = at.backend.run(net, devices=8, inputs=inputs, params=params, train=True, plan=hand)
    for name in params:
        np.testing.assert_allclose(got.params[name], want.params[name], rtol=1e-12, atol=1e-12)


def test_joint_optimum_under_the_rules_beats_xla_choice(plans):
    """The joint program over all three cuts, the rules as constraints (a pinned tensor takes
    only its pinned tiling sequence), reaches XLA's bytes and below."""
    pytest.importorskip("scipy")
    from autotile.planner.ilp_joint import joint_optimum

    net, plan, xla = plans
    _, _, _, low = lowered_training_graph(net, SHAPES)
    factors, _ = layout_rules.mesh_cuts(MESH)
    index = {n: i for i, n in enumerate(low.tensor_names)}

    def pinned_only(problem):
        weights = [np.zeros(len(values)) for values in problem["tensor_values"]]
        for name in ("data", "fc1_weight"):
            var = problem["tensor_var"][index[name]]
            for j, seq in enumerate(problem["tensor_values"][var]):
                weights[var][j] = float(list(seq) != plan.tensor_tilings[name])
        return weights, 0.0

    joint = joint_optimum(low.core, 8, factors=factors, at_most=pinned_only, time_limit=120)
    assert joint["optimal"]
    tilings = dict(zip(low.tensor_names, joint["tensor_tilings"]))
    assert tilings["data"] == plan.tensor_tilings["data"]
    assert tilings["fc1_weight"] == plan.tensor_tilings["fc1_weight"]
    assert joint["total_bytes"] <= min(_graph_bytes(net, xla), plan.comm_bytes)


def test_where_the_search_misses_xla_choice_the_batch_cut_prefers_its_own(plans):
    """The diagnosis while the gap stands: each cut is searched exactly (the DP), and the batch
    cut alone is cheaper as the search has it; the model cuts then pay for that choice."""
    net, plan, xla = plans
    xla_cuts = _priced(net, xla)["cut_costs"]
    if plan.comm_bytes > sum(xla_cuts):
        assert xla_cuts[0] > plan.cut_costs[0] and sum(xla_cuts[1:]) < sum(plan.cut_costs[1:])


# The recursion alone decides the batch cut before the model cuts; the refinement across cuts
# (at.plan(refine=...), issue 24) reaches the joint optimum here (3,321,252 B)
REFINES = "refine" in inspect.signature(at.plan).parameters


@pytest.mark.xfail(not REFINES, strict=True, reason="the recursive search decides the batch cut before the "
                   "model cuts (per-cut decomposition; issue 23) and this at.plan does not refine across cuts")
def test_plan_moves_no_more_than_xla_choice(plans):
    net, plan, xla = plans
    assert plan.comm_bytes <= _graph_bytes(net, xla)


def test_model_axis_first_finds_no_more_than_xla_choice(plans):
    """The workaround until then: the same mesh with `model` first (device d at
    unravel_index(d, (4, 2))) lets the recursion settle the weight's axis first."""
    net, plan, xla = plans
    swapped = at.plan(net, mesh={"model": 4, "batch": 2}, shapes=SHAPES, layout=RULES)
    assert swapped.cut_axes == ["model", "model", "batch"]
    assert _graph_bytes(net, swapped) == swapped.comm_bytes <= _graph_bytes(net, xla)
