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

import numpy as np
import pytest

import autotile as at
from autotile import _core
from autotile.bench.engines import readme_mlp
from autotile.planner import layout_rules, lowered_training_graph

MESH = {"batch": 2, "model": 4}
RULES = {"fc1_weight": {0: "model"}, "data": {0: "batch"}}
NET, SHAPES = readme_mlp()  # the model `autotile bench engines` compiles (batch 256)


@pytest.fixture(scope="module")
def plans():
    net = NET
    plan = at.plan(net, mesh=MESH, shapes=SHAPES, layout=RULES)
    tilings = {k: list(v) for k, v in plan.tensor_tilings.items()}
    strategies = {k: list(v) for k, v in plan.node_strategies.items()}
    # XLA's choice at the batch cut: fc1's weight gradient summed over the batch (partial,
    # reduced to the tiling the update reads), from the ReLU gradient as split as the data
    tilings["relu1_backward0_output"][0] = "split(0)"
    strategies["fc1_backward1"][0] = "n"
    xla = dataclasses.replace(plan, algorithm="hand", tensor_tilings=tilings, node_strategies=strategies)
    return net, plan, xla


def _graph_bytes(net, plan):
    return at.transform(net, plan).stats()["bytes"]


def test_xla_choice_is_cheaper_and_priced_alike(plans):
    net, plan, xla = plans
    # the search's cost model and the execution graph agree on both plans
    assert _graph_bytes(net, plan) == plan.comm_bytes
    sym, _, _, low = lowered_training_graph(net, SHAPES)
    factors, _ = layout_rules.mesh_cuts(MESH)
    priced = _core.price_plan(low.core, 8, [xla.tensor_tilings[n] for n in low.tensor_names],
                              [xla.node_strategies[n] for n in low.node_names], factors=factors)
    assert priced["total_bytes"] == _graph_bytes(net, xla)
    # the batch cut alone prefers the search's choice; the model cuts pay for it
    assert priced["cut_costs"][0] > plan.cut_costs[0]
    assert sum(priced["cut_costs"][1:]) < sum(plan.cut_costs[1:])
    # ... and on the whole XLA's choice moves less: all-reduce of the weight gradient
    # (2 x 1/2 x 1,605,632 B over 4 model groups) instead of gathering data, ReLU gradient
    # and updated weight over `batch`
    assert priced["total_bytes"] < plan.comm_bytes


def test_xla_choice_trains_as_one_device(plans):
    net, _, xla = plans
    rng = np.random.default_rng(0)
    small = {"data": (16, 784), "softmax_label": (16,)}
    inputs = {"data": rng.standard_normal(small["data"]),
              "softmax_label": rng.integers(0, 10, small["softmax_label"]).astype(np.float64)}
    params = {"fc1_weight": rng.standard_normal((512, 784)) * 0.05, "fc1_bias": rng.standard_normal(512),
              "fc2_weight": rng.standard_normal((10, 512)) * 0.05, "fc2_bias": rng.standard_normal(10)}
    small_plan = at.plan(net, mesh=MESH, shapes=small, layout=RULES)
    hand = dataclasses.replace(small_plan, algorithm="hand", tensor_tilings=xla.tensor_tilings,
                               node_strategies=xla.node_strategies)
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
    assert joint["total_bytes"] <= _graph_bytes(net, xla) < plan.comm_bytes


@pytest.mark.xfail(strict=True, reason="the recursive search decides the batch cut before the model "
                   "cuts (per-cut decomposition; issue 23): the joint choice across cuts is open")
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
