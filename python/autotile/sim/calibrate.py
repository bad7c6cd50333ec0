"""Measure this machine for the ``host`` profile: the time of every distinct compute op of
some ExecGraphs (by op kind and tile shapes), run through the host runtime's own kernel
dispatch, and the cost of its MultiFetch ops (fixed overhead + bytes / bandwidth, fitted
by least squares over the fetches of the graphs)."""
from __future__ import annotations

import os
import platform
import time
from typing import Iterable, List, Optional

import numpy as np

from .cost_table import Calibration, op_tiles, shape_key

#: where `autotile bench calibrate` keeps this machine's measurements by default
DEFAULT_PATH = os.path.join(os.path.expanduser("~"), ".cache", "autotile", "calibration-host.json")


def default_path() -> str:
    """$AUTOTILE_CALIBRATION, else ~/.cache/autotile/calibration-host.json."""
    return os.environ.get("AUTOTILE_CALIBRATION", DEFAULT_PATH)


def _best_time(fn, repeat: int) -> float:
    """Least wall time of `fn` over `repeat` runs after a warm-up: on a machine other jobs
    share, the minimum is the estimate of the kernel's own cost least disturbed by them."""
    fn()  # warm up (first-touch page faults, BLAS thread start)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def _fetch_bytes(eg, op) -> int:
    total = 0
    for src, lo, hi in op["pieces"]:
        buf = eg.buffers[src]
        n = 1
        for l, h in zip(lo, hi):
            n *= int(h) - int(l)
        full = 1
        for l, h in zip(buf["lo"], buf["hi"]):
            full *= int(h) - int(l)
        total += n * (int(buf["bytes"]) // max(full, 1))
    return total


def calibrate_graphs(graphs: Iterable, calibration: Optional[Calibration] = None, repeat: int = 3,
                     max_fetches: int = 200, log=None) -> Calibration:
    """Time the compute ops of `graphs` (ExecGraphs) not measured yet, and the fetch cost;
    returns the (updated) Calibration. Kernels run on the arena's zeros: their time does not
    depend on the values."""
    from ..backend.host_runtime import HostRuntime

    cal = calibration or Calibration()
    rng = np.random.default_rng(0)
    samples: List[tuple] = []
    for eg in graphs:
        rt = HostRuntime(eg)
        measured = 0
        for op in eg.ops:
            if op["kind"] != "compute":
                continue
            kind, ins, outs = op_tiles(eg, op)
            if shape_key(kind, ins, outs) in cal.ops:
                continue
            cal.add(kind, ins, outs, _best_time(lambda: rt._compute(op, True, rng), repeat))
            measured += 1
        fetches = [op for op in eg.ops if op["kind"] == "fetch"]
        step = max(1, len(fetches) // max_fetches)
        for op in fetches[::step]:
            samples.append((_fetch_bytes(eg, op), _best_time(lambda: rt._fetch(op), repeat)))
        if log:
            log(f"calibrated {measured} new op shapes, {len(fetches[::step])} fetches "
                f"({eg.devices} devices, {len(eg.ops)} ops)")
        del rt
    if samples:
        cal.fetch.update(fit_fetch(samples, cal.fetch))
    cal.machine.update({"host": platform.node(), "processor": platform.processor() or platform.machine(),
                        "cpus": os.cpu_count(), "numpy": np.__version__,
                        "date": time.strftime("%Y-%m-%d %H:%M:%S")})
    return cal


def fit_fetch(samples: List[tuple], previous: Optional[dict] = None) -> dict:
    """Least-squares fit of t = overhead + bytes / bandwidth over (bytes, seconds) samples."""
    x = np.array([s[0] for s in samples], dtype=float)
    y = np.array([s[1] for s in samples], dtype=float)
    if len(samples) >= 2 and np.ptp(x) > 0:
        slope, intercept = np.polyfit(x, y, 1)
    else:
        slope, intercept = 0.0, float(np.median(y))
    if slope <= 0:  # all tiny fetches: keep any bandwidth measured before
        bandwidth = float((previous or {}).get("bandwidth", 5e9))
    else:
        bandwidth = 1.0 / slope
    return {"overhead": max(float(intercept), 0.0), "bandwidth": bandwidth, "latency": 0.0,
            "samples": len(samples)}


def calibration_graphs(quick: bool = False):
    """ExecGraphs whose ops `autotile bench calibrate` times: the simulator-validation models
    (MLP, AlexNet, VGG-16 at small batch and image size) on 1, 2 and 4 devices."""
    from .. import planner
    from ..execgraph import transform
    from ..models import alexnet, mlp, vgg

    models = [mlp(64, layers=4, hidden=1024), alexnet(8, image=96, classes=100)] if quick else \
        [mlp(128, layers=4, hidden=2048), alexnet(16, image=128, classes=200), vgg(16, 8, image=64, classes=200)]
    for sym in models:
        for k in ((1, 2) if quick else (1, 2, 4)):
            for algo in (("data",) if k == 1 else ("tofu", "data")):
                yield transform(sym, planner.plan(sym, devices=k, algorithm=algo))


def main(argv=None) -> int:
    """``autotile bench calibrate [--quick] [--out PATH]``: time this machine's kernels."""
    import argparse
    import sys

    p = argparse.ArgumentParser(prog="autotile bench calibrate")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default=None, help=f"calibration JSON (default {default_path()})")
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    path = args.out or default_path()
    cal = Calibration.load(path) if os.path.exists(path) else Calibration()
    t0 = time.perf_counter()
    cal = calibrate_graphs(calibration_graphs(args.quick), cal, repeat=args.repeat,
                           log=lambda s: print(s, file=sys.stderr))
    cal.save(path)
    f = cal.fetch
    print(f"calibrated {len(cal.ops)} op shapes of {len({e['kind'] for e in cal.ops.values()})} op kinds; "
          f"fetch: {f.get('overhead', 0) * 1e6:.0f} us + bytes / {f.get('bandwidth', 0) / 1e9:.2f} GB/s; "
          f"{time.perf_counter() - t0:.0f}s; written to {path}")
    return 0
