"""The time objective's cut problems (csrc/search/time_cost.h): every entry equals an
independent evaluation (the cut's byte entries priced at the cut's link, plus the simulator's
roofline of the node's tiles under each strategy), the one-cut DP is exact on them (against
exhaustive enumeration of the same problem), and a whole plan's seconds add up."""
import math

import pytest

from autotile import Error, _core
from autotile.sim.cost_table import roofline
from autotile.sim.hardware import profile_from_dict

from .graphs import conv_net, mlp, residual

GRAPHS = {
    "mlp": lambda: mlp(2, 8, 8),
    "mlp_relu": lambda: mlp(2, 8, 8, relu=True),
    "conv_halo": lambda: conv_net(4, 4, 8),
    "residual": lambda: residual(8, 8),
}

#: two devices per node: the first cut of 4 devices crosses the slow level
HW = profile_from_dict({
    "name": "test-2x2", "devices": None,
    "device": {"peak_flops": 1e9, "mem_bandwidth": 1e9, "memory_bytes": 1e9, "launch_overhead_s": 1e-6},
    "efficiency": {"default": 0.5, "memory": 0.5},
    "levels": [{"name": "fast", "group": 2, "bandwidth": 4e9, "latency": 1e-6},
               {"name": "slow", "group": None, "bandwidth": 1e9, "latency": 1e-5}]})


def compute_fn(graph):
    ops = [graph.node(n)["op"] for n in range(graph.num_nodes)]

    def compute(node, ins, outs, read):
        return roofline(HW, ops[node], [s if r else None for s, r in zip(ins, read)], list(outs))

    return compute


def model(graph, devices, rate=None, latency=None, compute=None):
    factors = _core.factorize(devices)
    levels = HW.cut_levels(factors)
    return {"seconds_per_byte": [1 / (devices * HW.device_bandwidth(lv, devices)) if rate is None else rate
                                 for lv in levels],
            "message_seconds": [HW.level_latency(lv) if latency is None else latency for lv in levels],
            "compute": compute or compute_fn(graph)}


def captured(g, provider, devices, time_model):
    """The cut problems the search hands its solver (the integer program, planner/ilp.py:
    algorithm "ilp" solves every cut outside the core, from the same problem the DP gets)."""
    from autotile.planner.ilp import make_cut_solver

    problems, ilp = [], make_cut_solver()

    def solver(p):
        problems.append(p)
        return ilp(p)

    _core.plan_graph(g, devices, "ilp", strategy_provider=provider, cut_solver=solver, time_model=time_model)
    return problems


def recording(mock):
    """The mock provider, recording the strategies it gave for each (node, k)."""
    seen = {}

    def provider(node, ins, outs, k):
        res = mock(node, ins, outs, k)
        seen.setdefault((node, k), (res[0], ins, outs))
        return res

    return provider, seen


def tiles(strategy, ins, outs, k):
    """Input tiles (None: unread) and output tiles one worker has under a strategy dict."""
    if strategy is None:  # whole
        return list(ins), list(outs)
    tin = []
    for need, shape in zip(strategy["inputs"], ins):
        if need == "unread":
            tin.append(None)
        elif need is None:
            tin.append(tuple(shape))
        else:
            d, ivs = need
            tin.append(tuple(max(hi - lo for lo, hi in ivs) if i == d else n for i, n in enumerate(shape)))
    tout = [tuple(shape) if make == "partial" else tuple(n // k if i == make else n for i, n in enumerate(shape))
            for make, shape in zip(strategy["outputs"], outs)]
    return tin, tout


@pytest.mark.parametrize("devices", [2, 4])
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_first_cut_entries_equal_an_independent_evaluation(name, devices):
    b = GRAPHS[name]()
    provider, seen = recording(b.mock)
    bytes_problems = captured(b.g, b.mock, devices, None)
    tm = model(b.g, devices)
    time_problems = captured(b.g, provider, devices, tm)
    k = _core.factorize(devices)[0]
    remaining = devices // k
    rate, lat = tm["seconds_per_byte"][0], tm["message_seconds"][0]
    pb, pt = bytes_problems[0], time_problems[0]  # the first cut starts from the same (uncut) state
    assert pb["domain"] == pt["domain"] and pb["num_options"] == pt["num_options"]
    ops = [b.g.node(n)["op"] for n in range(b.g.num_nodes)]
    for n in range(b.g.num_nodes):
        strategies, ins, outs = seen[(n, k)]
        opts = list(strategies) + [None] * (pt["num_options"][n] - len(strategies))  # then "whole"
        node = b.g.node(n)
        inputs = len(node["inputs"])
        for e, ((v, cb), (v2, ct)) in enumerate(zip(pb["edges"][n], pt["edges"][n])):
            assert v == v2
            for o in range(cb.shape[0]):
                for val in range(cb.shape[1]):
                    nbytes = cb[o, val]
                    if math.isinf(nbytes):
                        assert math.isinf(ct[o, val])
                        continue
                    tensor = pb["var_home"][v]
                    partial_value = val == pb["domain"][v] - 1 and b.g.tensor(tensor)["producer"] >= 0
                    if e < inputs:
                        rounds = 2 if partial_value else 1
                    else:
                        makes_partial = opts[o] is not None and opts[o]["outputs"][e - inputs] == "partial"
                        rounds = 2 if makes_partial and not partial_value else 1
                    want = nbytes * rate + (lat * rounds if nbytes > 0 else 0.0)
                    if e == 0:
                        tin, tout = tiles(opts[o], ins, outs, k)
                        want += roofline(HW, ops[n], tin, tout) / remaining
                    assert ct[o, val] == pytest.approx(want, rel=1e-12, abs=1e-18), (node["name"], e, o, val)


@pytest.mark.parametrize("devices", [2, 4, 8])
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_every_time_cut_matches_exhaustive_enumeration(name, devices):
    b = GRAPHS[name]()
    checks = _core._check_cuts_against_bruteforce(b.g, devices, strategy_provider=b.mock, bruteforce_limit=10**7,
                                                  time_model=model(b.g, devices))
    assert len(checks) == len(_core.factorize(devices))
    for dp, bf in checks:
        assert dp == pytest.approx(bf, rel=1e-12, abs=1e-15)


def test_time_search_trades_bytes_for_compute():
    # Free communication: the time search splits what the bytes search keeps whole only when
    # compute matters; with free links and costly compute it must split every node it can.
    b = mlp(2, 8, 8)
    tm = model(b.g, 2, rate=0.0, latency=0.0, compute=lambda n, ins, outs, read: float(
        sum(math.prod(s) for s, r in zip(ins, read) if r) + sum(math.prod(s) for s in outs)))
    plan = _core.plan_graph(b.g, 2, "tofu", strategy_provider=b.mock, time_model=tm)
    assert all(s != ["replicate"] for s in plan["node_strategies"])
    assert plan["model_seconds"] == pytest.approx(plan["cut_seconds"][-1])


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_plan_seconds_add_up_from_bytes_messages_and_final_tiles(name):
    b = GRAPHS[name]()
    tm = model(b.g, 4)
    plan = _core.plan_graph(b.g, 4, "tofu", strategy_provider=b.mock, time_model=tm)
    priced = _core.price_plan(b.g, 4, plan["tensor_tilings"], plan["node_strategies"], strategy_provider=b.mock,
                              time_model=tm)
    assert priced["model_seconds"] == pytest.approx(plan["model_seconds"], rel=1e-12)
    # communication: each cut's bytes at its rate plus at most two message rounds per edge
    comm = plan["cut_seconds"][:-1]
    for i, (c, nbytes) in enumerate(zip(comm, plan["cut_costs"])):
        assert c >= nbytes * tm["seconds_per_byte"][i] - 1e-18
        assert c <= nbytes * tm["seconds_per_byte"][i] + 4 * b.g.num_nodes * 2 * tm["message_seconds"][i] + 1e-18
    assert sum(plan["cut_seconds"]) == pytest.approx(plan["model_seconds"])


def test_refinement_never_raises_the_time_objective():
    b = residual(8, 8)
    tm = model(b.g, 8)
    refined = _core.plan_graph(b.g, 8, "tofu", strategy_provider=b.mock, time_model=tm, refine=True)
    plain = _core.plan_graph(b.g, 8, "tofu", strategy_provider=b.mock, time_model=tm, refine=False)
    assert refined["model_seconds"] <= plain["model_seconds"] * (1 + 1e-12)


def test_a_failing_compute_callback_is_raised():
    b = mlp(2, 8, 8)

    def broken(*args):
        raise ValueError("no figure for this op")

    with pytest.raises(ValueError, match="no figure"):
        _core.plan_graph(b.g, 2, "tofu", strategy_provider=b.mock, time_model=model(b.g, 2, compute=broken))


def test_wrong_number_of_link_figures_is_an_error():
    b = mlp(2, 8, 8)
    tm = model(b.g, 4)
    tm["seconds_per_byte"] = tm["seconds_per_byte"][:1]
    with pytest.raises(Error, match="one each per cut"):
        _core.plan_graph(b.g, 4, "tofu", strategy_provider=b.mock, time_model=tm)
