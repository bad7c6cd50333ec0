"""The swap plan against the budget at every point of its schedule, by an independent sweep:
the live bytes of each device are recounted here from the augmented execution graph's ops and
buffers (each buffer from its producer's time to its last reader's, planned tiles of outputs to
the end, a buffer an op overwrites in place counted once) rather than taken from the C++
liveness, and never exceed the budget. The swap-ins come back as early as memory allows (the
thesis's prefetch, so the copies hide behind compute), not one node before their use."""
import pytest

import autotile as at
from autotile.execgraph import transform
from test_swap import MODELS

NODE = 6  # memory-clock units per node of the serial schedule (exec/exec_build.cc)


def live_bytes(eg, device, in_place=True):
    """Bytes live on `device` at each time of the schedule (a list: index t + 1 for time t,
    from -1 to past the last op), recounted from the graph's ops and buffers; `in_place`
    False counts both buffers of an in-place op at its time (as the swap planner does)."""
    ops, bufs, core = eg.ops, eg.buffers, eg.lowered.core
    forever = max(o["time"] for o in ops) + 1
    spans = {}
    for i in range(len(bufs)):
        b = bufs[i]
        if b["device"] != device or b["host"] or b["bytes"] == 0:
            continue
        begin = ops[b["producer"]]["time"] if b["producer"] >= 0 else -1
        end = max([begin] + [ops[r]["time"] for r in b["readers"]])
        t = core.tensor(b["tensor"])
        if (t["is_output"] or not t["consumers"]) and eg.core.tile(b["tensor"], device) == i:
            end = forever
        spans[i] = (begin, end)
    # in place: an op's output written over the input it reads last (same place and size)
    # holds one buffer's bytes at the op's time, not two
    shared = set()
    for i, (begin, _) in spans.items() if in_place else ():
        p = bufs[i]["producer"]
        for j in ops[p]["inputs"] if p >= 0 else ():
            if j in spans and j != i and spans[j][1] == begin and bufs[j]["offset"] == bufs[i]["offset"] \
                    and bufs[j]["bytes"] == bufs[i]["bytes"]:
                shared.add(j)
    delta = [0] * (forever + 3)
    for i, (begin, end) in spans.items():
        last = end - 1 if i in shared else end
        delta[begin + 1] += bufs[i]["bytes"]
        delta[last + 2] -= bufs[i]["bytes"]
    live, running = [], 0
    for x in delta[:-1]:
        running += x
        live.append(running)
    return live


def swapped(name, devices, fraction=0.5):
    sym, shapes, _ = MODELS[name]()
    plan = at.plan(sym, devices=devices, shapes=shapes)
    need = max(transform(sym, plan).peak_memory(d) for d in range(devices))
    budget = int(need * fraction)
    return transform(sym, plan, device_memory=budget, swap=True), budget


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("devices", [1, 2])
def test_never_above_the_budget_at_any_point(name, devices):
    eg, budget = swapped(name, devices)
    assert any(o["kind"] == "swap_in" for o in eg.ops)
    for d in range(devices):
        live = live_bytes(eg, d)
        worst = max(range(len(live)), key=live.__getitem__)
        assert live[worst] <= budget, f"device {d}: {live[worst]} bytes live at time {worst - 1} > budget {budget}"
        assert eg.peak_memory(d) <= budget


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("devices", [1, 2])
def test_swap_ins_come_back_as_early_as_memory_allows(name, devices):
    """Each swap-in either follows what it waits for at once (its swap-out, the copy it replaces,
    or the start of the step for an input loaded into the host pool) or could not start one unit
    earlier without raising the schedule's peak live bytes; and most come back more than a node
    ahead."""
    eg, budget = swapped(name, devices)
    for d in range(devices):
        live = live_bytes(eg, d, in_place=False)
        peak = max(live)
        leads = []
        for i in eg.core.copy_schedule(d):
            o = eg.ops[i]
            if o["kind"] != "swap_in":
                continue
            after = max([eg.ops[p]["time"] for p in o["deps"]] or [-1])
            copy = eg.buffers[o["outputs"][0]]
            assert copy["readers"], f"swap-in op {i} brings back a copy nothing reads"
            leads.append(min(eg.ops[r]["time"] for r in copy["readers"]) - o["time"])
            if o["time"] > after + 1:  # live[t] is time t - 1
                assert live[o["time"]] + copy["bytes"] > peak, (
                    f"swap-in op {i} at time {o['time']} could start earlier: {live[o['time']]} + "
                    f"{copy['bytes']} bytes <= the peak {peak}")
        assert sum(lead > NODE for lead in leads) > len(leads) / 2, leads


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_hold_keeps_swapped_memory_and_the_step(name):
    """swap_hold: a swapped-out buffer keeps its memory up to that many memory-clock units past
    its last use (so the next occupant need not wait for the copy); still within the budget
    at every point, and the step is the unswapped plan's bit for bit."""
    import numpy as np

    from autotile import _core
    from autotile.backend.host_runtime import HostRuntime
    from autotile.backend.multi_device import result_names
    from autotile.backend.tiles import step_inputs
    from autotile.execgraph.graph import ExecGraph
    from models import values

    sym, shapes, classes = MODELS[name]()
    plan = at.plan(sym, devices=2, shapes=shapes)
    free = transform(sym, plan)
    budget = max(free.peak_memory(d) for d in range(2)) // 2
    lowered = free.lowered
    hold = 4 * NODE
    graphs = {}
    for h in (0, hold):
        core = _core.build_exec_graph(lowered.core, plan.factors, [plan.tensor_tilings[n] for n in lowered.tensor_names],
                                      [plan.node_strategies[n] for n in lowered.node_names], True, budget, swap_hold=h)
        graphs[h] = ExecGraph(core, lowered, free.training, plan)
    held = []
    for h, eg in graphs.items():
        for d in range(2):
            assert eg.peak_memory(d) <= budget and max(live_bytes(eg, d)) <= budget
        for o in eg.ops:
            if o["kind"] == "swap_out":
                src = eg.buffers[o["pieces"][0][0]]
                last = max([eg.ops[src["producer"]]["time"] if src["producer"] >= 0 else -1] +
                           [eg.ops[r]["time"] for r in src["readers"] if eg.ops[r]["kind"] != "swap_out"])
                assert 1 <= o["time"] - last <= h + 1
                if h:
                    held.append(o["time"] - last)
    assert max(held) > 1, "no swapped buffer kept its memory"
    vals = step_inputs(graphs[hold], values(sym, shapes, classes))
    results = []
    for eg in (graphs[hold], free):
        rt = HostRuntime(eg)
        rt.load(vals)
        rt.run(is_train=True, seed=0)
        results.append({n: rt.gather(n) for n in result_names(eg)})
    for n in results[1]:
        np.testing.assert_array_equal(results[0][n], results[1][n], err_msg=n)
