"""The time objective of :func:`autotile.plan` (``objective="time", hardware=PROFILE``).

The search (csrc/search/time_cost.h) prices every cut in seconds of one device's step on the
hardware profile instead of bytes: cut i crosses the link level :meth:`Hardware.cut_levels`
gives it (the first cuts separate the nodes), its bytes cost ``bytes / (K x the bandwidth one
device gets at that level)`` plus the level's latency per message round, and every node option
costs the compute one device does on its tiles after the cut (the simulator's own op times,
:meth:`autotile.sim.CostTable.time`: the profile's roofline), divided by the factors of the cuts still to come.

The search's model is additive and credits no overlap of communication with computation, so
it can still lose to a plan it did not consider. The final choice is therefore made by the
simulator (:func:`autotile.sim.simulate`): the time plan, the bytes plan and the baselines
that apply (data parallelism; one-weird-trick for convolutional models; Megatron-style layout
rules for Transformers) are each turned into an execution graph and simulated on the same
profile, and the fastest is returned, with every candidate's simulated step recorded in
``plan.candidates`` and the winner in ``plan.chosen``.
"""
from __future__ import annotations

import time
from typing import Dict, List, Optional, Tuple

from ..errors import Error

#: the objectives at.plan accepts
OBJECTIVES = ("bytes", "time")
#: the algorithms the time objective searches with (the baselines fix their own layouts)
TIME_ALGORITHMS = ("tofu", "bruteforce")
#: Megatron-LM's layout (attention heads and the first MLP weight split by their output
#: features over the model axis; the batch over the other) as rules over declared dim names
MEGATRON_RULES = [("batch", "rows"), ("heads", "cols"), ("d_ff", "cols")]


def as_profile(hardware):
    """A :class:`autotile.sim.Hardware` from a profile name, a JSON path, a dict of the JSON
    form or a Hardware."""
    from ..sim.hardware import Hardware, load_profile, profile_from_dict

    if isinstance(hardware, Hardware):
        return hardware
    if isinstance(hardware, dict):
        return profile_from_dict(hardware)
    if isinstance(hardware, str):
        return load_profile(hardware)
    raise Error(f"hardware must be a profile name, a JSON path or a dict, got {type(hardware).__name__}")


def check(objective, hardware, algorithm: str, device_memory, bandwidths):
    """The profile for `objective` (None for bytes without a profile); Error on an unknown
    objective, on time without a profile (listing the shipped ones) or with options it does
    not combine with."""
    from ..sim.hardware import available_profiles

    if objective not in OBJECTIVES:
        raise Error(f"unknown objective {objective!r} (choose from {', '.join(OBJECTIVES)})")
    if objective == "time":
        if hardware is None:
            raise Error("objective='time' needs hardware= (a profile name, a JSON path or a dict); shipped "
                        f"profiles: {', '.join(available_profiles())}")
        if algorithm not in TIME_ALGORITHMS:
            raise Error(f"objective='time' searches with {' or '.join(TIME_ALGORITHMS)}, not '{algorithm}' (the "
                        "baselines fix their own layouts; the time plan is compared with them by simulation)")
        if device_memory is not None:
            raise Error("objective='time' does not take device_memory= (the memory-fitting search prices bytes)")
        if bandwidths is not None:
            raise Error("objective='time' takes the links from hardware=, not bandwidths=")
    return as_profile(hardware) if hardware is not None else None


def time_model(hw, lowered, factors: List[int]) -> dict:
    """The core's time objective for a plan of `lowered` with these cut factors on profile
    `hw`: per cut its link level, seconds per flat byte and latency per message round, and
    the compute callback (node id, input tiles, output tiles, read flags) -> seconds."""
    from ..sim.cost_table import CostTable

    table = CostTable(hw)  # the simulator's own op times (the roofline of the profile)
    k = 1
    for f in factors:
        k *= f
    levels = hw.cut_levels(list(factors))
    kinds = lowered.node_ops

    def compute(node, ins, outs, read):
        return table.time(kinds[node], [tuple(s) if r else None for s, r in zip(ins, read)], [tuple(s) for s in outs])

    return {"levels": [hw.levels[lv].name for lv in levels],
            "seconds_per_byte": [1.0 / (k * hw.device_bandwidth(lv, k)) for lv in levels],
            "message_seconds": [hw.level_latency(lv) for lv in levels], "compute": compute}


#: graphs of more node-cuts (nodes x cuts) than this skip the bytes start: LLaMA-70B's shapes on
#: 1024 devices have 85,720 (the bytes search and the refinement from its plan would add 1.5 s to
#: a 0.8 s search); the table's largest, LLaMA-7B on 64 devices, 20,616
BYTES_START_LIMIT = 50_000


def start_from_bytes(core_graph, devices: int, raw: dict, timing: dict, **search_kw) -> dict:
    """The time search's plan `raw` (its recursion, refined on the time model) or, when it is
    faster in that same model, the bytes objective's plan refined on the time model: the
    refinement is a local search, and the recursion's plan is one start of it, the bytes plan
    another (WResNet-50-2 on 8 A100s: the recursion ends at 343.47 ms in the model, the bytes
    plan is at 343.16). `search_kw` are the bytes search's options (plan_graph's); the result
    says which start won in ``raw["start"]`` ("recursion", "bytes", or "recursion only" above
    :data:`BYTES_START_LIMIT` node-cuts) and counts both starts' wall time in search_seconds."""
    from .. import _core

    if core_graph.num_nodes * len(raw["factors"]) > BYTES_START_LIMIT:
        return dict(raw, start="recursion only")
    t0 = time.perf_counter()
    try:
        b = _core.plan_graph(core_graph, devices, "tofu", **search_kw)
        p = _core.price_plan(core_graph, devices, b["tensor_tilings"], b["node_strategies"],
                             search_kw.get("replicate_fallback", False), factors=b["factors"], time_model=timing,
                             refine=search_kw.get("refine", True))
    except Error:  # e.g. a cut too wide for the exact DP without the integer program: keep raw
        return dict(raw, start="recursion")
    spent = float(raw["search_seconds"]) + (time.perf_counter() - t0)
    if p["model_seconds"] is not None and p["model_seconds"] < raw["model_seconds"] * (1 - 1e-12):
        return dict(p, start="bytes", search_seconds=spent, algorithm=raw["algorithm"],
                    wide_cuts=raw.get("wide_cuts", []), num_groups=raw.get("num_groups", 0),
                    num_levels=raw.get("num_levels", 0))
    return dict(raw, start="recursion", search_seconds=spent)


#: in the hierarchical mode, the small collectives stay in one round up to this many devices
HIERARCHICAL_STAGE_ABOVE = 64


def collective_modes(hw, factors) -> Dict[str, dict]:
    """How the runtime may run a plan's collectives on profile `hw`, as ``transform`` keywords:
    "flat" (one cut a stage above 8 devices, in the order that keeps the search's bytes) and,
    where the cuts cross more than one link level, "hierarchical" (large tiles one stage per
    level, summing inside a node first and crossing nodes first; small ones in one round up to
    64 devices: :func:`hierarchical_above`). Neither wins everywhere: a direct collective
    moves over both levels at once, a hierarchical one keeps the slow level's bytes small."""
    modes: Dict[str, dict] = {"flat": {"hierarchical_above": -1}}  # (-1: not the plan's own)
    above = hierarchical_above(hw, factors)
    if above is not None:
        modes["hierarchical"] = {"hierarchical_above": above, "stage_above": HIERARCHICAL_STAGE_ABOVE,
                                 "cut_levels": hw.cut_levels(list(factors))}
    return modes


def simulated_step(model, plan, hw) -> Tuple[float, str, dict]:
    """The fastest simulated training step of `plan` on profile `hw` over the runtime's
    :func:`collective_modes`: (seconds, mode, its transform keywords)."""
    from ..execgraph.graph import transform
    from ..sim.simulator import simulate

    best = None
    for mode, kw in collective_modes(hw, plan.factors).items():
        seconds = float(simulate(transform(model, plan, **kw), hw).step_seconds)
        if best is None or seconds < best[0]:
            best = (seconds, mode, kw)
    return best


def hierarchical_above(hw, factors) -> Optional[int]:
    """The bytes per device above which a plan's collectives on profile `hw` run hierarchically
    (``transform(hierarchical_above=...)``), where its cuts cross more than one link level (None
    on one level): a collective moving that much keeps the outermost level busy flat (about half
    of it per device) for longer than two more rounds of that level's latency would take,
    counting that the hierarchical one still moves some of it there."""
    levels = hw.cut_levels(list(factors))
    if len(set(levels)) < 2:
        return None
    k = 1
    for f in factors:
        k *= f
    outer = levels[0]
    return int(4 * hw.level_latency(outer) * hw.device_bandwidth(outer, k))


def _same_layout(a, b) -> bool:
    return a.tensor_tilings == b.tensor_tilings and a.node_strategies == b.node_strategies


def baseline_requests(sym, devices: int, mesh) -> Dict[str, dict]:
    """The baselines to compare with, as at.plan keyword arguments: data parallelism;
    one-weird-trick when the model has convolutions; Megatron-style rules when its weights
    declare attention heads (a model axis of 8, 4 or 2 inside a node, the batch across)."""
    ops = {n.op for n in sym.topo_nodes() if not n.is_variable}
    out: Dict[str, dict] = {"data": {"algorithm": "data"}}
    if "Convolution" in ops:
        out["owt"] = {"algorithm": "owt"}
    import re

    declared = " ".join(str(n.attrs.get("__dims__", "")) for n in sym.topo_nodes() if n.is_variable)
    heads = [int(h) for h in re.findall(r"heads:(\d+)", declared)]
    if mesh is None and heads:
        cols = next((c for c in (8, 4, 2) if devices % c == 0 and devices > c and all(h % c == 0 for h in heads)),
                    None)
        if cols:
            out["megatron"] = {"mesh": {"rows": devices // cols, "cols": cols}, "layout": MEGATRON_RULES}
    return out


def choose(time_plan, sym, hw, replan, candidates: Optional[List[str]] = None):
    """The fastest by simulation of the time plan and the other candidates (`replan(**kw)`
    plans the same model with the bytes objective and these keywords): by default the bytes
    plan and the baselines that apply (:func:`baseline_requests`); `candidates` names them
    instead ("bytes", "data", "owt", "megatron" or another baseline algorithm: "hypar",
    "spartan", ...). Records every candidate's simulated step (None, and the reason in
    ``skipped``, for one that could not be planned) and search seconds on the returned plan."""
    t0 = time.perf_counter()
    requests = {"bytes": {}}
    requests.update(baseline_requests(sym, time_plan.devices, time_plan.mesh if list(time_plan.mesh) != ["devices"]
                                      else None))
    if candidates is not None:
        from . import ALGORITHMS

        others = [a for a in ALGORITHMS if a not in ("tofu", "bruteforce", "ilp", "data") and a not in requests]
        unknown = [c for c in candidates if c not in requests and c not in others]
        if unknown:
            raise Error(f"candidates {unknown} do not apply to this model (applicable: "
                        f"{', '.join(list(requests) + others)})")
        requests = {c: requests.get(c, {"algorithm": c}) for c in candidates}
    plans = {"time": time_plan}
    steps: Dict[str, Optional[float]] = {}
    modes: Dict[str, tuple] = {}
    skipped: Dict[str, str] = {}
    for name, kw in requests.items():
        try:
            plans[name] = replan(**kw)
        except Error as e:
            skipped[name] = str(e).splitlines()[0][:200]
    for name, p in plans.items():
        same = next((o for o in steps if o in plans and _same_layout(plans[o], p)), None)
        modes[name] = modes[same] if same is not None else simulated_step(sym, p, hw)
        steps[name] = modes[name][0]
    for name in skipped:
        steps[name] = None
    winner = min((n for n in plans), key=lambda n: (steps[n], n != "time"))
    chosen = plans[winner]
    chosen.objective, chosen.hardware = "time", hw.name
    chosen.model_seconds = time_plan.model_seconds
    chosen.time_start = time_plan.time_start
    chosen.candidates, chosen.chosen, chosen.skipped = steps, winner, skipped
    # the collectives its simulated step ran (transform builds them so by default)
    mode = modes[winner][2]
    chosen.hierarchical_above = mode["hierarchical_above"] if mode["hierarchical_above"] >= 0 else None
    chosen.stage_levels = list(mode.get("cut_levels", []))
    chosen.time_search_seconds = time_plan.search_seconds
    chosen.candidate_search_seconds = {n: float(p.search_seconds) for n, p in plans.items()}
    chosen.selection_seconds = time.perf_counter() - t0
    return chosen
