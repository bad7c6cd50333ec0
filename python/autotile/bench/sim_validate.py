"""Validate the simulator against the host runtime on this machine.

For MLP, AlexNet and VGG-16 at small batch (small images, to keep each step under a second
or so) on k virtual devices: run the training step's ExecGraph with the host runtime
(median step time of a few runs, MEASURED) and simulate the same ExecGraph on the `host`
profile calibrated on this machine (SIMULATED); print both and the relative error.

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

    if quick:
        return [("mlp-4-1024 b64", lambda: mlp(64, layers=4, hidden=1024)),
                ("alexnet-i96 b8", lambda: alexnet(8, image=96, classes=100))]
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
        busy0, own0 = (_busy_cpu_seconds(), sum(os.times()[:2])) if have_proc else (0.0, 0.0)
        t0 = time.perf_counter()
        rt.run()
        t = time.perf_counter() - t0
        foreign = (_busy_cpu_seconds() - busy0) - (sum(os.times()[:2]) - own0) if have_proc else 0.0
        if i < 2:  # two warm-up steps: first-touch page faults of arenas and temporaries
            continue
        # clock ticks are 10 ms: allow one tick plus 3% of a core
        (disturbed if foreign > 0.011 + 0.03 * t else times).append(t)
        if len(times) >= repeat:
            break
    return statistics.median(times or disturbed), len(disturbed)


def main(argv=None) -> int:
    p = common.arg_parser(__doc__.split("\n")[0])
    p.add_argument("--calibration", default=None, help="calibration JSON (read and extended)")
    p.add_argument("--max-wait", type=float, default=None,
                   help="seconds to wait, per run, for other jobs on the machine to pause (default 180, --quick 20)")
    args = p.parse_args(argv)
    import autotile as at
    from autotile.sim import Calibration, Simulator, load_profile
    from autotile.sim.calibrate import calibrate_graphs, default_path

    path = args.calibration or default_path()
    cal = Calibration()  # measured afresh, next to the runs it is compared with
    profile = load_profile("host")
    devices = (1, 2) if args.quick else (1, 2, 4)
    algorithms = ("tofu", "data")
    repeat = 3 if args.quick else 5
    rows, raw = [], []
    t_start = time.perf_counter()
    load0 = os.getloadavg()[0]  # other jobs on this machine disturb the measurements
    waited = 0.0
    for label, build in cases(args.quick):
        sym = build()
        for k in devices:
            for algo in algorithms if k > 1 else ("data",):
                try:
                    plan = at.plan(sym, devices=k, algorithm=algo)
                    eg = at.transform(sym, plan)
                except at.Error as e:
                    rows.append((label, k, algo, "-", "-", "-", common.error_text(e, 40)))
                    continue
                waited += wait_for_quiet(args.max_wait if args.max_wait is not None else 20 if args.quick else 180)
                cal = calibrate_graphs([eg], cal, repeat=repeat)
                measured, thrown = measure(eg, repeat)
                sim = Simulator(profile, cal).run(eg)
                err = (sim.step_seconds - measured) / measured
                note = f"{thrown} disturbed steps re-run" if thrown else ""
                rows.append((label, k, algo, measured * 1e3, sim.step_seconds * 1e3, f"{100 * err:+.1f}%", note))
                raw.append({"model": label, "devices": k, "algorithm": algo, "measured_seconds": measured,
                            "simulated_seconds": sim.step_seconds, "error": err, "disturbed_steps": thrown, **{
                                f"sim_{k2}": v for k2, v in sim.summary().items() if k2 != "profile"}})
                print(f"  {label} k={k} {algo}: measured {measured * 1e3:.1f} ms, simulated "
                      f"{sim.step_seconds * 1e3:.1f} ms", file=sys.stderr)
    cal.save(path)
    headers = ("model", "devices", "algorithm", "measured ms", "simulated ms", "error", "note")
    print("Simulator vs host runtime on this machine (measured: host runtime, median of "
          f"{repeat} steps; simulated: 'host' profile calibrated here); load average "
          f"before/after: {load0:.1f}/{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; waited {waited:.0f}s "
          "in all for other jobs to pause")
    print(common.table(headers, rows))
    errs = [abs(r["error"]) for r in raw]
    if errs:
        print(f"\nmean |error| {100 * statistics.mean(errs):.1f}%, max |error| {100 * max(errs):.1f}% "
              f"over {len(errs)} runs; calibration: {path}; {time.perf_counter() - t_start:.0f}s")
    common.write_json("sim_validate.json", {"rows": raw, "calibration": path, "fetch": cal.fetch})
    plt = common.pyplot()
    if raw:
        fig, ax = plt.subplots(figsize=(5, 5))
        xs = [r["measured_seconds"] * 1e3 for r in raw]
        ys = [r["simulated_seconds"] * 1e3 for r in raw]
        ax.scatter(xs, ys)
        for r, x, y in zip(raw, xs, ys):
            ax.annotate(f"{r['model'].split()[0]} k{r['devices']} {r['algorithm']}", (x, y), fontsize=6)
        lim = [0, max(xs + ys) * 1.1]
        ax.plot(lim, lim, "k--", lw=0.8)
        ax.plot(lim, [1.25 * v for v in lim], "r:", lw=0.6)
        ax.plot(lim, [0.75 * v for v in lim], "r:", lw=0.6)
        ax.set_xlabel("measured step (ms, host runtime)")
        ax.set_ylabel("simulated step (ms, host profile)")
        ax.set_title("simulator validation (dotted: +-25%)")
        common.save_figure(fig, "sim_validate.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
