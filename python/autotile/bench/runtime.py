"""Overhead of the multi-device host runtime, and MultiFetch bandwidth.

1. The same training step on 1 device and on k virtual devices on this machine: the total
   work is equal (the plan splits it), so the wall-time ratio is the runtime's overhead
   (threads, events, fetches, reductions). Target: at most 1.2x where kernels dominate.
   Both sides get the same thread budget, ``--threads`` cores (default 1): the process is
   pinned to that many cores, so the 1-device step's BLAS and the k workers' kernels (one
   BLAS thread each, the runtime's split of its cores) share the same cores. Without it the
   1-device step ran every core's BLAS threads against the workers' one each, and on a loaded
   machine measured their contention rather than the runtime.
2. MultiFetch (one C++ call assembling a region from several pieces, GIL released) against
   a plain memcpy (numpy.copyto) of the same bytes. Target: at least 80%.
3. Resident memory of one k-device step (VmHWM of a fresh process) next to what the memory
   plan predicts: the interpreter, the caller's params and data, and the plan's arenas. The
   results (gradients, updated params) take the memory their tiles free, and kernels write
   into the arenas, so the peak should exceed the prediction only by a few MB of kernel
   scratch and threads (docs/memory.md, "Memory of a run"); the peaks of the run and of the
   results' assembly are shown apart, and what each op type holds beyond the arenas.
   AUTOTILE_KERNEL_OUT=0 measures kernels that allocate their outputs instead.

    autotile bench runtime [--quick] [--devices 8] [--threads 1]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from .common import median_seconds, random_step_values, run_main, table, write_json

import numpy as np  # noqa: E402

import autotile as at  # noqa: E402
from autotile import _core  # noqa: E402
from autotile.backend.multi_device import run_multi_device  # noqa: E402


def step_ratio(model, batch, devices, algorithm, repeat):
    sym = at.models.get(model, batch=batch)
    vals, shapes = random_step_values(sym)
    times = {}
    for k in (1, devices):
        plan = at.plan(sym, devices=k, shapes=shapes, algorithm=algorithm)
        secs = []

        def step():
            res = run_multi_device(sym, k, vals, plan=plan)
            secs.append(res.stats["step_seconds"])
        median_seconds(step, repeat=repeat, warmup=1)
        times[k] = float(np.median(secs[1:]))
    return times[1], times[devices]


def pin_cores(threads: int) -> list:
    """Pins this process to the first `threads` cores it may use (Linux; elsewhere nothing) and
    returns them: the thread budget both sides of :func:`step_ratio` share."""
    if not hasattr(os, "sched_setaffinity"):  # pragma: no cover - not Linux
        return []
    cores = sorted(os.sched_getaffinity(0))[:max(1, threads)]
    os.sched_setaffinity(0, cores)
    return cores


def multifetch_bandwidth(mbytes, pieces, repeat):
    n = int(mbytes * 1e6 / 4)
    rows = 1024
    cols = n // rows
    dst = np.empty((rows, cols), np.float32)
    step = rows // pieces
    srcs = [np.random.default_rng(i).standard_normal((step, cols)).astype(np.float32) for i in range(pieces)]
    plist = [(s, (i * step, 0), (i * step, 0), ((i + 1) * step, cols)) for i, s in enumerate(srcs)]
    t_fetch = median_seconds(lambda: _core.multifetch(dst, (0, 0), plist), repeat=repeat)
    for i, s in enumerate(srcs):
        assert np.array_equal(dst[i * step:(i + 1) * step], s)
    flat_src = np.concatenate(srcs)
    flat_dst = np.empty_like(flat_src)
    t_copy = median_seconds(lambda: np.copyto(flat_dst, flat_src), repeat=repeat)
    nbytes = dst.nbytes
    # a strided region: the right half of every row from one source
    half = np.random.default_rng(9).standard_normal((rows, cols)).astype(np.float32)
    out = np.empty((rows, cols // 2), np.float32)
    t_strided = median_seconds(lambda: _core.multifetch(out, (0, cols // 2), [(half, (0, 0), (0, cols // 2), (rows, cols))]),
                               repeat=repeat)
    t_strided_np = median_seconds(lambda: np.copyto(out, half[:, cols // 2:]), repeat=repeat)
    return {"bytes": nbytes, "multifetch_GBps": nbytes / t_fetch / 1e9, "memcpy_GBps": nbytes / t_copy / 1e9,
            "strided_multifetch_GBps": out.nbytes / t_strided / 1e9, "strided_numpy_GBps": out.nbytes / t_strided_np / 1e9}


def _proc_status_bytes(field: str) -> int:
    """A /proc/self/status field in bytes (VmRSS: resident now, VmHWM: its peak)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise OSError(f"/proc/self/status has no {field}")


def _random_values(sym, rng):
    """(values, data shapes) of a training step drawn in float32 (no float64 temporaries)."""
    import numpy as np

    arg_shapes, _, aux_shapes = sym.infer_shape()
    values = {}
    for name, shape in zip(sym.list_arguments() + sym.list_auxiliary_states(), arg_shapes + aux_shapes):
        if name.endswith("label"):
            values[name] = rng.integers(0, 10, shape).astype(np.float32)
        else:
            values[name] = rng.standard_normal(shape, dtype=np.float32)
            values[name] *= 0.01
    return values, {k: v.shape for k, v in values.items() if k == "data" or k.endswith("label")}


def _reset_peak():
    """Starts a new VmHWM window (Linux: writing 5 to clear_refs resets it to VmRSS)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _phase_runtime(peaks: dict):
    """A HostRuntime that records the resident peak of each phase of a step in `peaks`:
    transform (and arena set-up) with load, run, gather (assembling the results)."""
    from autotile.backend.host_runtime import HostRuntime

    def mark(phase):
        peaks[phase] = _proc_status_bytes("VmHWM")
        _reset_peak()

    class PhasePeaks(HostRuntime):
        def load(self, values):
            super().load(values)
            mark("load")

        def run(self, *args, **kwargs):
            stats = super().run(*args, **kwargs)
            mark("run")
            return stats

        def gather_results(self, names):
            out = super().gather_results(names)
            mark("gather")
            return out

    return PhasePeaks


def _memory_child(model: str, batch: int, devices: int, algorithm: str) -> dict:
    """In a fresh process: one training step of `model` on `devices` host devices, with the
    resident memory before it and the peak during it (and during each phase)."""
    import numpy as np

    import autotile as at
    from autotile.backend.multi_device import run_multi_device, run_partitioned

    # a small step first: the modules, thread pools and BLAS buffers every step needs are in
    # base_rss, so the difference from it is the model's own memory
    tiny = at.models.get("mlp-2-64", batch=devices * 2)
    run_multi_device(tiny, devices, _random_values(tiny, rng=np.random.default_rng(1))[0])
    base = _proc_status_bytes("VmRSS")
    sym = at.models.get(model, batch=batch)
    values, shapes = _random_values(sym, np.random.default_rng(0))
    plan = at.plan(sym, devices=devices, shapes=shapes, algorithm=algorithm)
    data = set(shapes)
    before = _proc_status_bytes("VmRSS")
    _reset_peak()  # the peak of the step alone
    peaks: dict = {}
    res = run_partitioned(_phase_runtime(peaks), sym, devices, values, True, "sgd", None, 0, plan, algorithm,
                          True, None, False)
    peaks["result"] = _proc_status_bytes("VmHWM")
    return {"model": model, "batch": batch, "devices": devices, "algorithm": algorithm,
            "param_bytes": sum(v.nbytes for k, v in values.items() if k not in data),
            "data_bytes": sum(values[k].nbytes for k in data),
            "arena_bytes": sum(res.stats["peak_memory"]), "base_rss": base, "rss_before_step": before,
            "peak_rss": max(peaks.values()), "phase_peaks": peaks, "step_seconds": res.stats["step_seconds"]}


def kernel_temporaries(model: str, batch: int, devices: int, algorithm: str = "tofu") -> list:
    """Where a step's memory beyond the plan goes, op type by op type: the ops of one
    training step of zoo `model` on `devices` host devices run one at a time, each under
    tracemalloc (which sees NumPy's allocations, not the arenas). Rows of (op type, count,
    largest temporary: the most a single op held above what it started with, in bytes,
    largest output tile in bytes). A kernel that writes into its arena buffers holds only
    its own scratch; one that returns fresh arrays holds at least its outputs."""
    import tracemalloc

    import numpy as np

    import autotile as at
    from autotile.backend.host_runtime import HostRuntime
    from autotile.backend.multi_device import plan_and_transform
    from autotile.backend.tiles import buffer_span, step_inputs

    sym = at.models.get(model, batch=batch)
    values, shapes = _random_values(sym, np.random.default_rng(0))
    plan = at.plan(sym, devices=devices, shapes=shapes, algorithm=algorithm)
    _, eg, _ = plan_and_transform(sym, devices, values, plan=plan)
    rt = HostRuntime(eg)
    rt.load(step_inputs(eg, values))
    low = eg.lowered
    kinds: dict = {}
    tracemalloc.start()
    try:
        for i in rt.sequential_order():
            op = eg.ops[i]
            kind = rt.runner.nodes[low.node_names[op["node"]]].op if op["kind"] == "compute" else op["kind"]
            tracemalloc.reset_peak()
            start = tracemalloc.get_traced_memory()[0]
            rt.execute(i)
            held = tracemalloc.get_traced_memory()[1] - start
            out_bytes = max((buffer_span(eg, b)[3] - buffer_span(eg, b)[2] for b in op["outputs"]), default=0)
            row = kinds.setdefault(kind, [kind, 0, 0, 0])
            row[1] += 1
            row[2] = max(row[2], held)
            row[3] = max(row[3], out_bytes)
    finally:
        tracemalloc.stop()
    return sorted(kinds.values(), key=lambda r: -r[2])


def step_memory(model: str, batch: int, devices: int, algorithm: str = "tofu") -> dict:
    """Resident memory of one training step of zoo `model` on `devices` host devices, measured
    in a fresh process (Linux /proc): base_rss (interpreter and libraries), rss_before_step
    (with the values and plan), peak_rss (VmHWM during the step), param_bytes, data_bytes,
    arena_bytes (the memory plan's arenas, all devices) and predicted_peak = base_rss +
    param_bytes + data_bytes + arena_bytes."""
    import autotile

    env = dict(os.environ)
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(autotile.__file__)))
    env["PYTHONPATH"] = pkg_root + os.pathsep + env.get("PYTHONPATH", "")
    code = ("import json, sys; from autotile.bench.runtime import _memory_child; "
            f"print(json.dumps(_memory_child({model!r}, {int(batch)}, {int(devices)}, {algorithm!r})))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"the memory measurement of {model} on {devices} devices failed:\n{out.stderr[-2000:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    r["predicted_peak"] = r["base_rss"] + r["param_bytes"] + r["data_bytes"] + r["arena_bytes"]
    return r


def memory_table(cases) -> tuple:
    """(rows, results) of :func:`step_memory` for (model, batch, devices) cases."""
    rows, results = [], []
    for model, batch, devices in cases:
        r = step_memory(model, batch, devices)
        gb = 1e9
        phases = r["phase_peaks"]
        rows.append([model, batch, devices, round(r["param_bytes"] / gb, 3), round(r["arena_bytes"] / gb, 3),
                     round(r["predicted_peak"] / gb, 3), round(r["peak_rss"] / gb, 3),
                     round((r["peak_rss"] - r["predicted_peak"]) / 1e6),
                     round((phases["run"] - r["predicted_peak"]) / 1e6),
                     round((phases["gather"] - r["predicted_peak"]) / 1e6),
                     round(r["peak_rss"] / r["param_bytes"], 2)])
        results.append(r)
    return rows, results


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=1,
                    help="cores both the 1-device and the k-device step may use (default 1)")
    args = ap.parse_args(argv)
    cores = pin_cores(args.threads)
    repeat = 3 if args.quick else 5
    cases = [("mlp-4-1024", 256, "tofu"), ("mlp-4-1024", 256, "data")] if args.quick else \
        [("mlp-4-2048", 1024, "tofu"), ("mlp-4-2048", 1024, "data"), ("mlp-4-4096", 2048, "tofu")]
    rows, results = [], []
    for model, batch, algo in cases:
        one, many = step_ratio(model, batch, args.devices, algo, repeat)
        rows.append([model, batch, algo, round(one, 3), round(many, 3), round(many / one, 2)])
        results.append({"model": model, "batch": batch, "algorithm": algo, "one_device_s": one,
                        f"{args.devices}_devices_s": many, "ratio": many / one, "cores": len(cores)})
    print(f"training step: 1 device vs {args.devices} virtual devices on this machine (median step seconds), "
          f"both on {len(cores) or 'all'} core(s)")
    print(table(["model", "batch", "plan", "1 dev s", f"{args.devices} dev s", "ratio"], rows))
    bw = multifetch_bandwidth(32 if args.quick else 128, 4, repeat)
    print("\nMultiFetch vs memcpy of the same bytes")
    print(table(["bytes", "multifetch GB/s", "memcpy GB/s", "ratio", "strided mf GB/s", "strided numpy GB/s"],
                [[bw["bytes"], round(bw["multifetch_GBps"], 2), round(bw["memcpy_GBps"], 2),
                  round(bw["multifetch_GBps"] / bw["memcpy_GBps"], 2), round(bw["strided_multifetch_GBps"], 2),
                  round(bw["strided_numpy_GBps"], 2)]]))
    if sys.platform.startswith("linux"):
        mem_cases = [("mlp-4-2048", 64, 4)] if args.quick else [("mlp-4-4096", 64, 4), ("mlp", 64, 4)]
        mem_rows, memory = memory_table(mem_cases)
        print("\nresident memory of one training step (GB): peak (VmHWM) vs the memory plan's prediction "
              "(interpreter + params + data + arenas)")
        print(table(["model", "batch", "devices", "params", "plan arenas", "predicted", "peak", "over MB",
                     "run over MB", "gather over MB", "peak/params"], mem_rows))
        model, batch, devices = mem_cases[0]
        print(f"\nwhat each op type holds beyond the arenas, ops run one at a time (tracemalloc, MB): "
              f"{model}, batch {batch}, {devices} devices")
        temporaries = kernel_temporaries(model, batch, devices)
        print(table(["op", "count", "largest temporary", "largest output tile"],
                    [[k, n, round(t / 1e6, 2), round(o / 1e6, 2)] for k, n, t, o in temporaries]))
        memory.append({"kernel_temporaries": temporaries})
    else:
        memory = []
    path = write_json("runtime.json", {"steps": results, "multifetch": bw, "memory": memory})
    print(f"\nwrote {path}")


if __name__ == "__main__":
    sys.exit(run_main(main))
