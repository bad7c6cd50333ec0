"""Validate the simulator against the host runtime on this machine, in and out of sample.

For MLP, AlexNet and VGG-16 at small batch (small images, to keep each step under a second
or so; --quick: a small MLP and the digits CNN) on 1, 2, 4 and 8 virtual devices: run the
training step's ExecGraph with the host runtime (median step time of a few runs, MEASURED)
and simulate it on the `host` profile three ways:

- in-sample: calibrated on the very graph simulated (every op and fetch measured; this tests
  the scheduler, cores and contention model over measured durations). The 1- and 2-device
  graphs; the 4- and 8-device ones too with --in-sample-all (calibrating them is slow).
- devices held out: the host profile *fitted* (autotile.sim.fit: per-kind roofline efficiency
  as a function of tile FLOPs, fetch cost model, co-runner slowdowns) to the 1- and 2-device
  graphs of every model, predicting every graph; the 4- and 8-device rows are out of sample.
  (The runtime gives a 1-device step every core's BLAS threads and k devices one each: the
  1-device rows use the fit to the 1-device graphs, the others the fit to the 2-device ones.)
- model held out: the same fit to the 1- and 2-device graphs of the *other* models only.

    autotile bench validate [--quick]
"""
from __future__ import annotations

import os
import statistics
import sys
import time

# One BLAS thread per virtual device, before NumPy loads: k device threads each running a
# 2-thread OpenBLAS oversubscribe the 2 cores (spinning workers); the host profile says so.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from . import common


def cases(quick: bool):
    """(label, Symbol builder) of the validation models; small images keep steps short."""
    from autotile.models import alexnet, mlp, vgg

    from autotile.models.digits import cnn_digits

    if quick:
        return [("mlp-3-512 b64", lambda: mlp(64, layers=3, hidden=512)),
                ("cnn-digits-f32 b64", lambda: cnn_digits(64, filters=32))]
    return [("mlp-4-2048 b128", lambda: mlp(128, layers=4, hidden=2048)),
            ("alexnet-i128 b16", lambda: alexnet(16, image=128, classes=200)),
            ("vgg16-i64 b8", lambda: vgg(16, 8, image=64, classes=200))]


def _busy_cpu_seconds() -> float:
    """CPU seconds the whole machine has been busy (user+nice+system+irq+softirq+steal)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def wait_for_quiet(max_seconds: float = 180.0, idle: float = 0.9) -> float:
    """Waits (at most `max_seconds`) until the machine is idle -- over three 1-second windows
    in a row, at least `idle` of the CPU time unused -- so that calibration and measurement
    see this process alone; returns the seconds waited (this machine is shared with builds
    and test runs that come and go)."""
    if not os.path.exists("/proc/stat"):
        return 0.0
    t0, quiet = time.perf_counter(), 0
    cpus = os.cpu_count() or 1
    while quiet < 3 and time.perf_counter() - t0 < max_seconds:
        b0 = _busy_cpu_seconds()
        time.sleep(1.0)
        quiet = quiet + 1 if _busy_cpu_seconds() - b0 < (1 - idle) * cpus else 0
    return time.perf_counter() - t0


def timed_step(rt, check: bool = True):
    """(wall seconds of one step of HostRuntime `rt`, whether no other process took CPU time
    during it). Clock ticks are 10 ms: one tick plus 3% of a core is allowed."""
    busy0, own0 = (_busy_cpu_seconds(), sum(os.times()[:2])) if check else (0.0, 0.0)
    t0 = time.perf_counter()
    rt.run()
    t = time.perf_counter() - t0
    if not check:
        return t, True
    foreign = (_busy_cpu_seconds() - busy0) - (sum(os.times()[:2]) - own0)
    return t, foreign <= 0.011 + 0.03 * t


def measure(eg, repeat: int, max_tries: int = 30):
    """Median step time of the host runtime on `eg` (after two warm-up steps), and how many
    steps were thrown away because other processes took CPU time during them (this machine is
    shared: a step during which another job ran measures that job, not the runtime; the
    simulator models the runtime alone). After `max_tries` steps it keeps what it has."""
    from autotile.backend.host_runtime import HostRuntime

    from autotile.sim.calibrate import step_inputs

    have_proc = os.path.exists("/proc/stat")
    rt = HostRuntime(eg)
    values = step_inputs(eg)
    times, disturbed = [], []
    for i in range(max_tries + 2):
        rt.load(values)  # the memory plan reuses input regions: reload before every step
        t, undisturbed = timed_step(rt, check=have_proc)
        if i < 2:  # two warm-up steps: first-touch page faults of arenas and temporaries
            continue
        (times if undisturbed else disturbed).append(t)
        if len(times) >= repeat:
            break
    return statistics.median(times or disturbed), len(disturbed)


CALIBRATE_ON = (1, 2)  #: device counts the out-of-sample fits are calibrated on


def _graphs(quick: bool, log):
    """[(label, k, algorithm, ExecGraph or error text)] for every case and device count."""
    import autotile as at

    out = []
    for label, build in cases(quick):
        sym = build()
        for k in (1, 2, 4, 8):
            for algo in ("tofu", "data") if k > 1 else ("data",):
                try:
                    out.append((label, k, algo, at.transform(sym, at.plan(sym, devices=k, algorithm=algo))))
                except at.Error as e:
                    out.append((label, k, algo, common.error_text(e, 40)))
                    log(f"  {label} k={k} {algo}: {e}")
    return out


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

    groups = [("in-sample (calibrated on the graph itself)", "in_sample", lambda r: True),
              ("in-sample without the dispatch terms (ablation)", "in_sample_no_dispatch", lambda r: True),
              ("fitted host profile, devices 1-2 (training rows)", "devices_out", lambda r: r["devices"] in CALIBRATE_ON),
              ("fitted host profile, devices 4-8 held out", "devices_out", lambda r: r["devices"] not in CALIBRATE_ON),
              ("fitted host profile, model held out", "model_out", lambda r: True)]
    rows = []
    for name, key, pick in groups:
        st = relative_errors([(r[key], r["measured_seconds"]) for r in raw if pick(r) and r.get(key) is not None])
        if st:
            rows.append((name, st["n"], f"{100 * st['mean']:.1f}%", f"{100 * st['median']:.1f}%",
                         f"{100 * st['max']:.1f}%"))
    return rows


def main(argv=None) -> int:
    p = common.arg_parser(__doc__.split("\n")[0])
    p.add_argument("--calibration", default=None, help="calibration JSON written (all graphs measured)")
    p.add_argument("--in-sample-all", action="store_true",
                   help="also calibrate the 4- and 8-device graphs for in-sample errors there (slow)")
    p.add_argument("--max-wait", type=float, default=None,
                   help="seconds to wait, per run, for other jobs on the machine to pause (default 120, --quick 2)")
    args = p.parse_args(argv)
    from autotile.sim import Calibration, Simulator, load_profile
    from autotile.sim.calibrate import (calibrate_graphs, default_path, machine_dispatch, measure_parallelism,
                                        measure_wake_latency)
    from autotile.sim.fit import entry_errors, fitted

    def log(s):
        print(s, file=sys.stderr, flush=True)

    path = args.calibration or default_path()
    profile = load_profile("host")
    repeat = 3 if args.quick else 5
    max_wait = args.max_wait if args.max_wait is not None else 2 if args.quick else 120
    t_start = time.perf_counter()
    load0 = os.getloadavg()[0]  # other jobs on this machine disturb the measurements
    waited = wait_for_quiet(max_wait)
    machine = {"effective_cores": measure_parallelism(), "wake_latency_s": measure_wake_latency(),
               **machine_dispatch()}
    log("runtime dispatch: " + ", ".join(f"{k} {v * 1e6:.1f} us" for k, v in machine.items() if k.endswith("_s")))
    runs = []  # (label, k, algo, eg, measured, own calibration or None)
    for label, k, algo, eg in _graphs(args.quick, log):
        if isinstance(eg, str):
            runs.append((label, k, algo, eg, None, None))
            continue
        waited += wait_for_quiet(max_wait)
        own = None
        if k in CALIBRATE_ON or args.in_sample_all:
            own = calibrate_graphs([eg], repeat=repeat, parallelism=False)
            own.machine.update(machine)
        measured, thrown = measure(eg, repeat, max_tries=8 if args.quick else 30)
        runs.append((label, k, algo, eg, (measured, thrown), own))
        log(f"  {label} k={k} {algo}: measured {measured * 1e3:.1f} ms")
    train = [r for r in runs if r[5] is not None and r[1] in CALIBRATE_ON]

    def fit(k, leave_out=None):
        """The fitted simulator for k-device graphs: kernels on 1 device run with every core's
        BLAS threads, on more devices with one each (as the runtime gives them), so each
        regime is fitted on its own graphs; None when nothing is left to fit on."""
        cals = [r[5] for r in train if (r[1] == 1) == (k == 1) and r[0] != leave_out]
        return Simulator(*fitted(Calibration.merged(cals))) if cals else None

    devices_out = {1: fit(1), 2: fit(2)}
    model_out = {(label, one): fit(1 if one else 2, label) for label in {r[0] for r in runs} for one in (True, False)}
    rows, raw, op_rows = [], [], []
    for label, k, algo, eg, meas, own in runs:
        if meas is None:
            rows.append((label, k, algo, "-", "-", "-", "-", eg))
            continue
        measured, thrown = meas
        r = {"model": label, "devices": k, "algorithm": algo, "measured_seconds": measured, "disturbed_steps": thrown,
             "in_sample": Simulator(profile, own).run(eg).step_seconds if own is not None else None,
             "in_sample_no_dispatch": Simulator(*_without_dispatch(profile, own)).run(eg).step_seconds
             if own is not None else None,
             "devices_out": devices_out[min(k, 2)].run(eg).step_seconds,
             "model_out": model_out[label, k == 1].run(eg).step_seconds if model_out[label, k == 1] else None}
        raw.append(r)
        err = {key: None if r[key] is None else (r[key] - measured) / measured
               for key in ("in_sample", "devices_out", "model_out")}
        rows.append((label, k, algo, measured * 1e3, _pct(err["in_sample"]), _pct(err["devices_out"]),
                     _pct(err["model_out"]), f"{thrown} disturbed steps re-run" if thrown else ""))
        if own is not None:  # per-op CPU times of this graph against the fitted models' prices
            sim_for = {"devices_out": devices_out[2]} if k not in CALIBRATE_ON else {}
            if model_out[label, k == 1]:
                sim_for["model_out"] = model_out[label, k == 1]
            for key, simulator in sim_for.items():
                e = entry_errors(simulator, own)
                r[key + "_entries"] = e
                op_rows.append((label, k, algo, key.replace("_", " "), _abs_pct(e.get("ops")),
                                _abs_pct(e.get("fetches")), _pct(e.get("total"))))
    Calibration.merged([r[5] for r in runs if r[5] is not None]).save(path)
    print("Simulator vs host runtime on this machine (measured: host runtime, median of "
          f"{repeat} steps; error of the simulated step: in-sample = calibrated on that graph, "
          f"devices out = host profile fitted on {CALIBRATE_ON[0]}-{CALIBRATE_ON[-1]} devices of every model, "
          f"model out = fitted on {CALIBRATE_ON[0]}-{CALIBRATE_ON[-1]} devices of the other models); load average "
          f"before/after: {load0:.1f}/{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; waited {waited:.0f}s "
          "in all for other jobs to pause")
    print(common.table(("model", "devices", "algorithm", "measured ms", "in-sample", "devices out",
                        "model out", "note"), rows))
    print()
    print(common.table(("prediction", "runs", "mean |error|", "median |error|", "max |error|"), _stats_rows(raw)))
    if op_rows:
        print("\nOut-of-sample op prices: the fitted models against each op and fetch shape of the graph timed "
              "alone (thread CPU time on 2+ devices: other jobs do not inflate it); median |error| per shape, and "
              "the error of the sum over the graph's shapes")
        print(common.table(("model", "devices", "algorithm", "fit", "ops median", "fetches median", "sum"), op_rows))
    print(f"\ncalibration: {path}; {time.perf_counter() - t_start:.0f}s")
    common.write_json("sim_validate.json", {"rows": raw, "calibration": path, "machine": machine,
                                            "fitted_profile": devices_out[2].hw.to_dict() if devices_out[2] else None})
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
