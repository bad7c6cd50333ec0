"""Random valid plans: an oracle-independent way to exercise the execution graph.

Every tensor gets a random tiling per cut among those the plan format allows (replicate,
partial only for tensors some op produces, split(d) where the cut divides the remaining
extent), every node a random strategy among those its TDL offers at the composed split
count. Any such plan, executed, must give the single-device result."""
from __future__ import annotations

import numpy as np

from autotile import _core
from autotile.planner.plan import Plan


def random_plan(lowered, factors, rng, allow_partial=True, optimizer="sgd", input_shapes=None) -> Plan:
    g = lowered.core
    tilings = {}
    for tid, name in enumerate(lowered.tensor_names):
        shape = list(lowered.tensor_shapes[tid])
        produced = g.tensor(tid)["producer"] >= 0
        row = []
        for k in factors:
            options = ["replicate"] + [f"split({d})" for d in range(len(shape)) if shape[d] % k == 0]
            if produced and allow_partial:
                options.append("partial")
            choice = options[rng.integers(len(options))]
            if choice.startswith("split("):
                shape[int(choice[6:-1])] //= k
            row.append(choice)
        tilings[name] = row
    strategies = {}
    for nid, name in enumerate(lowered.node_names):
        node = g.node(nid)
        ins = [lowered.tensor_shapes[t] for t in node["inputs"]]
        outs = [lowered.tensor_shapes[t] for t in node["outputs"]]
        row, counts = [], {}
        vetoed = set(node["attrs"].get("__no_split__", "").split(","))
        for k in factors:
            options = [v for v in _vars(node["tdl"], ins, outs, k, counts) if v not in vetoed] or ["replicate"]
            var = options[rng.integers(len(options))]
            counts[var] = counts.get(var, 1) * k
            row.append(var)
        strategies[name] = row
    devices = int(np.prod(factors)) if factors else 1
    return Plan(algorithm="random", devices=devices, factors=list(factors), cut_costs=[0.0] * len(factors),
                comm_bytes=0.0, search_seconds=0.0, tensor_tilings=tilings, node_strategies=strategies,
                tensor_shapes=dict(zip(lowered.tensor_names, lowered.tensor_shapes)),
                param_names=list(lowered.param_names), optimizer=optimizer, input_shapes=dict(input_shapes or {}))


def _vars(tdl, ins, outs, k, counts):
    """Variables that can be split k more ways given how often each was split already."""
    result = []
    seen = set()
    probe = _core.analyze_tdl(tdl, ins, outs, 1) if tdl else {"strategies": []}
    for s in probe["strategies"]:
        seen.add(s["var"])
    for var in sorted(seen):
        total = counts.get(var, 1) * k
        st = _core.analyze_tdl(tdl, ins, outs, total)
        if any(s["var"] == var for s in st["strategies"]):
            result.append(var)
    return result or ["replicate"]


def lowered_training_graph(sym, shapes, optimizer="sgd", optimizer_args=None):
    """The core graph of `sym`'s training step at `shapes`, as at.plan / at.transform build it."""
    from autotile.autodiff import training_graph
    from autotile.planner.lower import lower

    tg = training_graph(sym, optimizer=optimizer, optimizer_args=optimizer_args, shapes=shapes)
    return lower(tg.symbol, shapes, tg.param_names, tg.backward_of, tg.update_nodes,
                 {g: f for f, g in tg.gradient_entry.items()})


#: cut factors per device count (nested cuts as the search makes them)
FACTORS = {2: [[2]], 3: [[3]], 4: [[4], [2, 2]], 8: [[8], [2, 4], [2, 2, 2]]}


def on_random_plans(low, seed, devices, plans_per_count, rng, ref, run, what, **plan_kw):
    """`run(plan)` on `plans_per_count` random plans of the lowered graph `low` per device count
    (cut factors cycling with `seed`), each against the float64 step `ref` (1e-9 relative):
    (pairs checked, ops some plan split)."""
    from models import assert_same_step

    checked, split = 0, set()
    ops = [low.core.node(i)["op"] for i in range(len(low.node_names))]
    for k in devices:
        for i in range(plans_per_count):
            options = FACTORS[k]
            factors = options[(seed + i) % len(options)]
            plan = random_plan(low, factors, rng, **plan_kw)
            assert_same_step(run(plan), ref, f"{what} on {factors}, plan {i}", rtol=1e-9, atol=1e-11)
            checked += 1
            split |= {op for op, name in zip(ops, low.node_names) if set(plan.node_strategies[name]) != {"replicate"}}
    return checked, split
