"""Validate the simulator against the host runtime on this machine, in and out of sample.

For an MLP, AlexNet, VGG-16 and a Transformer block at sizes that run in a second or less
on 2 cores (--quick: a small MLP and the digits CNN) on 1, 2, 4 and 8 virtual devices (tofu
and data plans): the host runtime's step is MEASURED and every graph calibrated (each op and
fetch timed alone and contended), into one dataset (autotile.bench.sim_measure; measured
once, kept, re-used with --from-data). Each step is then simulated three ways:

- in-sample: the `host` profile with the graph's own calibration (every op and fetch
  duration measured): tests the scheduler, core-sharing, contention and dispatch models.
- devices held out: a profile *fitted* (autotile.sim.fit) to the 1- and 2-device graphs of
  every model predicts the 4- and 8-device graphs (smaller tiles, other fetches), which no
  fit sees. (The runtime gives a 1-device step every core's BLAS threads and k devices one
  each: 1-device rows use the fit to the 1-device graphs, the others the 2-device fit.)
- model held out: the same fit to the 1- and 2-device graphs of the *other* models only
  predicts every graph of the model.

    autotile bench validate [--quick] [--data PATH] [--from-data] [--redo]
"""
from __future__ import annotations

import os
import sys
import time
from typing import Callable, Dict, List, Optional

# One BLAS thread per virtual device, before NumPy loads: k device threads each running a
# 2-thread OpenBLAS oversubscribe the 2 cores (spinning workers); the host profile says so.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from . import common
from .sim_measure import timed_step, wait_for_quiet  # noqa: F401  (bench/swap_host.py times its steps so)

CALIBRATE_ON = (1, 2)  #: device counts the out-of-sample fits are calibrated on


def entry_calibration(entry: dict, machine: dict):
    """The Calibration of one dataset entry (its graph's ops and fetches) with the dataset's
    machine figures."""
    from autotile.sim import Calibration

    return Calibration({**entry["calibration"], "machine": machine})


def training_entries(data: dict, devices: int, leave_out: Optional[str] = None) -> List[dict]:
    """The entries a fit for `devices`-device graphs is made from: the graphs on
    :data:`CALIBRATE_ON` devices of the same BLAS regime (1 device: every core's BLAS threads;
    more: one each), without model `leave_out`."""
    return [e for e in data["entries"].values() if e["devices"] in CALIBRATE_ON
            and (e["devices"] == 1) == (devices == 1) and e["model"] != leave_out]


def fitted_simulator(entries: List[dict], machine: dict, graph_of: Callable[[dict], object]):
    """A Simulator on the host profile fitted to `entries` alone (None without any): the op,
    fetch and slowdown models to their calibrations (:func:`autotile.sim.fit.fitted_profile`),
    then the serial per-op terms to their measured steps (:func:`autotile.sim.fit.with_serial_terms`)."""
    from autotile.bench.sim_measure import step_seconds
    from autotile.sim import Calibration, Simulator
    from autotile.sim.fit import fitted_profile, with_serial_terms

    if not entries:
        return None
    hw = fitted_profile(Calibration.merged([entry_calibration(e, machine) for e in entries]))
    return Simulator(with_serial_terms(hw, [(graph_of(e), step_seconds(e)) for e in entries]))


def predictions(data: dict, graph_of: Callable[[dict], object]) -> List[dict]:
    """A row per dataset entry: measured step, in-sample and out-of-sample simulated steps
    (devices held out: a row on 4+ devices; model held out: every row). `graph_of(entry)`
    gives the entry's ExecGraph."""
    from autotile.bench.sim_measure import step_seconds
    from autotile.sim import Simulator, load_profile

    machine = data["machine"]
    profile = load_profile("host")
    fits: Dict[tuple, object] = {}

    def fit(k, leave_out=None):
        regime = (k == 1, leave_out)
        if regime not in fits:
            fits[regime] = fitted_simulator(training_entries(data, k, leave_out), machine, graph_of)
        return fits[regime]

    rows = []
    for e in data["entries"].values():
        eg = graph_of(e)
        own = entry_calibration(e, machine)
        measured = step_seconds(e)
        held = fit(e["devices"])
        model_out = fit(e["devices"], e["model"])
        rows.append({"model": e["model"], "devices": e["devices"], "algorithm": e["algorithm"],
                     "measured_seconds": measured, "load": e["load"],
                     "undisturbed_steps": len(e["steps"]), "disturbed_steps": len(e["disturbed"]),
                     "in_sample": Simulator(_serial_terms(profile, held), own).run(eg).step_seconds,
                     "in_sample_no_dispatch": Simulator(*_without_dispatch(profile, own)).run(eg).step_seconds,
                     "devices_out": held.run(eg).step_seconds if held is not None else None,
                     "model_out": model_out.run(eg).step_seconds if model_out is not None else None})
        if e["devices"] not in CALIBRATE_ON and held is not None:
            rows[-1]["devices_out_entries"] = _entries(held, own)
        if model_out is not None:
            rows[-1]["model_out_entries"] = _entries(model_out, own)
    return rows


def _serial_terms(profile, fitted):
    """`profile` with the serial per-op terms of `fitted` (a fitted Simulator, or None)."""
    import copy

    from autotile.sim.fit import SERIAL_TERMS

    if fitted is None:
        return profile
    profile = copy.deepcopy(profile)
    for name, _ in SERIAL_TERMS:
        profile.device[name] = fitted.hw.device.get(name, 0.0)
    return profile


def _entries(simulator, own) -> dict:
    from autotile.sim.fit import entry_errors

    return entry_errors(simulator, own)


def _without_dispatch(profile, calibration):
    """(profile, calibration) with the runtime's dispatch terms off (no step or per-op
    overhead, no Python part under one lock): what the simulator predicted before it
    modelled them, to show what they account for."""
    import copy

    from autotile.sim import Calibration
    from autotile.sim.simulator import MACHINE_FIGURES

    hw = copy.deepcopy(profile)
    hw.device["gil"] = False
    cal = Calibration({"ops": calibration.ops, "fetches": calibration.fetches, "fetch": calibration.fetch,
                       "machine": dict(calibration.machine), "slowdowns": calibration.kind_slowdowns})
    for key in MACHINE_FIGURES:
        if key != "wake_latency_s":
            hw.device[key] = cal.machine[key] = 0.0
    return hw, cal


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def _abs_pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _stats_rows(raw):
    """Rows of (prediction, rows it covers, n, mean, median, max |error|)."""
    from autotile.sim.fit import relative_errors

    groups = [("in-sample (the graph's own op and fetch times)", "in_sample", lambda r: True),
              ("in-sample without dispatch and serial terms (ablation)", "in_sample_no_dispatch", lambda r: True),
              ("fitted host profile, devices 1-2 (training rows)", "devices_out", lambda r: r["devices"] in CALIBRATE_ON),
              ("fitted host profile, devices 4-8 held out", "devices_out", lambda r: r["devices"] not in CALIBRATE_ON),
              ("fitted host profile, model held out", "model_out", lambda r: True)]
    for model in dict.fromkeys(r["model"] for r in raw):
        groups.append((f"  {model}: devices 4-8 held out", "devices_out",
                       lambda r, m=model: r["model"] == m and r["devices"] not in CALIBRATE_ON))
        groups.append((f"  {model}: model held out", "model_out", lambda r, m=model: r["model"] == m))
    rows = []
    for name, key, pick in groups:
        st = relative_errors([(r[key], r["measured_seconds"]) for r in raw if pick(r) and r.get(key) is not None])
        if st:
            rows.append((name, st["n"], f"{100 * st['mean']:.1f}%", f"{100 * st['median']:.1f}%",
                         f"{100 * st['max']:.1f}%"))
    return rows


def main(argv=None) -> int:
    p = common.arg_parser(__doc__.split("\n")[0])
    p.add_argument("--data", default=None, help="measurement dataset JSON (default: sim_validate_data.json "
                   "in the bench output folder; --quick: sim_validate_quick_data.json)")
    p.add_argument("--from-data", action="store_true", help="measure nothing: evaluate the dataset as it is")
    p.add_argument("--redo", action="store_true", help="measure every graph again (else only those missing)")
    p.add_argument("--model", action="append", default=None, help="measure only this model (repeatable)")
    args = p.parse_args(argv)
    import autotile as at

    from autotile.bench.sim_measure import cases, load_dataset, measure_dataset

    def log(s):
        print(s, file=sys.stderr, flush=True)

    path = args.data or common.out_path("sim_validate_quick_data.json" if args.quick else "sim_validate_data.json")
    t_start = time.perf_counter()
    load0 = os.getloadavg()[0]
    if args.from_data:
        data = load_dataset(path)
        if not data["entries"]:
            raise at.Error(f"no measurements in {path}: run `autotile bench validate` without --from-data first")
    else:
        data = measure_dataset(path, args.quick, repeat=3 if args.quick else 5, log=log, redo=args.redo,
                               only=args.model, max_tries=8 if args.quick else 30)
    builders = dict(cases(args.quick))
    syms, graphs = {}, {}

    def graph_of(e):
        if e["model"] not in builders:
            raise at.Error(f"{path}: model '{e['model']}' is not one of this set's ({', '.join(builders)})")
        name = (e["model"], e["devices"], e["algorithm"])
        if name not in graphs:
            sym = syms.setdefault(e["model"], builders[e["model"]]())
            graphs[name] = at.transform(sym, at.plan(sym, devices=e["devices"], algorithm=e["algorithm"]))
        return graphs[name]

    raw = predictions(data, graph_of)
    loads = [x for r in raw for x in r["load"]]
    rows = []
    for r in raw:
        m = r["measured_seconds"]
        err = {key: None if r[key] is None else (r[key] - m) / m for key in ("in_sample", "devices_out", "model_out")}
        rows.append((r["model"], r["devices"], r["algorithm"], m * 1e3, _pct(err["in_sample"]),
                     _pct(err["devices_out"]) if r["devices"] not in CALIBRATE_ON else f"({_pct(err['devices_out'])})",
                     _pct(err["model_out"]), f"{r['undisturbed_steps']}+{r['disturbed_steps']}",
                     f"{min(r['load']):.1f}-{max(r['load']):.1f}"))
    print("Simulator vs host runtime on this machine (measured: host runtime step; in-sample = the graph's own "
          f"calibration; devices out = host profile fitted on {CALIBRATE_ON[0]}-{CALIBRATE_ON[-1]} devices of every "
          f"model, in parentheses the training rows; model out = fitted on {CALIBRATE_ON[0]}-{CALIBRATE_ON[-1]} "
          f"devices of the other models); load average while measured {min(loads):.1f}-{max(loads):.1f} on "
          f"{os.cpu_count()} cores (dataset {path})")
    print(common.table(("model", "devices", "algorithm", "measured ms", "in-sample", "devices out", "model out",
                        "steps ok+disturbed", "load"), rows))
    print()
    print(common.table(("prediction", "runs", "mean |error|", "median |error|", "max |error|"), _stats_rows(raw)))
    print(f"\nload average now {load0:.1f} -> {os.getloadavg()[0]:.1f}; {time.perf_counter() - t_start:.0f}s")
    common.write_json("sim_validate.json", {"rows": raw, "data": path, "machine": data["machine"]})
    common.plot_or_note(_plot, raw)
    return 0


def _plot(raw):
    plt = common.pyplot()
    if not raw:
        return
    fig, ax = plt.subplots(figsize=(5, 5))
    xs = [r["measured_seconds"] * 1e3 for r in raw]
    top = max(xs)
    for key, marker, name in (("in_sample", "o", "in-sample"), ("devices_out", "^", "fitted, devices 4-8 held out"),
                              ("model_out", "s", "fitted, model held out")):
        pts = [(r["measured_seconds"] * 1e3, r[key] * 1e3) for r in raw if r[key] is not None
               and (key != "devices_out" or r["devices"] not in CALIBRATE_ON)]
        if pts:
            ax.scatter(*zip(*pts), marker=marker, label=name, s=18)
            top = max(top, max(y for _, y in pts))
    lim = [0, top * 1.1]
    ax.plot(lim, lim, "k--", lw=0.8)
    ax.plot(lim, [1.25 * v for v in lim], "r:", lw=0.6)
    ax.plot(lim, [0.75 * v for v in lim], "r:", lw=0.6)
    ax.set_xlabel("measured step (ms, host runtime)")
    ax.set_ylabel("simulated step (ms, host profile)")
    ax.set_title("simulator validation (dotted: +-25%)")
    ax.legend(fontsize=7)
    common.save_figure(fig, "sim_validate.png")


if __name__ == "__main__":
    sys.exit(common.run_main(main))
