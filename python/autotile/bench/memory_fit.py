"""Plans that fit (issue #15): per model, the largest batch that trains within a per-device
memory budget with the plain search (tofu), with the memory-aware search (tofu + budget) and
with swapping to host memory as well (+ swap, SwapAdvisor), and the simulated step time each
costs relative to the unconstrained plan at the same batch; SwapAdvisor's own Ch. 5 result
next to the models the thesis measured.

    autotile bench memory            # WResNet-152-4, RNN-10-8K, GPT-2 large on 8 devices, 12 GB
    autotile bench memory --quick    # WResNet-50-1, RNN-2-2K on 4 devices, 0.8 GB (about 5 minutes on 2 cores)
    autotile bench memory --widths   # the older sweep: largest width per device count, tofu vs data
    autotile bench memory --host     # swapping measured on the host runtime vs simulated (swap_host.py)
    autotile bench memory --planning [--repeat 3]   # planning time only: at.plan with a budget vs without

Last, small members of each family at half their need on 1 and 8 devices (4 with --quick, RNN
only) run a few chained steps on the host runtime, checked against the same plan unswapped and
the unconstrained plan by execution (swap_steps.py).

Memory is the busiest device's arena under the execution graph's static memory plan (the
planner the runtime uses, COMPUTED, no run); "need" is that arena without swapping for the
plan with the smallest peak the budget search found. Step times are SIMULATED on the
p2.8xlarge (K80, PCIe 3 to host) and dgx-a100 (A100, PCIe 4 to host) profiles at the same
budget. The batch doubles until a method no longer fits. Every budgeted plan's planning time
(CPU seconds of at.plan, process_time) is listed beside the plain plan's (issue #24: within
10x). Writes bench/out/memory_fit.json."""
from __future__ import annotations

import re
import sys
import time
from typing import Optional

from . import common

# (model, first batch, last batch tried): the batch doubles from the first to the last
FULL = {"models": [("wresnet-152-4", 8, 512), ("rnn-10-8k", 64, 4096), ("gpt2-large", 4, 64)], "devices": 8,
        "budget": 12e9, "ga_seconds": 90}
QUICK = {"models": [("wresnet-50-1", 32, 256), ("rnn-2-2k", 128, 256)], "devices": 4, "budget": 0.8e9,
         "ga_seconds": 30}
PROFILES = ("p2.8xlarge", "dgx-a100")
METHODS = ("tofu", "tofu+budget", "+swap")
# SwapAdvisor thesis Ch. 5 (Fig. 5.1, Table 5.1): one 16 GB V100, throughput relative to an
# ideal GPU with infinite memory; step time relative = 1 / throughput relative.
THESIS = {"wresnet": "WResNet-152-10 b64 (180 GB, 11x): 95% of ideal = 1.05x step",
          "rnn": "RNN-8-8K b256 (118 GB, 7.4x): 70-80% of ideal = 1.25-1.43x step"}
TARGET_NEED, TARGET_STEP = 2.0, 1.5  # a model needing 2x the budget trains at <= 1.5x the step time
# --planning: (model, batch, seq or None, devices, budget) planned with and without the budget
PLANNING = [("wresnet-152-4", 128, None, 8, 12e9), ("gpt2-large", 16, None, 8, 12e9),
            ("rnn-10-8k", 512, None, 8, 12e9), ("llama-7b", 8, 2048, 64, 8e9)]
QUICK_PLANNING = [("wresnet-50-1", 128, None, 4, 0.8e9), ("rnn-2-2k", 512, None, 4, 0.8e9)]
TARGET_PLANNING = 10.0  # a budgeted plan takes at most 10x the plain plan's CPU time


class Case:
    """Plans of one model on `devices` at one budget, cached per batch (the unconstrained
    plan serves both as the tofu attempt and as every method's reference step)."""

    def __init__(self, model: str, devices: int, budget: float, timings: Optional[list] = None):
        self.model, self.devices, self.budget = model, devices, budget
        self._free, self._fit, self.why = {}, {}, {}
        self.timings = [] if timings is None else timings  # JSON rows: each budgeted at.plan's CPU time

    def free(self, batch):
        """(plan, exec graph) of the unconstrained search, or None when it cannot plan."""
        import autotile as at
        from autotile.execgraph import transform

        if batch not in self._free:
            try:
                t0 = time.process_time()
                plan = at.plan(self.model, devices=self.devices, batch=batch)
                plan.planning_cpu = time.process_time() - t0
                self._free[batch] = (plan, transform(self.model, plan))
            except (at.Error, MemoryError):
                self._free[batch] = None
        return self._free[batch]

    def fitted(self, batch):
        """(plan, exec graph, need) of the memory-aware search at the budget (swapping when no
        partition fits), or None when even swapping does not fit."""
        import autotile as at
        from autotile.execgraph import transform

        if batch not in self._fit:
            try:
                t0 = time.process_time()
                plan = at.plan(self.model, devices=self.devices, batch=batch, device_memory=int(self.budget))
                cpu = time.process_time() - t0
                free = self.free(batch)
                self.timings.append(_timing(self.model, self.devices, batch, self.budget,
                                            free and free[0].planning_cpu, cpu, plan))
                eg = transform(self.model, plan)
                need = _peak(transform(self.model, plan, swap=False)) if plan.swap_budget is not None else _peak(eg)
                self._fit[batch] = (plan, eg, need)
            except (at.Error, MemoryError) as e:
                self._fit[batch] = None
                self.why[batch] = str(e)
        return self._fit[batch]

    def attempt(self, batch, method):
        """(plan, exec graph, need) of `method` at `batch`, or None when it does not fit."""
        if method == "tofu":
            got = self.free(batch)
            return None if got is None or _peak(got[1]) > self.budget else (*got, _peak(got[1]))
        got = self.fitted(batch)
        if got is None or (method == "tofu+budget" and got[0].swap_budget is not None):
            return None  # tofu+budget: a plan that needed swapping is not this method's
        return got

    def step_ratio(self, batch, eg):
        """Simulated step time of `eg` over the unconstrained plan's, per profile."""
        from autotile.sim.simulator import simulate

        free = self.free(batch)
        if free is None:
            return {p: None for p in PROFILES}
        return {p: simulate(eg, p).step_seconds / simulate(free[1], p).step_seconds for p in PROFILES}


def _timing(model, devices, batch, budget, plain_cpu, budget_cpu, plan) -> dict:
    """A planning-time JSON row: CPU seconds of at.plan without and with the budget."""
    return {"model": model, "devices": devices, "batch": batch, "budget": budget, "method": "planning time",
            "plain_cpu_seconds": plain_cpu, "budget_cpu_seconds": budget_cpu,
            "ratio": budget_cpu / plain_cpu if plain_cpu else None, "memory_weight": plan.memory_weight,
            "swapped": plan.swap_budget is not None, "peak_bytes": plan.peak_memory}


def _peak(eg) -> int:
    return max(eg.peak_memory(d) for d in range(eg.devices))


def _ratio(r):
    return "-" if r is None else f"{r:.3f}"


def budget_table(cfg, log):
    """Rows of the main table, the swap sweep (every batch +swap fitted), the target rows
    (each model at the largest batch the plain search fits, with half the memory its plan
    needs) and the JSON rows."""
    devices, budget = cfg["devices"], cfg["budget"]
    rows, sweep, targets, out = [], [], [], []
    for model, first, last in cfg["models"]:
        case = Case(model, devices, budget)
        thesis = next((t for k, t in THESIS.items() if model.startswith(k)), "not measured")
        largest = {}
        for method in METHODS:
            best, batch = None, first
            while batch <= last:
                t0 = time.perf_counter()
                got = case.attempt(batch, method)
                log(f"  {model} {method} batch {batch}: {'fits' if got else 'does not fit'} "
                    f"({time.perf_counter() - t0:.0f} s)")
                if got is None:
                    break
                best = (batch, got)
                if method == "+swap" and got[0].swap_budget is not None:
                    ratio = case.step_ratio(batch, got[1])
                    sweep.append([model, batch, f"{got[2] / budget:.2f}x", _ratio(ratio["p2.8xlarge"]),
                                  _ratio(ratio["dgx-a100"])])
                    out.append({"model": model, "method": "+swap sweep", "batch": batch, "need_bytes": got[2],
                                "step_vs_unconstrained": ratio})
                batch *= 2
            if best is None:
                rows.append([model, method, "-", "-", "-", "-", "-", "-"])
                out.append({"model": model, "method": method, "batch": None})
                continue
            b, (plan, eg, need) = best
            largest[method] = b
            ratio = case.step_ratio(b, eg)
            shown = b if b < last else f"{b} (last tried)"
            rows.append([model, method, shown, f"{need / budget:.2f}x", f"{_peak(eg) / 1e9:.2f} GB",
                         _ratio(ratio["p2.8xlarge"]), _ratio(ratio["dgx-a100"]), thesis if method == "+swap" else ""])
            out.append({"model": model, "method": method, "batch": b, "peak_bytes": _peak(eg), "need_bytes": need,
                        "comm_bytes": plan.comm_bytes, "swapped": plan.swap_budget is not None,
                        "step_vs_unconstrained": ratio})
        if largest.get("tofu"):
            targets.append(half_the_need(case, largest["tofu"], log, out, cfg["ga_seconds"]))
            # SwapAdvisor's own setting: one device with the host link to itself, the same
            # per-device batch
            one = Case(model, 1, budget, case.timings)
            targets.append(half_the_need(one, max(1, largest["tofu"] // devices), log, out, cfg["ga_seconds"]))
        out.extend(case.timings)
    return rows, sweep, [t for t in targets if t], out


def planning_times(cases, repeat: int, log) -> list:
    """JSON rows (:func:`_timing`, medians of `repeat` runs) of at.plan without and with the
    budget, for each (model, batch, seq, devices, budget) of `cases`."""
    import statistics

    import autotile as at

    got = []
    for model, batch, seq, devices, budget in cases:
        spec = at.models.get(model, batch=batch, seq=seq) if seq else model
        kw = {} if seq else {"batch": batch}
        times = {"plain": [], "budget": []}
        plan = None
        try:  # untimed: the first plan of a process imports and builds what later plans reuse
            at.plan(spec, devices=devices, **kw)
        except (at.Error, MemoryError):
            pass
        for _ in range(repeat):
            for kind in times:
                t0 = time.process_time()
                try:
                    p = at.plan(spec, devices=devices, device_memory=int(budget) if kind == "budget" else None, **kw)
                except (at.Error, MemoryError) as e:
                    log(f"  {model} x{devices} batch {batch}: {kind} plan failed: {common.error_text(e)}")
                    break
                times[kind].append(time.process_time() - t0)
                plan = p if kind == "budget" else plan
        if not times["budget"] or not times["plain"]:
            continue
        row = _timing(model, devices, batch, budget, statistics.median(times["plain"]),
                      statistics.median(times["budget"]), plan)
        row["runs"] = repeat
        log(f"  {model} x{devices} batch {batch} at {budget / 1e9:g} GB: plain {row['plain_cpu_seconds']:.2f} s, "
            f"budget {row['budget_cpu_seconds']:.2f} s CPU")
        got.append(row)
    return got


def planning_table(timings) -> str:
    """The planning-time table of JSON rows from :func:`_timing`."""
    rows = [[f"{t['model']} x{t['devices']}", t["batch"], f"{t['budget'] / 1e9:.2f} GB",
             f"{t['plain_cpu_seconds']:.2f}", f"{t['budget_cpu_seconds']:.2f}", f"{t['ratio']:.1f}x",
             "swap" if t["swapped"] else f"w = {t['memory_weight']:g}",
             "yes" if t["ratio"] <= TARGET_PLANNING else "NO"] for t in timings if t["ratio"] is not None]
    return common.table(["model x devices", "batch", "budget", "plain CPU s", "budgeted CPU s", "ratio", "plan",
                         f"<= {TARGET_PLANNING:g}x"], rows)


def genetic(case, batch, plan, budget, seconds, log):
    """{profile: step of the genetic schedule search's best schedule (SwapAdvisor Ch. 4.4,
    planner/swap_search.py) over the unconstrained plan's step}, each searched on its profile
    for `seconds`."""
    from autotile.planner.swap_search import genetic_schedule
    from autotile.sim.simulator import simulate

    free = case.free(batch)[1]
    got = {}
    for p in PROFILES:
        found = genetic_schedule(case.model, plan, budget, profile=p, generations=50, population=8, seed=0,
                                 time_limit=seconds, log=False)
        got[p] = found.step_seconds / simulate(free, p).step_seconds
        log(f"  {case.model} batch {batch} swap schedule search on {p}: {found.speedup:.3f}x the serial schedule "
            f"({found.evaluated} schedules, {found.generations} generations)")
    return got


def half_the_need(case, batch, log, out, ga_seconds):
    """The issue's target case, "a model needing 2x the budget": `case.model` at `batch` (the
    largest the plain search fits at the table's budget) with a budget of 1/TARGET_NEED of what
    its unconstrained plan needs, trained by the memory-aware search (swapping when no
    partition fits)."""
    free = case.free(batch)
    if free is None:
        return None
    need = _peak(free[1])
    half = Case(case.model, case.devices, need // TARGET_NEED, case.timings)
    half._free = case._free  # the same unconstrained plans
    t0 = time.perf_counter()
    got = half.fitted(batch)
    log(f"  {case.model} batch {batch} at 1/{TARGET_NEED:g} of its need: {'fits' if got else 'does not fit'} "
        f"({time.perf_counter() - t0:.0f} s)")
    label = f"{case.model} x{case.devices}"
    if got is None:
        alone = re.search(r"node '([^']+)' alone needs (\S+ \S+)", half.why.get(batch, ""))
        how = f"does not fit: '{alone[1]}' needs {alone[2]} at once" if alone else "does not fit"
        return [label, batch, f"{half.budget / 1e9:.2f} GB", how, "-", "-", "-", "-", "-"]
    ratio = half.step_ratio(batch, got[1])
    swapped = got[0].swap_budget is not None
    ga = genetic(case, batch, got[0], half.budget, ga_seconds, log) if swapped and ga_seconds > 0 else None
    out.append({"model": case.model, "devices": case.devices, "method": "half the need", "batch": batch,
                "need_bytes": need,
                "budget": half.budget, "swapped": swapped, "step_vs_unconstrained": ratio,
                "genetic_step_vs_unconstrained": ga})
    best = {p: min(ratio[p], ga[p]) if ga else ratio[p] for p in PROFILES}
    return [label, batch, f"{half.budget / 1e9:.2f} GB", "swap" if swapped else "search",
            _ratio(ratio["p2.8xlarge"]), _ratio(ratio["dgx-a100"]),
            _ratio(ga and ga["p2.8xlarge"]), _ratio(ga and ga["dgx-a100"]),
            "yes" if max(best.values()) <= TARGET_STEP else "NO"]


def _budget_gb(text: str) -> float:
    """--budget-gb: a positive finite number (0 used to fall back to the default silently, and
    nan or -1 planned for no memory); a usage error (exit 2) otherwise."""
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number of GB, got {text!r}")
    return value


def main(argv=None) -> int:
    p = common.arg_parser(__doc__.split("\n")[0])
    for action in p._actions:  # not the simulator benches' "< 2 minutes": up to four 30 s GA searches
        if action.dest == "quick":
            action.help = ("WResNet-50-1 and RNN-2-2K on 4 devices at 0.8 GB: about 5 minutes on 2 cores, of which "
                           "up to 2 minutes are genetic schedule searches (30 s each)")
    p.add_argument("--budget-gb", type=_budget_gb, default=None, help="per-device memory (default 12, quick 0.8)")
    p.add_argument("--widths", action="store_true", help="the largest-width sweep per device count instead")
    p.add_argument("--models", default=None, help="comma-separated subset of the table's models")
    p.add_argument("--host", action="store_true",
                   help="measure swapping on the host runtime against the simulator instead (swap_host.py)")
    p.add_argument("--planning", action="store_true",
                   help="only the planning-time table: at.plan with the budget against without")
    p.add_argument("--repeat", type=int, default=1, help="runs per planning-time case (the median is shown)")
    args = p.parse_args(argv)
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    cases = QUICK_PLANNING if args.quick else PLANNING
    if args.models:
        cases = [c for c in cases if c[0] in args.models.split(",")]
        if args.planning and not cases:
            p.error(f"--models: none of the planning cases ({', '.join(c[0] for c in PLANNING + QUICK_PLANNING)})")
    planning_head = (f"Planning time: CPU seconds of at.plan with device_memory against without (process_time, "
                     f"median of {args.repeat}; the plan column: the memory weight chosen, or swap when no "
                     f"partition fits)\n")
    if args.planning:
        timings = planning_times(cases, args.repeat, log)
        text = planning_head + planning_table(timings)
        print(text)
        common.write_json("memory_planning.json", {"rows": timings, "table": text})
        return 0
    if args.widths:
        return width_sweep(args)
    if args.host:
        from .swap_host import host_table

        print(host_table(args.quick, lambda s: print(s, file=sys.stderr, flush=True)))
        return 0
    cfg = dict(QUICK if args.quick else FULL)
    if args.models:
        want = args.models.split(",")
        unknown = sorted(set(want) - {m for m, _, _ in cfg["models"]})
        if unknown:
            p.error(f"--models: not in this table: {', '.join(unknown)} (it has "
                    f"{', '.join(m for m, _, _ in cfg['models'])})")
        cfg["models"] = [m for m in cfg["models"] if m[0] in want]
    if args.budget_gb:
        cfg["budget"] = args.budget_gb * 1e9
    t0 = time.perf_counter()
    rows, sweep, targets, out = budget_table(cfg, lambda s: print(s, file=sys.stderr, flush=True))
    budget = cfg["budget"]
    text = (f"Largest batch that trains at {budget / 1e9:.1f} GB per device on {cfg['devices']} devices "
            f"(memory COMPUTED by the memory plan, step SIMULATED, relative to the unconstrained plan at that batch)\n"
            + common.table(["model", "method", "largest batch", "need/budget", "peak/device",
                            "step vs free (p2.8xlarge)", "step vs free (dgx-a100)", "SwapAdvisor Ch. 5"], rows)
            + "\n\nEvery batch +swap trained (need = arena without swapping)\n"
            + common.table(["model", "batch", "need/budget", "step vs free (p2.8xlarge)", "step vs free (dgx-a100)"],
                           sweep)
            + f"\n\nTarget: each model at the largest batch tofu fits, with a budget of 1/{TARGET_NEED:g} of what "
            f"its unconstrained plan needs, trains at <= {TARGET_STEP:g}x that plan's step time (x{cfg['devices']}: "
            f"the table's devices, whose swaps share the profiles' host uplinks; x1: one device and its own host link, "
            f"SwapAdvisor's setting, at the same batch per device)\n"
            + common.table(["model x devices", "batch", "budget", "how", "step vs free (p2.8xlarge)", "step vs free (dgx-a100)",
                            "+ schedule search (p2.8xlarge)", "+ schedule search (dgx-a100)", f"<= {TARGET_STEP:g}x"],
                           targets))
    # the target rows executed: small members of each family at half their need (swap_steps.py)
    from .swap_steps import executed_table

    text += "\n\n" + executed_table((1, 4) if args.quick else (1, cfg["devices"]),
                                      lambda s: print(s, file=sys.stderr, flush=True),
                                      ["rnn"] if args.quick else None)
    timings = planning_times(cases, args.repeat, log)
    out.extend(timings)
    text += ("\n\n" + planning_head + f"(first the planning cases, then every budgeted plan of the tables above, "
             "one run each)\n" + planning_table(timings + [r for r in out if r.get("method") == "planning time"
                                                           and r not in timings]))
    print(text)
    common.write_json("memory_fit.json", {"budget": budget, "devices": cfg["devices"], "rows": out,
                                          "quick": args.quick, "table": text})
    print(f"\n{time.perf_counter() - t0:.0f}s; raw numbers in {common.out_path('memory_fit.json')}")
    return 0


# ---------------------------------------------------------------------- --widths: the older sweep
WIDTH_ALGORITHMS = ("tofu", "data")


def width_peak(name: str, batch: int, devices: int, algorithm: str):
    """Largest device arena (bytes) of `name`'s plan, or an error text."""
    import autotile as at

    try:
        _, eg = common.plan_and_transform(at.models.get(name, batch=batch), devices, algorithm)
    except (at.Error, MemoryError) as e:
        return None, common.error_text(e)
    return _peak(eg), None


def largest_fitting(family, sizes, batch, devices, algorithm, budget, log):
    """Binary search over increasing `sizes` (memory grows with size) for the largest whose
    plan fits `budget`; returns (size or None, {size: bytes or error})."""
    seen = {}

    def fits(i):
        size = sizes[i]
        if size not in seen:
            mem, err = width_peak(family(size), batch, devices, algorithm)
            seen[size] = mem if err is None else err
            log(f"  {family(size)} batch {batch} on {devices} ({algorithm}): "
                f"{'%.2f GB' % (mem / 1e9) if err is None else err}")
        v = seen[size]
        return isinstance(v, int) and v <= budget

    lo, hi = 0, len(sizes) - 1
    if not fits(lo):
        return None, seen
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return sizes[lo], seen


def width_sweep(args) -> int:
    """The largest WResNet width / RNN hidden size whose plan fits, per device count."""
    from autotile.sim import load_profile

    hw = load_profile((args.profile or ["p2.8xlarge"])[0])
    budget = args.budget_gb * 1e9 if args.budget_gb else hw.memory_bytes
    if args.quick:
        budget = args.budget_gb * 1e9 if args.budget_gb else 1e9  # small models, small budget
        families = [("WResNet-50 width", lambda w: f"wresnet-50-{w}", [1, 2, 3, 4], 4),
                    ("RNN-2 hidden", lambda h: f"rnn-2-{h}", [256, 512, 1024, 2048], 64)]
        device_counts = [1, 2, 4]
    else:
        families = [("WResNet-152 width", lambda w: f"wresnet-152-{w}", list(range(1, 11)), 8),
                    ("RNN-4 hidden", lambda h: f"rnn-4-{h}", [1024, 2048, 4096, 6144, 8192, 12288], 512)]
        device_counts = [1, 2, 4, 8]
    log = lambda s: print(s, file=sys.stderr)  # noqa: E731
    rows, raw = [], []
    for label, family, sizes, batch in families:
        for k in device_counts:
            row = [label, batch, k]
            for algo in WIDTH_ALGORITHMS:
                best, seen = largest_fitting(family, sizes, batch, k, algo, budget, log)
                errors = [v for v in seen.values() if isinstance(v, str)]
                row.append(best if best is not None else ("n/a" if errors and len(errors) == len(seen) else "none"))
                raw.append({"family": label, "batch": batch, "devices": k, "algorithm": algo, "largest": best,
                            "peak_memory": {str(s): v for s, v in seen.items()}})
            rows.append(row)
    text = (f"Largest model whose plan fits {budget / 1e9:.1f} GB per device (memory plan of the ExecGraph, "
            f"COMPUTED; sizes tried: {', '.join(f'{l} {s}' for l, _, s, _ in families)}; n/a = no plan)\n"
            + common.table(["model", "batch", "devices", *WIDTH_ALGORITHMS], rows))
    print(text)
    common.write_json("memory_widths.json", {"budget_bytes": budget, "results": raw, "table": text})
    return 0


if __name__ == "__main__":
    sys.exit(common.run_main(main))
