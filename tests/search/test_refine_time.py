"""tofu's refinement across cuts under the time objective (csrc/search/refine_time.cc,
refine_moves.cc, refine_neighbourhood.cc): each move re-solves its cut (or neighbourhood) on the
whole plan's seconds and is kept only when the plan's seconds go down.

The oracle is an exhaustive search over every plan of a small graph (every strategy sequence of
every node, every tiling sequence of every tensor), each plan priced by the core's price_plan
(plan_seconds: the time objective of a whole plan). The enumeration uses one property of that
cost, that it is a sum over edges (tensor, node) plus each node's compute: with the nodes'
sequences fixed, each tensor's best sequence is found alone (the others held replicated), and
the plan made of those is priced whole again to check the sum. The old refinement judged its
moves by bytes (kept only when the time model priced the result no higher); what it would
return is rebuilt here from the same core: the bytes refinement (price_plan(refine=True)
without a time model) started from the time recursion's plan, kept when its seconds are no
higher."""
import itertools
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autotile import Error, _core
from autotile.sim.cost_table import roofline
from autotile.sim.hardware import profile_from_dict

from .graphs import Builder
from .random_graphs import RandomGraph


def profile(peak, fast_bw, slow_bw, fast_lat, slow_lat, launch):
    """Two devices per node (the first cut of 4 or 8 devices crosses the slow level)."""
    return profile_from_dict({
        "name": "test-refine", "devices": None,
        "device": {"peak_flops": peak, "mem_bandwidth": 1e9, "memory_bytes": 1e9, "launch_overhead_s": launch},
        "efficiency": {"default": 0.5, "memory": 0.5},
        "levels": [{"name": "fast", "group": 2, "bandwidth": fast_bw, "latency": fast_lat},
                   {"name": "slow", "group": None, "bandwidth": slow_bw, "latency": slow_lat}]})


def time_model(g, devices, hw):
    """The time objective as the planner builds it (planner/time_objective.py), the compute
    from the simulator's roofline."""
    levels = hw.cut_levels(_core.factorize(devices))
    ops = [g.node(n)["op"] for n in range(g.num_nodes)]

    def compute(node, ins, outs, read):
        return roofline(hw, ops[node], [s if r else None for s, r in zip(ins, read)], list(outs))

    return {"seconds_per_byte": [1 / (devices * hw.device_bandwidth(lv, devices)) for lv in levels],
            "message_seconds": [hw.level_latency(lv) for lv in levels], "compute": compute}


def seconds(b, devices, tm, tilings, strategies):
    return _core.price_plan(b.g, devices, tilings, strategies, strategy_provider=b.mock,
                            time_model=tm)["model_seconds"]


def node_names(b, n):
    """Every strategy a node of the mock provider can have: its loop variables, and whole."""
    spec = b.mock.specs[n]
    names = []
    for v in [x for out in spec["out"] for x in out] + list(spec["red"]):
        if v not in names:
            names.append(v)
    return names + ["replicate"]


def tensor_tilings(g, t):
    shape = g.tensor(t)["shape"]
    return ["replicate"] + [f"split({d})" for d in range(len(shape))] + (["partial"] if g.tensor(t)["producer"] >= 0
                                                                        else [])


def node_assignments(b, cuts):
    return math.prod(len(node_names(b, n)) ** cuts for n in range(b.g.num_nodes))


def brute_force(b, devices, tm):
    """(seconds, tilings, strategies) of the fastest plan of all (invalid ones, which price_plan
    refuses, skipped)."""
    g, cuts = b.g, len(_core.factorize(devices))
    whole = [["replicate"] * cuts for _ in range(g.num_tensors)]
    tseqs = [list(itertools.product(tensor_tilings(g, t), repeat=cuts)) for t in range(g.num_tensors)]
    best = (math.inf, None, None)
    for seqs in itertools.product(*[itertools.product(node_names(b, n), repeat=cuts) for n in range(g.num_nodes)]):
        strategies = [list(s) for s in seqs]
        try:
            base = seconds(b, devices, tm, whole, strategies)
        except Error:  # a strategy the node lacks at the shapes its earlier ones leave
            continue
        tilings = [list(s) for s in whole]
        for t in range(g.num_tensors):
            least = base
            for seq in tseqs[t]:
                trial = [list(s) for s in whole]
                trial[t] = list(seq)
                try:
                    sec = seconds(b, devices, tm, trial, strategies)
                except Error:  # a split the shape cannot take, a partial its producer cannot make
                    continue
                if sec < least:
                    least, tilings[t] = sec, list(seq)
        total = seconds(b, devices, tm, tilings, strategies)  # priced whole, not summed
        if total < best[0]:
            best = (total, tilings, strategies)
    return best


def plans(b, devices, tm):
    """(the time recursion's plan, the refined one, what the bytes-judged refinement kept)."""
    kw = dict(strategy_provider=b.mock, time_model=tm)
    recursion = _core.plan_graph(b.g, devices, "tofu", refine=False, **kw)
    refined = _core.plan_graph(b.g, devices, "tofu", refine=True, **kw)
    by_bytes = _core.price_plan(b.g, devices, recursion["tensor_tilings"], recursion["node_strategies"],
                                strategy_provider=b.mock, refine=True)
    old = min(recursion["model_seconds"],
              seconds(b, devices, tm, by_bytes["tensor_tilings"], by_bytes["node_strategies"]))
    return recursion, refined, old


def chain(batch, units, layers):
    """x (batch, units) through `layers` ("fc:O", "relu", "loss"), forward only."""
    b = Builder()
    x = b.tensor("x", (batch, units))
    for i, layer in enumerate(layers):
        if layer.startswith("fc:"):
            x, _, _ = b.fc(f"l{i}", x, None, int(layer[3:]))
        elif layer == "relu":
            x, _ = b.relu(f"r{i}", x)
        else:
            loss = b.tensor("loss", ())
            b.node("loss#", [x], [loss], "y -> l: l[] = sum(i, j) { f(y[i, j]) }",
                   {"out": [[]], "red": ["i", "j"], "in": [["i", "j"]]})
    return b


#: graphs, profiles (peak FLOP/s, fast and slow bandwidth, fast and slow latency, launch) and
#: 4 devices where the time recursion is above the fastest plan and the bytes-judged moves
#: cannot reach it: the fastest plan moves more bytes (or the same bytes on another link) for
#: less time
CASES = {
    # fc's reduction split at both cuts (its output partial, summed by the loss) instead of its
    # outputs then its reduction: more bytes at the first (slow) cut, fewer rounds at the second,
    # less compute; 4.4% faster than the recursion
    "fc-relu-loss": (lambda: chain(3, 16, ["fc:2", "relu", "loss"]), (2.16e7, 7.79e8, 1.31e8, 2.86e-7, 4.25e-7, 1.25e-7)),
    # the second fc splits its batch then its outputs instead of its outputs then its reduction:
    # no bytes at the slow cut and half at the fast one, at more compute; 8.2% faster
    "fc-fc-relu": (lambda: chain(4, 2, ["fc:6", "fc:8", "relu"]), (1e6, 3.73e8, 2.52e8, 7.6e-6, 8.11e-6, 1.94e-7)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_refinement_reaches_the_fastest_plan_the_bytes_moves_miss(name):
    build, figures = CASES[name]
    b = build()
    tm = time_model(b.g, 4, profile(*figures))
    best, tilings, strategies = brute_force(b, 4, tm)
    recursion, refined, old = plans(b, 4, tm)
    assert recursion["model_seconds"] > best * 1.02  # the case is still a case
    assert old > best * 1.02  # the bytes-judged refinement stops above the fastest plan
    assert refined["model_seconds"] == pytest.approx(best, rel=1e-9)
    # the refined plan's seconds are its own: priced again from its tilings and strategies
    assert seconds(b, 4, tm, refined["tensor_tilings"], refined["node_strategies"]) == pytest.approx(
        refined["model_seconds"], rel=1e-12)
    # and the fastest plan is a fixed point of the moves (none raises it, none lowers it)
    again = _core.price_plan(b.g, 4, tilings, strategies, strategy_provider=b.mock, time_model=tm, refine=True)
    assert again["algorithm"] == "refined"
    assert again["model_seconds"] == pytest.approx(best, rel=1e-9)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_refinement_is_never_above_the_recursion_nor_below_the_fastest_plan(data):
    rg = RandomGraph(data, max_ops=3)
    devices = data.draw(st.sampled_from([4, 8]))
    fast_bw = data.draw(st.sampled_from([1e8, 1e9, 1e10]))
    fast_lat = data.draw(st.sampled_from([1e-7, 1e-6, 1e-5]))
    hw = profile(data.draw(st.sampled_from([1e6, 1e8, 1e10])), fast_bw, fast_bw / data.draw(st.sampled_from([1, 4, 16])),
                 fast_lat, fast_lat * data.draw(st.sampled_from([1, 3, 10])), 1e-6)
    b = rg.b
    tm = time_model(b.g, devices, hw)
    try:
        recursion, refined, old = plans(b, devices, tm)
    except Error as e:  # a graph with a node no cut can plan (checked elsewhere)
        assert "no feasible plan" in str(e) or "no strategy" in str(e), e
        return
    assert refined["model_seconds"] <= recursion["model_seconds"] * (1 + 1e-12)
    assert seconds(b, devices, tm, refined["tensor_tilings"], refined["node_strategies"]) == pytest.approx(
        refined["model_seconds"], rel=1e-12)
    if node_assignments(b, len(_core.factorize(devices))) <= 2000:
        best = brute_force(b, devices, tm)[0]
        assert refined["model_seconds"] >= best * (1 - 1e-9)
