"""GPU runtime benchmarks (needs CuPy and a CUDA GPU; exits with a message otherwise).

1. MultiFetch bandwidth: assembling a region from k pieces with one launch of the CUDA
   MultiFetch kernel (csrc/cuda/multifetch.cu) vs cudaMemcpyAsync device-to-device of the same
   bytes (contiguous), on GPU 0, and GPU 1 -> GPU 0 through peer access when there are two.
2. Step time of AlexNet and VGG-16 training steps: 1 worker vs 8 workers sharing GPU 0.

    autotile bench gpu [--quick] [--steps N]

Writes bench/out/gpu.json."""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from .common import table, write_json



def _gpu():
    try:
        import cupy
    except ImportError:
        return None, "CuPy is not installed (pip install 'autotile[gpu]')"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:
        return None, f"no usable CUDA GPU ({type(e).__name__}: {e})"
    if n < 1:
        return None, "no CUDA GPU visible"
    return cupy, None


def _time_gpu(cp, fn, repeat=20):
    fn()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(repeat):
        fn()
    stop.record()
    stop.synchronize()
    return cp.cuda.get_elapsed_time(start, stop) / 1e3 / repeat


def multifetch_bandwidth(cp, quick: bool):
    from autotile.backend import gpu_fetch

    kernels, source = gpu_fetch.load_kernels(cp, 0)
    rows = []
    sizes = [1 << 20, 16 << 20] if quick else [1 << 20, 16 << 20, 64 << 20, 256 << 20]
    src_gpus = [0] + ([1] if cp.cuda.runtime.getDeviceCount() > 1 else [])
    for src_gpu in src_gpus:
        if src_gpu != 0:
            if not cp.cuda.runtime.deviceCanAccessPeer(0, src_gpu):
                rows.append([f"{src_gpu}->0", "-", "-", "no peer access", "-", "-"])
                continue
            with cp.cuda.Device(0):
                try:
                    cp.cuda.runtime.deviceEnablePeerAccess(src_gpu)
                except Exception:
                    pass
        for nbytes in sizes:
            for k in (1, 4):
                n = nbytes // 4
                cols = 1024
                rws = n // cols
                with cp.cuda.Device(src_gpu):
                    srcs = [cp.random.standard_normal((rws // k, cols), dtype=cp.float32) for _ in range(k)]
                with cp.cuda.Device(0):
                    dst = cp.empty((rws // k * k, cols), cp.float32)
                    pieces = [(s.data.ptr, [i * (rws // k), 0], list(s.shape), [i * (rws // k), 0],
                               [(i + 1) * (rws // k), cols]) for i, s in enumerate(srcs)]
                    rec = gpu_fetch.pack_records(dst.data.ptr, [0, 0], list(dst.shape), pieces)
                    grid, block = gpu_fetch.launch_grid(rec)
                    d_rec = cp.asarray(rec)
                    kern = kernels["autotile_multifetch_copy4"]
                    t_mf = _time_gpu(cp, lambda: kern(grid, block, (d_rec, np.int32(k))))
                    ok = all(bool((dst[i * (rws // k):(i + 1) * (rws // k)] == cp.asarray(s)).all())
                             for i, s in enumerate(srcs))

                    def memcpy():
                        for i, s in enumerate(srcs):
                            cp.cuda.runtime.memcpyPeerAsync(dst[i * (rws // k)].data.ptr, 0, s.data.ptr, src_gpu,
                                                            s.nbytes, cp.cuda.get_current_stream().ptr)

                    t_cp = _time_gpu(cp, memcpy)
                moved = dst.nbytes
                rows.append([f"{src_gpu}->0", moved >> 20, k, source.split(":")[0], moved / t_mf / 1e9,
                             moved / t_cp / 1e9, "ok" if ok else "WRONG"])
    print(table(["gpus", "MiB", "pieces", "kernel", "multifetch GB/s", "memcpy GB/s", "check"], rows))
    return [dict(zip(["gpus", "MiB", "pieces", "kernel", "multifetch_GBps", "memcpy_GBps", "check"], r)) for r in rows]


def step_times(cp, quick: bool, steps: int):
    import autotile as at
    from autotile.backend.gpu_runtime import CupyDevices, GpuRuntime
    from autotile.backend.tiles import step_inputs
    from autotile.execgraph import transform

    models = [("alexnet", at.models.alexnet(batch=16 if quick else 64)),
              ("vgg16", at.models.vgg(16, batch=4 if quick else 32))]
    rows = []
    for name, sym in models:
        shapes = {n.name: tuple(int(v) for v in n.attrs["__shape__"].strip("()").split(",") if v.strip())
                  for n in sym.topo_nodes() if n.is_variable and "__shape__" in n.attrs
                  and (n.name == "data" or n.name.endswith("label"))}
        arg_shapes, _, aux_shapes = sym.infer_shape(**shapes)
        rng = np.random.default_rng(0)
        vals = {}
        for a, s in zip(sym.list_arguments() + sym.list_auxiliary_states(), arg_shapes + aux_shapes):
            vals[a] = (rng.integers(0, 10, size=s) if a.endswith("label") else rng.standard_normal(s) * 0.01
                       ).astype(np.float32)
        for workers in (1, 8):
            try:
                plan = at.plan(sym, devices=workers, shapes=shapes)
                eg = transform(sym, plan)
                rt = GpuRuntime(eg, devices=CupyDevices(workers, cupy=cp, gpu_ids=[0]))
                rt.load(step_inputs(eg, vals))
                rt.run()  # warm-up: kernel compilation, pools
                times = []
                for _ in range(steps):
                    t0 = time.perf_counter()
                    st = rt.run()
                    times.append(time.perf_counter() - t0)
                rows.append([name, workers, float(np.median(times)), st["enqueue_seconds"], len(st["kernels"]["host"]),
                             plan.comm_bytes / 2**20, max(eg.core.arena_bytes) / 2**20])
                del rt
                cp.get_default_memory_pool().free_all_blocks()
            except Exception as e:
                rows.append([name, workers, f"failed: {type(e).__name__}: {str(e)[:80]}", "-", "-", "-", "-"])
    print(table(["model", "workers", "step s", "enqueue s", "host ops", "comm MiB", "arena MiB/worker"], rows))
    return [dict(zip(["model", "workers", "step_s", "enqueue_s", "host_ops", "comm_MiB", "arena_MiB"], r)) for r in rows]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes and batches")
    p.add_argument("--steps", type=int, default=3)
    args = p.parse_args()
    cp, why = _gpu()
    if cp is None:
        print(f"bench/gpu.py: {why}; nothing to measure (this benchmark needs a CUDA GPU)")
        return 0
    print(f"GPU 0: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    out = {"multifetch": multifetch_bandwidth(cp, args.quick), "steps": step_times(cp, args.quick, args.steps)}
    print("wrote", write_json("gpu.json", out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
