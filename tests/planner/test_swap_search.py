"""SwapAdvisor's genetic search over schedules (autotile.planner.swap_search): the result is
never slower than the serial schedule it starts from (the seed, priced here again through
transform), every graph it returns fits the budget by the independent live-bytes sweep and
placement checker of tests/execgraph, the best graph really runs its own schedule and its
training step equals the single-device step; a schedule that is not a topological order is
refused naming the node at fault."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "execgraph"))

import autotile as at  # noqa: E402
from autotile import _core  # noqa: E402
from autotile.execgraph import transform  # noqa: E402
from autotile.planner.swap_search import crossover, genetic_schedule  # noqa: E402
from autotile.sim.simulator import simulate  # noqa: E402
from models import assert_same_step, reference_step, values  # noqa: E402
from test_memory_plan import check_memory_plan  # noqa: E402
from test_swap import MODELS  # noqa: E402
from test_swap_schedule import live_bytes  # noqa: E402

PROFILE = "dgx-a100"


def half_need(name, devices):
    sym, shapes, classes = MODELS[name]()
    plan = at.plan(sym, devices=devices, shapes=shapes)
    need = max(transform(sym, plan).peak_memory(d) for d in range(devices))
    return sym, shapes, classes, plan, need // 2


def run_on_host(eg, vals):
    """One training step of the execution graph `eg` itself on the host runtime."""
    from autotile.backend.host_runtime import HostRuntime
    from autotile.backend.multi_device import assemble_aux, result_names, step_result
    from autotile.backend.tiles import step_inputs

    rt = HostRuntime(eg)
    inputs = step_inputs(eg, vals)
    rt.load(inputs)
    stats = dict(rt.run(is_train=True, seed=0))
    full = {n: rt.gather(n) for n in result_names(eg)}
    return step_result(eg, full, assemble_aux(eg, rt.runner.updated_aux(), inputs), eg.plan, stats)


def topological(eg, order):
    core = eg.lowered.core
    index = {n: i for i, n in enumerate(eg.lowered.node_names)}
    position = {index[n]: k for k, n in enumerate(order)}
    assert sorted(position) == list(range(core.num_nodes))
    for v, k in position.items():
        for t in core.node(v)["inputs"]:
            p = core.tensor(t)["producer"]
            assert p < 0 or position[p] < k, f"{eg.lowered.node_names[v]} before its producer"


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_search_beats_or_keeps_the_seed_and_every_graph_fits(name):
    sym, shapes, classes, plan, budget = half_need(name, 2)
    r = genetic_schedule(sym, plan, budget, profile=PROFILE, generations=3, population=6, mutation=0.1, seed=0,
                         log=False)
    # the seed is the default schedule: the same step as the default swapped graph's
    default = transform(sym, plan, device_memory=budget, swap=True)
    assert r.seed_step_seconds == pytest.approx(simulate(default, PROFILE).step_seconds, rel=1e-12)
    assert r.step_seconds <= r.seed_step_seconds and r.speedup >= 1.0
    assert r.step_seconds == pytest.approx(simulate(r.graph, PROFILE).step_seconds, rel=1e-12)
    assert r.evaluated > 1 and r.generations == 3 and len(r.history) == 4
    assert all(b <= a for a, b in zip(r.history, r.history[1:])), r.history  # the best survives
    for eg in (r.graph, r.seed_graph):
        check_memory_plan(eg)
        for d in range(eg.devices):
            assert eg.peak_memory(d) <= budget
            assert max(live_bytes(eg, d)) <= budget
    topological(r.graph, r.order)
    runs_in_order(r.graph, r.order)
    vals = values(sym, shapes, classes)
    assert_same_step(run_on_host(r.graph, vals), reference_step(sym, shapes, vals), f"{name} swapped, searched")


def runs_in_order(eg, order):
    """Each device runs its compute ops in `order` (node names)."""
    rank = {n: k for k, n in enumerate(order)}
    for d in range(eg.devices):
        nodes = [eg.lowered.node_names[eg.ops[i]["node"]] for i in eg.schedule(d) if eg.ops[i]["kind"] == "compute"]
        assert [rank[n] for n in nodes] == sorted(rank[n] for n in nodes), f"device {d} runs another order"


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_a_given_schedule_is_run_as_given(name):
    """The hook itself: the default schedule with its first sink node (an update: nothing
    reads its outputs) moved to the end, at half the need, swapped."""
    sym, shapes, classes, plan, budget = half_need(name, 2)
    lowered = transform(sym, plan).lowered
    core, order = lowered.core, _core.schedule_order(lowered.core)
    sink = next(v for v in order if not any(core.tensor(t)["consumers"] for t in core.node(v)["outputs"]))
    assert sink != order[-1]
    names = [lowered.node_names[v] for v in order if v != sink] + [lowered.node_names[sink]]
    eg = transform(sym, plan, order=names, device_memory=budget, swap=True)
    runs_in_order(eg, names)
    assert any(o["kind"] == "swap_in" for o in eg.ops)
    check_memory_plan(eg)
    assert all(max(live_bytes(eg, d)) <= budget for d in range(eg.devices))
    vals = values(sym, shapes, classes)
    assert_same_step(run_on_host(eg, vals), reference_step(sym, shapes, vals), f"{name} in id order, swapped")


def test_search_is_deterministic_under_a_seed():
    sym, _, _, plan, budget = half_need("mlp", 1)
    runs = [genetic_schedule(sym, plan, budget, profile="p2.8xlarge", generations=2, population=4, mutation=0.2,
                             seed=s, log=False) for s in (3, 3)]
    assert runs[0].order == runs[1].order and runs[0].step_seconds == runs[1].step_seconds
    assert runs[0].hold == runs[1].hold
    assert runs[0].history == runs[1].history


def test_crossover_keeps_a_topological_order():
    sym, _, _, plan, _ = half_need("cnn", 1)
    eg = transform(sym, plan)
    seed = _core.schedule_order(eg.lowered.core)
    other = eg.lowered.core.topo_order()
    assert seed != other
    for cut in (1, len(seed) // 3, len(seed) - 1):
        for a, b in ((seed, other), (other, seed)):
            child = crossover(a, b, cut)
            assert list(child[:cut]) == list(b[:cut])
            topological(eg, [eg.lowered.node_names[v] for v in child])


def test_a_schedule_that_is_not_topological_is_refused():
    sym, _, _, plan, budget = half_need("mlp", 2)
    eg = transform(sym, plan)
    names = [eg.lowered.node_names[v] for v in _core.schedule_order(eg.lowered.core)]
    core = eg.lowered.core
    # the first node that reads another's output, moved to the front
    late = next(k for k, n in enumerate(names)
                if any(core.tensor(t)["producer"] >= 0 for t in core.node(core.find_node(n))["inputs"]))
    early = [names[late]] + names[:late] + names[late + 1:]
    with pytest.raises(at.Error, match=f"schedule order: node '{names[late]}' \\(position 0\\) runs before node '"):
        transform(sym, plan, order=early, device_memory=budget, swap=True)
    with pytest.raises(at.Error, match=f"node '{names[0]}' appears twice"):
        transform(sym, plan, order=names[:1] + names[:-1])
    with pytest.raises(at.Error, match="nodes given, the graph has"):
        transform(sym, plan, order=names[:-1])
    with pytest.raises(at.Error, match="no node 'nope'"):
        transform(sym, plan, order=["nope"] + names[1:])
    # the default order given explicitly builds the default graph
    same = transform(sym, plan, order=names)
    assert [o["time"] for o in same.ops] == [o["time"] for o in eg.ops]
    assert same.core.arena_bytes == eg.core.arena_bytes


def test_bad_arguments():
    sym, _, _, plan, budget = half_need("mlp", 1)
    with pytest.raises(at.Error, match="needs a budget"):
        genetic_schedule(sym, plan, log=False)
    with pytest.raises(at.Error, match="population must be an integer >= 2"):
        genetic_schedule(sym, plan, budget, population=1, log=False)
    with pytest.raises(at.Error, match="mutation must be a probability"):
        genetic_schedule(sym, plan, budget, mutation=1.5, log=False)
