"""Helpers shared by the benchmarks: timing, tables, output files, plan-and-simulate."""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from typing import Callable, List, Sequence

from ..errors import install_hint


def default_out_dir() -> str:
    """Where tables' raw numbers and plots go: $AUTOTILE_BENCH_OUT if set (tests), else bench/out/
    of the source checkout this package runs from, else ./autotile-bench-out (an installed package)."""
    if os.environ.get("AUTOTILE_BENCH_OUT"):
        return os.environ["AUTOTILE_BENCH_OUT"]
    here = os.path.dirname(os.path.abspath(__file__))
    tree_bench = os.path.normpath(os.path.join(here, "..", "..", "..", "bench"))  # python/autotile/bench/
    if os.path.isfile(os.path.join(tree_bench, "common.py")):
        return os.path.join(tree_bench, "out")
    return os.path.join(os.getcwd(), "autotile-bench-out")


OUT_DIR = default_out_dir()


def median_seconds(fn: Callable[[], object], repeat: int = 5, warmup: int = 1) -> float:
    """Median wall time of `fn` over `repeat` runs after `warmup` runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def table(headers: Sequence[str], rows: List[Sequence]) -> str:
    """A plain-text table with right-aligned columns."""
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(c) -> str:
    if isinstance(c, float):
        if c == 0:
            return "0"
        if abs(c) >= 100:
            return f"{c:.0f}"
        if abs(c) >= 1:
            return f"{c:.2f}"
        return f"{c:.3g}"
    return str(c)


def write_json(name: str, data) -> str:
    os.makedirs(OUT_DIR, exist_ok=True)
    path = os.path.join(OUT_DIR, name)
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
    return path


def out_path(name: str) -> str:
    os.makedirs(OUT_DIR, exist_ok=True)
    return os.path.join(OUT_DIR, name)


# ---------------------------------------------------------------------------- shared by the
# simulator benchmarks (speedup, mlp, algorithms, memory_fit, sim_validate)

def arg_parser(description: str):
    """The options every simulator benchmark takes: --quick and --profile NAME (repeatable)."""
    import argparse

    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="small sizes (CI smoke run, < 2 minutes)")
    p.add_argument("--profile", action="append", default=None, type=profile_arg,
                   help="hardware profile name or JSON path (repeatable; default per benchmark)")
    return p


def profile_arg(text: str):
    """--profile: the loaded profile (load_profile passes it through), or a usage error (exit 2)
    naming the shipped profiles, before any work."""
    import argparse

    from autotile.errors import Error
    from autotile.sim import load_profile

    try:
        return load_profile(text)
    except Error as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def run_main(main) -> int:
    """Exit status of a benchmark's `main`: an autotile Error (a bad profile file, a model that
    cannot be planned) is one line on stderr and status 1, not a traceback."""
    from autotile.errors import Error

    try:
        return main() or 0
    except Error as e:
        print(f"autotile bench: error: {e}", file=sys.stderr)
        return 1


#: how to install what draws the benchmarks' plots
PLOT_EXTRA = install_hint("plot")


def plot_or_note(draw, *args, **kwargs):
    """`draw(*args, **kwargs)` (it writes a figure and returns its path) when matplotlib is
    installed; else None and one line on stderr naming the extra that adds it: a missing
    plotting library costs the plot only, never the tables or the JSON."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print(f"note: no plot written: matplotlib is not installed; {PLOT_EXTRA}", file=sys.stderr)
        return None
    return draw(*args, **kwargs)


def error_text(e: BaseException, width: int = 60) -> str:
    """One short line for a table cell: the first line of an error."""
    text = str(e).strip().split("\n")[0]
    return (text[: width - 3] + "...") if len(text) > width else text


def plan_and_transform(model, devices: int, algorithm: str, batch=None, **plan_kwargs):
    """(plan, ExecGraph) of `model` (zoo name or Symbol) on `devices` devices; autotile
    Errors propagate (a baseline not implemented yet, a model too large to plan)."""
    import autotile as at

    plan = at.plan(model, devices=devices, batch=batch, algorithm=algorithm, **plan_kwargs)
    return plan, at.transform(model, plan, replicate_fallback=plan_kwargs.get("replicate_fallback", False))


class Cache:
    """Memoises plan/transform/simulate results within one script run."""

    def __init__(self):
        self.items = {}

    def get(self, key, fn):
        if key not in self.items:
            try:
                self.items[key] = (fn(), None)
            except Exception as e:  # noqa: BLE001 - reported in the table row, the run goes on
                from autotile.errors import Error

                if not isinstance(e, (Error, MemoryError)):
                    raise
                self.items[key] = (None, e)
        return self.items[key]


def save_figure(fig, name: str) -> str:
    """Write a matplotlib figure to the output directory (OUT_DIR) as `name` and close it."""
    import matplotlib.pyplot as plt

    path = out_path(name)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def pyplot():
    """matplotlib.pyplot on the non-interactive Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


#: the algorithms of the speedup/MLP/algorithm comparisons, in table order
ALGORITHMS = ("tofu", "soybean", "data", "model", "owt", "hypar", "spartan")


def random_step_values(sym, seed: int = 0):
    """(values, shapes) for one training step of `sym`: every argument and auxiliary state
    filled (labels: integers in [0, 10); the rest: normal * 0.01, float32), and the shapes of
    the data and label inputs, which the planner needs."""
    import numpy as np

    arg_shapes, _, aux_shapes = sym.infer_shape()
    rng = np.random.default_rng(seed)
    vals = {}
    for name, shape in zip(sym.list_arguments() + sym.list_auxiliary_states(), arg_shapes + aux_shapes):
        vals[name] = (rng.integers(0, 10, shape).astype(np.float32) if name.endswith("label")
                      else (rng.standard_normal(shape) * 0.01).astype(np.float32))
    shapes = {k: v.shape for k, v in vals.items() if k == "data" or k.endswith("label")}
    return vals, shapes


def planning_bandwidths(hw, devices: int):
    """Per-cut bandwidths of profile `hw` for a plan on `devices` devices, normalised to the
    first cut (the planner weighs each cut's bytes by 1 / bandwidth; only ratios matter), or
    None when every cut crosses equally fast links or the profile cannot hold the devices."""
    from autotile import _core
    from autotile.errors import Error

    try:
        bw = hw.cut_bandwidths(_core.factorize(devices))
    except Error:
        return None
    return None if len(set(bw)) <= 1 else tuple(b / bw[0] for b in bw)


def simulate_config(model, devices: int, algorithm: str, profiles, batch=None, calibration=None,
                    replicate_fallback: bool = False):
    """Plan, transform and simulate `model` on each of `profiles` (Hardware objects); the plan
    weighs each cut by the profile's link bandwidths (one plan per distinct set of ratios).

    Returns {"ok": True, "comm_bytes", "search_seconds", "peak_memory", "sims": {profile:
    SimResult.summary()}} (the top-level figures are those of the first profile's plan) or
    {"ok": False, "error": short text} when planning or the transform fails (an algorithm not
    implemented yet, a graph too large). `replicate_fallback`: ops the algorithm leaves no
    strategy run replicated (autotile.plan's option)."""
    from autotile.errors import Error
    from autotile.sim import Simulator

    groups = {}
    for hw in profiles:
        groups.setdefault(planning_bandwidths(hw, devices), []).append(hw)
    result = {"ok": True, "sims": {}}
    for bandwidths, members in groups.items():
        try:
            plan, eg = plan_and_transform(model, devices, algorithm, batch=batch,
                                          bandwidths=list(bandwidths) if bandwidths else None,
                                          replicate_fallback=replicate_fallback)
        except (Error, MemoryError) as e:
            # `fallback`: the plan exists with replicate_fallback=True (ops run replicated)
            return {"ok": False, "error": error_text(e), "fallback": "replicate_fallback=True" in str(e)}
        figures = {"comm_bytes": plan.comm_bytes, "search_seconds": plan.search_seconds,
                   "peak_memory": max(eg.stats()["peak_memory"]), "bandwidths": plan.bandwidths}
        for key, value in figures.items():
            result.setdefault(key, value)
        for hw in members:
            sim = Simulator(hw, calibration).run(eg)
            result["sims"][hw.name] = dict(sim.summary(), device_compute=sim.device_compute,
                                           device_comm=sim.device_comm, plan=figures)
        del eg
    return result
