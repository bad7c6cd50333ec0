"""The measurements behind ``autotile bench validate``: for each validation model and device
count, the host runtime's measured step and the graph's own calibration (every op and fetch
timed alone and contended), kept in one JSON dataset so that fits and simulations can be
redone from it without measuring again (``autotile bench validate --from DATASET``).

A dataset entry is ``{"model", "devices", "algorithm", "steps": [seconds of each undisturbed
step], "disturbed": [seconds of the steps other processes took CPU time during], "load":
[1-minute load average before, after], "calibration": {"ops", "fetches"}}`` (the calibration
of that graph alone, :meth:`autotile.sim.Calibration.save`'s fields), plus the machine
figures measured once (``machine``: effective cores, wake-up latency, dispatch costs).

Noise. Other jobs share this machine. A step during which another process used CPU time is
re-run (up to ``max_tries``); ops are timed by their thread's CPU time (one BLAS thread),
which other jobs do not inflate; the load average is kept beside each entry."""
from __future__ import annotations

import json
import os
import time
from typing import Callable, Dict, List, Optional

from autotile.sim.calibrate import busy_cpu_seconds, measure_steps, step_time, timed_step  # noqa: F401  (swap_host)

#: device counts every model is measured on
DEVICES = (1, 2, 4, 8)


def cases(quick: bool):
    """(label, Symbol builder) of the validation models; sizes that run in seconds on 2 cores."""
    from autotile.models import alexnet, mlp, vgg
    from autotile.models.digits import cnn_digits
    from autotile.models.transformer import decoder_lm

    if quick:
        return [("mlp-3-512 b64", lambda: mlp(64, layers=3, hidden=512)),
                ("cnn-digits-f32 b64", lambda: cnn_digits(64, filters=32))]
    return [("mlp-4-2048 b128", lambda: mlp(128, layers=4, hidden=2048)),
            ("alexnet-i128 b16", lambda: alexnet(16, image=128, classes=200)),
            ("vgg16-i64 b8", lambda: vgg(16, 8, image=64, classes=200)),
            ("transformer-d256 b8s64", lambda: decoder_lm(8, 64, 1, 256, 4, 1024, 512))]


def graphs(quick: bool, log: Callable[[str], None], only: Optional[List[str]] = None):
    """[(label, k, algorithm, ExecGraph or error text)] for every case and device count
    (tofu and data plans on 2 or more devices); `only`: labels to keep."""
    import autotile as at

    from . import common

    out = []
    for label, build in cases(quick):
        if only and label not in only:
            continue
        sym = build()
        for k in DEVICES:
            for algo in ("tofu", "data") if k > 1 else ("data",):
                try:
                    out.append((label, k, algo, at.transform(sym, at.plan(sym, devices=k, algorithm=algo))))
                except at.Error as e:
                    out.append((label, k, algo, common.error_text(e, 40)))
                    log(f"  {label} k={k} {algo}: {e}")
    return out


def wait_for_quiet(max_seconds: float = 180.0, idle: float = 0.9) -> float:
    """Waits (at most `max_seconds`) until the machine is idle -- over three 1-second windows
    in a row, at least `idle` of the CPU time unused -- so that a measurement sees this process
    alone; returns the seconds waited (this machine is shared with jobs that come and go)."""
    if not os.path.exists("/proc/stat"):
        return 0.0
    t0, quiet = time.perf_counter(), 0
    cpus = os.cpu_count() or 1
    while quiet < 3 and time.perf_counter() - t0 < max_seconds:
        b0 = busy_cpu_seconds()
        time.sleep(1.0)
        quiet = quiet + 1 if busy_cpu_seconds() - b0 < (1 - idle) * cpus else 0
    return time.perf_counter() - t0


def step_seconds(entry: dict) -> float:
    """The measured step of a dataset entry (:func:`autotile.sim.calibrate.step_time`)."""
    return step_time(entry["steps"], entry["disturbed"])


def key(label: str, k: int, algo: str) -> str:
    return f"{label}|{k}|{algo}"


def load_dataset(path: str) -> dict:
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return {"entries": {}, "machine": {}}


def save_dataset(path: str, data: dict) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def measure_dataset(path: str, quick: bool, repeat: int, log: Callable[[str], None], redo: bool = False,
                    only: Optional[List[str]] = None, max_tries: int = 30) -> dict:
    """Measure every validation graph not yet in the dataset at `path` (all with `redo`),
    saving after each one (a long run interrupted keeps what it measured)."""
    from autotile.sim.calibrate import calibrate_graphs, machine_dispatch, measure_parallelism, measure_wake_latency

    data = load_dataset(path)
    if redo or not data.get("machine"):
        data["machine"] = {"effective_cores": measure_parallelism(), "wake_latency_s": measure_wake_latency(),
                           **machine_dispatch()}
        data["machine_load"] = os.getloadavg()[0]
        save_dataset(path, data)
    for label, k, algo, eg in graphs(quick, log, only):
        name = key(label, k, algo)
        if isinstance(eg, str) or (name in data["entries"] and not redo):
            continue
        load0 = os.getloadavg()[0]
        cal = calibrate_graphs([eg], repeat=repeat, parallelism=False)
        steps, disturbed = measure_steps(eg, repeat, max_tries)
        entry: Dict[str, object] = {"model": label, "devices": k, "algorithm": algo, "steps": steps,
                                    "disturbed": disturbed, "load": [load0, os.getloadavg()[0]],
                                    "calibration": {"ops": cal.ops, "fetches": cal.fetches}}
        data["entries"][name] = entry
        save_dataset(path, data)
        log(f"  {name}: {step_seconds(entry) * 1e3:.1f} ms ({len(steps)} undisturbed, {len(disturbed)} disturbed; "
            f"load {load0:.1f})")
    return data
