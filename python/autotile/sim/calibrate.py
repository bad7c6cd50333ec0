"""Measure this machine for the ``host`` profile: the time of every distinct compute op of
some ExecGraphs (by op kind and tile shapes), timed in place while the graph is replayed
serially through the host runtime's own kernel dispatch, and the cost of its MultiFetch ops
(fixed overhead + bytes / bandwidth, fitted by least squares over the fetches)."""
from __future__ import annotations

import os
import platform
import statistics
import time
from typing import Iterable, List, Optional

import numpy as np

from .cost_table import Calibration, op_tiles, shape_key

#: where `autotile bench calibrate` keeps this machine's measurements by default
DEFAULT_PATH = os.path.join(os.path.expanduser("~"), ".cache", "autotile", "calibration-host.json")


def default_path() -> str:
    """$AUTOTILE_CALIBRATION, else ~/.cache/autotile/calibration-host.json."""
    return os.environ.get("AUTOTILE_CALIBRATION", DEFAULT_PATH)


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


def step_inputs(eg, seed: int = 0):
    """Random values for every graph input of `eg` (labels are class ids below 10)."""
    rng = np.random.default_rng(seed)
    heads = set(eg.training.head_grad_names)
    values = {}
    for tid, name in enumerate(eg.lowered.tensor_names):
        if eg.core.tile(tid, 0) < 0 or eg.buffers[eg.core.tile(tid, 0)]["producer"] >= 0:
            continue
        shape = eg.lowered.tensor_shapes[tid]
        if name.endswith("label"):
            values[name] = rng.integers(0, 10, size=shape).astype(np.float32)
        elif name in heads:
            values[name] = np.ones(shape, np.float32)
        else:
            values[name] = (rng.standard_normal(shape) * 0.05).astype(np.float32)
    return values


def serial_order(eg) -> List[int]:
    """Every op of `eg` in one order that respects the dependencies, devices interleaved
    by their schedule position (how the devices' threads would meet them)."""
    import heapq

    rank = {}
    for d in range(eg.devices):
        for pos, i in enumerate(eg.schedule(d)):
            rank[i] = (pos, d)
    left = [len(o["deps"]) for o in eg.ops]
    users = [[] for _ in eg.ops]
    for i, o in enumerate(eg.ops):
        for dep in o["deps"]:
            users[dep].append(i)
    ready = [(rank[i], i) for i in range(len(eg.ops)) if left[i] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, i = heapq.heappop(ready)
        order.append(i)
        for j in users[i]:
            left[j] -= 1
            if left[j] == 0:
                heapq.heappush(ready, (rank[j], j))
    return order


def calibrate_graphs(graphs: Iterable, calibration: Optional[Calibration] = None, repeat: int = 3,
                     log=None, parallelism: bool = True) -> Calibration:
    """Time the compute ops of `graphs` (ExecGraphs) and fit the fetch cost.

    Each graph is replayed `repeat` times on one thread, every op in a dependency order
    (devices interleaved as their threads would meet the ops), on random inputs loaded
    before each replay; an op's time is its median over the replays. Timing kernels in place,
    rather than one kernel in a loop, keeps what a real step sees: cold caches, the
    allocator's page faults for large temporaries, the runtime's own dispatch. Shapes
    measured before (in `calibration`) are measured again and replaced. With `parallelism`,
    the cores the runtime's threads get now (:func:`measure_parallelism`) are recorded too."""
    from ..backend.host_runtime import HostRuntime, _blas_threads

    cal = calibration or Calibration()
    rng = np.random.default_rng(0)
    samples: List[tuple] = []
    for eg in graphs:
        rt = HostRuntime(eg)
        values = step_inputs(eg)
        order = serial_order(eg)
        per_key = {}
        fetch_times = {}
        # Kernels are timed with the BLAS threads each device thread gets in a real step.
        with _blas_threads(max(1, (os.cpu_count() or 1) // eg.devices)):
            for _ in range(repeat + 1):  # the first replay warms up (first touch of the arenas)
                rt.load(values)
                for i in order:
                    op = eg.ops[i]
                    t0 = time.perf_counter()
                    if op["kind"] == "compute":
                        rt._compute(op, True, rng)
                        per_key.setdefault(i, []).append(time.perf_counter() - t0)
                    else:
                        rt._fetch(op)
                        fetch_times.setdefault(i, []).append(time.perf_counter() - t0)
        by_shape = {}
        for i, ts in per_key.items():
            kind, ins, outs = op_tiles(eg, eg.ops[i])
            by_shape.setdefault(shape_key(kind, ins, outs), (kind, ins, outs, []))[3].extend(ts[1:])
        for kind, ins, outs, ts in by_shape.values():
            cal.add(kind, ins, outs, statistics.median(ts))
        for i, ts in fetch_times.items():
            samples.append((_fetch_bytes(eg, eg.ops[i]), statistics.median(ts[1:])))
        if log:
            log(f"calibrated {len(by_shape)} op shapes and {len(fetch_times)} fetches "
                f"({eg.devices} devices, {len(eg.ops)} ops)")
        del rt
    if samples:
        cal.fetch.update(fit_fetch(samples, cal.fetch))
    if parallelism:
        cal.machine["effective_cores"] = measure_parallelism()
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


def measure_parallelism(rounds: int = 3, n: int = 200) -> float:
    """How many cores two threads of NumPy kernels get now: 2 * t(1 thread) / t(2 threads),
    median of `rounds`, between 1 and the CPU count. On a machine other jobs share it is
    below the core count, and the host profile's `cores` must be what the runtime gets."""
    import threading

    a = np.random.default_rng(0).random((256, 256), dtype=np.float32)
    v = np.random.default_rng(1).random(1 << 16, dtype=np.float32)

    def work():
        for _ in range(n):  # a BLAS kernel and an element-wise one, as a training step mixes
            np.dot(a, a)
            np.maximum(v, 0, out=np.empty_like(v))

    def timed(threads):
        ts = [threading.Thread(target=work) for _ in range(threads)]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return time.perf_counter() - t0

    work()
    ratios = [2 * timed(1) / timed(2) for _ in range(rounds)]
    return float(min(max(statistics.median(ratios), 1.0), float(os.cpu_count() or 1)))
