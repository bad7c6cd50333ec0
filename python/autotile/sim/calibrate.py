"""Measure this machine for the ``host`` profile: the time of every distinct compute op and
fetch of some ExecGraphs (by op kind and tile shapes), timed in place while the graph is
replayed through the host runtime's own kernel dispatch -- alone, and again with every core
replaying it at once (the co-runner slowdown) -- a fit of the fetch cost for fetch shapes
never measured, how long a device thread takes to resume after waiting on another one, how
many cores the runtime's threads get, and what the runtime spends around the ops (per step,
per op, and the Python part of an op, on graphs of tiny ops)."""
from __future__ import annotations

import os
import platform
import statistics
import threading
import time
from typing import Iterable, List, Optional

import numpy as np

from .cost_table import Calibration, fetch_key, fit_fetch, op_tiles, shape_key

#: where `autotile bench calibrate` keeps this machine's measurements by default
DEFAULT_PATH = os.path.join(os.path.expanduser("~"), ".cache", "autotile", "calibration-host.json")


def default_profile_path() -> str:
    """Where `autotile bench calibrate` writes the fitted profile without --out:
    ~/.cache/autotile/host-calibrated.json."""
    return os.path.join(os.path.expanduser("~"), ".cache", "autotile", "host-calibrated.json")


def default_path() -> str:
    """$AUTOTILE_CALIBRATION, else ~/.cache/autotile/calibration-host.json."""
    return os.environ.get("AUTOTILE_CALIBRATION", DEFAULT_PATH)


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


def busy_cpu_seconds() -> float:
    """CPU seconds the whole machine has been busy (user+nice+system+irq+softirq+steal)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def timed_step(rt, check: bool = True):
    """(wall seconds of one step of HostRuntime `rt`, whether no other process took CPU time
    during it). Clock ticks are 10 ms: one tick plus 3% of a core is allowed."""
    busy0, own0 = (busy_cpu_seconds(), sum(os.times()[:2])) if check else (0.0, 0.0)
    t0 = time.perf_counter()
    rt.run()
    t = time.perf_counter() - t0
    if not check:
        return t, True
    foreign = (busy_cpu_seconds() - busy0) - (sum(os.times()[:2]) - own0)
    return t, foreign <= 0.011 + 0.03 * t


def measure_steps(eg, repeat: int, max_tries: int = 30):
    """([undisturbed step seconds], [disturbed step seconds]) of the host runtime on `eg`,
    after two warm-up steps (first touch of arenas and temporaries); stops at `repeat`
    undisturbed steps or `max_tries` steps."""
    from ..backend.host_runtime import HostRuntime

    have_proc = os.path.exists("/proc/stat")
    rt = HostRuntime(eg)
    values = step_inputs(eg)
    times, disturbed = [], []
    for i in range(max_tries + 2):
        rt.load(values)  # the memory plan reuses input regions: reload before every step
        t, undisturbed = timed_step(rt, check=have_proc)
        if i < 2:
            continue
        (times if undisturbed else disturbed).append(t)
        if len(times) >= repeat:
            break
    return times, disturbed


def step_time(undisturbed: List[float], disturbed: List[float]) -> float:
    """The step a measurement stands for: the median of its undisturbed steps, else the
    fastest disturbed one (the least disturbed; other jobs only slow a step down)."""
    return statistics.median(undisturbed) if undisturbed else min(disturbed)


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


def _replay_times(eg, order, repeat: int, clock, rng_seed: int = 0, barrier=None):
    """{op index: [seconds]} of `repeat` replays of `eg` on a fresh host runtime, in `order`,
    each op timed with `clock`; one warm-up replay first (first touch of the arenas). With a
    `barrier`, every op starts when the other replaying threads start it too."""
    from ..backend.host_runtime import HostRuntime

    rt = HostRuntime(eg)
    values = step_inputs(eg)
    rng = np.random.default_rng(rng_seed)
    times = {}
    for r in range(repeat + 1):
        rt.load(values)
        for i in order:
            op = eg.ops[i]
            if barrier is not None:
                barrier.wait()
            t0 = clock()
            if op["kind"] == "compute":
                rt._compute(op, True, rng)
            else:
                rt._fetch(op)
            if r:
                times.setdefault(i, []).append(clock() - t0)
    return times


def _threaded_replays(eg, order, repeat: int, threads: int, clock, blas: int):
    """{op index: [seconds]} pooled over `threads` threads that each replay `eg` at once, in
    step, on a runtime of their own (`_replay_times`). Replays run on worker threads, as the runtime's
    ops do: NumPy's temporaries then come from a thread's own malloc arena, which in the main
    thread behaves differently (large ops measured there ran up to 3x slower)."""
    from ..backend.host_runtime import _blas_threads

    results = [None] * threads
    # in step: in a real step the devices run the same op at about the same time (SPMD plans),
    # so an op's co-runners are copies of itself (memory-bound ops meet memory-bound ops)
    barrier = threading.Barrier(threads) if threads > 1 else None

    def replay(j):
        results[j] = _replay_times(eg, order, repeat, clock, rng_seed=j, barrier=barrier)

    with _blas_threads(blas):
        ts = [threading.Thread(target=replay, args=(j,)) for j in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    times = {}
    for res in results:
        for i, t in res.items():
            times.setdefault(i, []).extend(t)
    return times


def calibrate_graphs(graphs: Iterable, calibration: Optional[Calibration] = None, repeat: int = 3,
                     log=None, parallelism: bool = True, contended: bool = True) -> Calibration:
    """Time the compute ops and fetches of `graphs` (ExecGraphs) and fit the fetch cost.

    Each graph is replayed `repeat` times on one worker thread, every op in a dependency order
    (devices interleaved as their threads would meet the ops), on random inputs loaded
    before each replay; an op's time is its median over the replays (the fastest replay when
    timed by the wall clock, see below). Timing kernels in place,
    rather than one kernel in a loop, keeps what a real step sees: cold caches, the
    allocator's page faults for large temporaries, the runtime's own dispatch. Kernels run
    with the BLAS threads a device thread gets in a real step; with one BLAS thread an op is
    timed by its thread's CPU time, which other jobs on the machine do not inflate.

    With `contended` (graphs of 2 or more devices, hosts of 2 or more cores), the replay runs
    again on as many threads at once as the graph has devices (at least one per core), each
    replaying its own copy, all starting each op together: the ops' CPU times then are their
    times with the other cores busy with the same work, as in a step of an SPMD plan (memory bandwidth and cache shared, and with more threads than
    cores, the caches a time-sliced thread finds cold), stored as ``contended``. Shapes
    measured before are measured again and replaced. With `parallelism`, the cores the
    runtime's threads get now (:func:`measure_parallelism`), their wake-up latency
    (:func:`measure_wake_latency`) and the runtime's dispatch costs (:func:`measure_dispatch`)
    are recorded too."""
    cal = calibration or Calibration()
    cores = os.cpu_count() or 1
    samples: List[dict] = []
    for eg in graphs:
        order = serial_order(eg)
        blas = max(1, cores // eg.devices)  # what the runtime gives each device thread
        clock = time.thread_time if blas == 1 else time.perf_counter
        alone = _threaded_replays(eg, order, repeat, 1, clock, blas)
        # Wall-clock times (several BLAS threads per op) grow whenever another job takes a
        # core, and a multi-threaded BLAS call waits for its slowest thread: keep the fastest
        # replay, as the measured steps keep only undisturbed ones. CPU times are not inflated
        # by other jobs: their median.
        stat = min if clock is time.perf_counter else statistics.median
        # contended: as many replaying threads as the runtime has device threads (at least
        # one per core), so oversubscribed cores (4 devices on 2 cores) are measured too
        busy = _threaded_replays(eg, order, repeat, max(eg.devices, cores), time.thread_time, 1) \
            if contended and eg.devices > 1 and cores > 1 else {}
        by_shape = {}
        for i, ts in alone.items():
            op = eg.ops[i]
            if op["kind"] == "fetch":
                cal.add_fetch(eg, op, stat(ts), statistics.median(busy[i]) if i in busy else None)
                samples.append(cal.fetches[fetch_key(eg, op)])
                continue
            kind, ins, outs = op_tiles(eg, op)
            entry = by_shape.setdefault(shape_key(kind, ins, outs), (kind, ins, outs, [], []))
            entry[3].extend(ts)
            entry[4].extend(busy.get(i, []))
        for kind, ins, outs, ts, bs in by_shape.values():
            cal.add(kind, ins, outs, stat(ts), statistics.median(bs) if bs else None)
        if log:
            fetches = sum(1 for o in eg.ops if o["kind"] == "fetch")
            log(f"calibrated {len(by_shape)} op shapes and {fetches} fetches ({eg.devices} devices, "
                f"{len(eg.ops)} ops{', alone and contended' if busy else ''})")
    if samples:
        cal.fetch.update(fit_fetch(samples, cal.fetch))
    if parallelism:
        cal.machine["effective_cores"] = measure_parallelism()
        cal.machine["wake_latency_s"] = measure_wake_latency()
        cal.machine.update(machine_dispatch())
    cal.machine.update({"host": platform.node(), "processor": platform.processor() or platform.machine(),
                        "cpus": os.cpu_count(), "numpy": np.__version__,
                        "date": time.strftime("%Y-%m-%d %H:%M:%S")})
    return cal


def calibration_graphs(quick: bool = False):
    """ExecGraphs whose ops `autotile bench calibrate` times: an MLP, AlexNet, VGG-16 and a
    Transformer block at small sizes (--quick: an MLP and AlexNet) on 2 and 4 devices (quick:
    2), tofu and data parallel plans -- the regime of a multi-device step, one BLAS thread per
    device -- so the fit sees products, convolutions, attention, element-wise kernels and
    fetches of several tile sizes."""
    from .. import planner
    from ..execgraph import transform
    from ..models import alexnet, mlp, vgg
    from ..models.transformer import decoder_lm

    models = [mlp(64, layers=3, hidden=1024), alexnet(8, image=96, classes=100)] if quick else \
        [mlp(128, layers=4, hidden=2048), alexnet(16, image=128, classes=200), vgg(16, 8, image=64, classes=200),
         decoder_lm(8, 64, 1, 256, 4, 1024, 512)]
    for sym in models:
        for k in ((2,) if quick else (2, 4)):
            for algo in ("tofu", "data"):
                yield transform(sym, planner.plan(sym, devices=k, algorithm=algo))


def profile_document(calibration: Calibration, name: str = "host-calibrated", steps=()) -> dict:
    """The profile JSON (:func:`autotile.sim.load_profile`'s form) fitted to `calibration`
    (:func:`autotile.sim.fit.fitted_profile` on the shipped ``host`` profile) and, given
    (ExecGraph, measured step seconds) `steps`, its serial per-op terms to those steps
    (:func:`autotile.sim.fit.with_serial_terms`), named `name`, with where and when it was
    measured in its sources."""
    from .fit import fitted_profile, with_serial_terms

    hw = fitted_profile(calibration, "host")
    if steps:
        hw = with_serial_terms(hw, steps)
    doc = hw.to_dict()
    m = calibration.machine
    doc["name"] = name
    doc["description"] = (f"this machine as `autotile bench calibrate` measured it: k virtual devices (threads of "
                          f"the host runtime) sharing {m.get('cpus', '?')} CPU cores, one BLAS thread per device; "
                          "op times by the fitted serial roofline (launch + FLOPs / (peak x efficiency[kind]) + "
                          "bytes / mem_bandwidth + im2col bytes / im2col_bandwidth), fetches by the fitted copy "
                          "model, co-runner slowdowns per kind (co_runner_slowdown:KIND), the runtime's dispatch "
                          "figures and wake-up latency as measured, and the serial per-op terms (handoff_s, "
                          "gil_fraction) fitted to the measured steps of the calibration graphs. A 1-device step's "
                          "BLAS kernels use every core "
                          "and run faster than priced here.")
    doc["sources"] = [f"measured on {m.get('host', '?')} ({m.get('processor', '?')}, {m.get('cpus', '?')} CPUs, "
                      f"NumPy {m.get('numpy', '?')}) at {m.get('date', '?')}: {len(calibration.ops)} op shapes and "
                      f"{len(calibration.fetches)} fetch shapes timed in place in host-runtime replays, alone and "
                      "contended; the load average then: " + str(m.get("load", "?"))]
    return doc


def main(argv=None) -> int:
    """``autotile bench calibrate [--quick] [--out PROFILE] [--calibration PATH]``: time this
    machine's kernels, fit a profile to them and write it (load it with
    ``at.plan(..., hardware=PROFILE)`` or ``simulate(eg, PROFILE)``). The host runtime is what
    is measured here; on a machine with a GPU, ``autotile bench gpu`` measures the GPU runtime."""
    import argparse
    import json
    import sys

    p = argparse.ArgumentParser(prog="autotile bench calibrate",
                                description="measure this machine's kernels and write a hardware profile JSON")
    p.add_argument("--quick", action="store_true", help="fewer, smaller graphs (about a minute)")
    p.add_argument("--out", default=None, help=f"profile JSON to write (default {default_profile_path()})")
    p.add_argument("--calibration", default=None,
                   help=f"where the raw measurements go too (default {default_path()}; per op and fetch shape)")
    p.add_argument("--repeat", type=int, default=5, help="replays per graph (default 5)")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error(f"--repeat must be at least 1, got {args.repeat}")
    out = args.out or default_profile_path()
    t0 = time.perf_counter()
    load0 = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    graphs = list(calibration_graphs(args.quick))
    cal = calibrate_graphs(graphs, Calibration(), repeat=args.repeat,
                           log=lambda s: print(s, file=sys.stderr))
    if load0 is not None:
        cal.machine["load"] = f"{load0:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} cores"
    cal.save(args.calibration or default_path())
    doc = profile_document(cal, steps=[(eg, step_time(*measure_steps(eg, 3, 10))) for eg in graphs])
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
    dev, f = doc["device"], cal.fetch
    print(f"calibrated {len(cal.ops)} op shapes of {len({e['kind'] for e in cal.ops.values()})} op kinds and "
          f"{len(cal.fetches)} fetch shapes in {time.perf_counter() - t0:.0f}s; fitted: BLAS "
          f"{dev['peak_flops'] * doc['efficiency'].get('FullyConnected', 1.0) / 1e9:.1f} GFLOP/s, "
          f"{dev['launch_overhead_s'] * 1e6:.0f} us per kernel, bytes at {dev['mem_bandwidth'] / 1e9:.2f} GB/s; "
          f"fetch {f.get('overhead', 0) * 1e6:.0f} us + rows x {f.get('row_seconds', 0) * 1e9:.0f} ns + bytes / "
          f"{f.get('bandwidth', 0) / 1e9:.2f} GB/s; {doc['cores']:.2f} cores; profile written to {out} "
          f"(at.plan(..., hardware={out!r}))")
    return 0


def measure_parallelism(rounds: int = 10, n: int = 200) -> float:
    """How many cores two threads of NumPy kernels get now: 2 * t(1 thread) / t(2 threads),
    the best of up to `rounds` (another job that takes a core for a moment only lowers a
    round; it stops at the first round within 5% of the CPU count), between 1 and the CPU
    count. On a machine other jobs keep busy it is below the core count, and the host
    profile's `cores` must be what the runtime gets."""
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

    from ..backend.host_runtime import _blas_threads

    cpus = float(os.cpu_count() or 1)
    best = 0.0
    with _blas_threads(1):  # one BLAS thread per thread, as the runtime's device threads have
        work()
        for _ in range(rounds):
            best = max(best, 2 * timed(1) / timed(2))
            if best >= 0.95 * min(cpus, 2.0):
                break
    return float(min(max(best, 1.0), cpus))


def dispatch_graphs():
    """Graphs of tiny ops for :func:`measure_dispatch`: MLPs of 8-wide layers at batch 8 (each
    kernel a few hundred FLOPs: the op is all dispatch) of 2, 8 and 24 layers, on 1 device and
    on 2 (data parallel: fetches too)."""
    from .. import planner
    from ..execgraph import transform
    from ..models import mlp

    for layers in (2, 8, 24):
        sym = mlp(8, layers=layers, hidden=8, classes=10)
        for k in (1, 2):
            yield transform(sym, planner.plan(sym, devices=k, algorithm="data"))


def machine_dispatch() -> dict:
    """:func:`measure_dispatch`'s four figures, without its samples (a calibration's machine figures)."""
    return {k: v for k, v in measure_dispatch().items() if k != "samples"}


def measure_dispatch(graphs=None, steps: int = 30, repeat: int = 7) -> dict:
    """The host runtime's cost around the ops, measured on graphs of tiny ops
    (:func:`dispatch_graphs`), where compute is ~0 and what a step costs is dispatch.

    Per graph: its step time (the fastest of `steps` steps after 3 warm-ups: the undisturbed
    one), and each op's time in place (:func:`_replay_times`, the fastest of `repeat`
    replays), which already holds the op's own Python dispatch (tile attributes, crop, kernel
    context, views, the fetch's setup). :func:`autotile.sim.fit.fit_dispatch` fits what the
    step spends beyond its ops -- ``step_overhead_s`` and ``op_overhead_s`` -- and the median
    in-place time of a tiny compute op and of a tiny fetch is the Python part of any op
    (``dispatch_compute_s``, ``dispatch_fetch_s``): the part that holds the interpreter lock,
    so that on k devices it runs one op at a time (a tiny-op step on 2 devices is *longer*
    than the serial sum of its ops). Returns those four figures and the samples."""
    from ..backend.host_runtime import HostRuntime
    from .fit import fit_dispatch

    samples, compute, fetch = [], [], []
    for eg in graphs if graphs is not None else dispatch_graphs():
        rt = HostRuntime(eg)
        values = step_inputs(eg)
        times = []
        for i in range(steps + 3):
            rt.load(values)
            t0 = time.perf_counter()
            rt.run()
            if i >= 3:
                times.append(time.perf_counter() - t0)
        replay = _threaded_replays(eg, serial_order(eg), repeat, 1, time.perf_counter, 1)
        ops = {i: min(ts) for i, ts in replay.items()}
        for i, t in ops.items():
            (fetch if eg.ops[i]["kind"] == "fetch" else compute).append(t)
        samples.append({"devices": eg.devices, "count": len(ops), "step": min(times), "ops": sum(ops.values())})
    step_overhead, op_overhead = fit_dispatch(samples)
    return {"step_overhead_s": step_overhead, "op_overhead_s": op_overhead,
            "dispatch_compute_s": statistics.median(compute) if compute else 0.0,
            "dispatch_fetch_s": statistics.median(fetch) if fetch else 0.0, "samples": samples}


def measure_wake_latency(steps: int = 12) -> float:
    """Seconds a host-runtime device thread that blocked on another device's op takes to
    resume once that op is done: the median, over the ops that waited, of (op start - the
    end of the op it waited for), in steps of a small 2-device data-parallel MLP run by the
    host runtime itself. The woken thread needs the GIL, which the waking thread holds while
    it dispatches its own next op, so this is far above an OS wake-up (~0.1-0.4 ms here)."""
    from .. import planner
    from ..backend.host_runtime import HostRuntime
    from ..execgraph import transform
    from ..models import mlp

    sym = mlp(32, layers=3, hidden=512)
    eg = transform(sym, planner.plan(sym, devices=2, algorithm="data"))
    stamps = {}

    class Stamped(HostRuntime):
        def _compute(self, op, is_train, rng):
            t0 = time.perf_counter()
            super()._compute(op, is_train, rng)
            stamps[id(op)] = (t0, time.perf_counter())

        def _fetch(self, op):
            t0 = time.perf_counter()
            super()._fetch(op)
            stamps[id(op)] = (t0, time.perf_counter())

    rt = Stamped(eg)
    values = step_inputs(eg)
    waits = []
    for step in range(steps):
        rt.load(values)
        stamps.clear()
        rt.run()
        if step < 2:
            continue
        for d in range(eg.devices):
            prev = None
            for i in eg.schedule(d):
                start, end = stamps[id(eg.ops[i])]
                dep_end = max((stamps[id(eg.ops[j])][1] for j in eg.ops[i]["deps"]), default=None)
                if prev is not None and dep_end is not None and dep_end > prev:
                    waits.append(start - dep_end)
                prev = end
    return float(statistics.median(waits)) if waits else 0.0
