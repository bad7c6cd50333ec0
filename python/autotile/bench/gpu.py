"""GPU runtime benchmarks (needs CuPy and a CUDA GPU; exits with a message otherwise).

1. MultiFetch bandwidth (docs/gpu.md): one launch of the CUDA MultiFetch kernel
   (csrc/cuda/multifetch.cu) assembling an NCHW activation from its tiles (batch, channel,
   height, width and 2x2 spatial splits) or cutting one tile out of it, against
   cudaMemcpyAsync device to device of the same bytes (and cudaMemcpy2DAsync per piece where
   the region is 2-D after merging dims); every result checked against CuPy slicing. Then
   contiguous pieces of 4 KiB to 64 MiB: kernel vs one cudaMemcpyAsync per piece (where the
   copy engine wins), and the peer-access / cudaMemcpyPeerAsync path of each GPU pair.
2. Step time of AlexNet and VGG-16 training steps (SGD with momentum) on GPU 0 with 1, 2, 4
   and 8 workers sharing it (the overhead of partitioning when the hardware does not grow):
   the launch list's step (captured as a CUDA graph where possible) beside the op-by-op step,
   each worker's pool beside its arena; then the same models in PyTorch on the same GPU (fp32
   with TF32 off and bf16 autocast, eager and CUDA graph: gpu_torch.py) and the
   autotile/PyTorch ratios.
3. Kernel time per op (the GPU runtime's kernels at AlexNet's layer shapes) against CuPy's own
   ops and, where PyTorch is installed, cuDNN/cuBLAS through PyTorch.

    autotile bench gpu [--quick] [--steps N] [--only multifetch,steps,ops] [--workers 1,2,4,8]
                       [--torch auto|on|off]
    autotile bench gpu --sim [--quick] [--steps N]   # no GPU: host cost per step on a stand-in

Writes bench/out/gpu.json (gpu_sim.json with --sim)."""
from __future__ import annotations

import argparse
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


def _time_gpu(cp, fn, repeat=20, batches=5):
    """Seconds per call of `fn` (GPU work on the current stream): the median over `batches`
    of `repeat` back-to-back calls between two events, so the GPU runs them from a full
    queue and the host's launch overhead is hidden as in a step (one call between events
    would count the host's time to launch)."""
    fn()
    times = []
    for _ in range(batches):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        for _ in range(repeat):
            fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3 / repeat)
    return float(np.median(times))


# ----------------------------------------------------------------------------- MultiFetch

def _splits(shape):
    """(name, tile boxes) of the NCHW split patterns: each box (lo, hi) is one piece."""
    n, c, h, w = shape

    def grid(parts):
        boxes = [([], [])]
        for d, k in enumerate(parts):
            step = shape[d] // k
            boxes = [(lo + [i * step], hi + [(i + 1) * step]) for lo, hi in boxes for i in range(k)]
        return boxes

    return [("batch / 4", grid((4, 1, 1, 1))), ("channel / 4", grid((1, 4, 1, 1))),
            ("height / 4", grid((1, 1, 4, 1))), ("width / 2", grid((1, 1, 1, 2))),
            ("width / 4", grid((1, 1, 1, 4))), ("height / 2 x width / 2", grid((1, 1, 2, 2)))]


def _launch(cp, kernels, records, n_pieces):
    """One float32 MultiFetch launch over `records`, its work prepared once (as the runtime does)."""
    from autotile.backend import gpu_fetch

    return gpu_fetch.device_launcher(cp, kernels, gpu_fetch.kernel_name(np.float32, False), records, n_pieces)


def multifetch_bandwidth(cp, quick: bool):
    from autotile.backend import gpu_fetch

    kernels, source = gpu_fetch.load_kernels(cp, 0)
    rt = cp.cuda.runtime
    rows = []
    shapes = [(8, 64, 56, 56)] if quick else [(32, 64, 56, 56), (64, 256, 28, 28)]
    for shape in shapes:
        full = cp.random.standard_normal(shape, dtype=cp.float32)
        nbytes = full.nbytes
        scratch = cp.empty_like(full)
        t_memcpy = _time_gpu(cp, lambda: rt.memcpyAsync(scratch.data.ptr, full.data.ptr, nbytes,
                                                          rt.memcpyDeviceToDevice, cp.cuda.get_current_stream().ptr))
        for name, boxes in _splits(shape):
            tiles = [cp.ascontiguousarray(full[tuple(slice(l, h) for l, h in zip(lo, hi))]) for lo, hi in boxes]
            # gather: the whole activation from its tiles (pieces contiguous in the source)
            dst = cp.zeros_like(full)
            rec = gpu_fetch.pack_records(dst.data.ptr, [0] * 4, list(shape),
                                         [(t.data.ptr, lo, list(t.shape), lo, hi) for t, (lo, hi) in zip(tiles, boxes)])
            t_kernel = _time_gpu(cp, _launch(cp, kernels, rec, len(boxes)))
            ok = bool((dst == full).all())
            t_2d = _memcpy2d_time(cp, dst, tiles, boxes, shape)
            rows.append([str(shape), f"gather {name}", len(boxes), nbytes / 2**20, nbytes / t_kernel / 1e9,
                         nbytes / t_memcpy / 1e9, t_memcpy / t_kernel, nbytes / t_2d / 1e9 if t_2d else "-",
                         "ok" if ok else "WRONG"])
            # cut: the first tile out of the whole activation (strided source)
            lo, hi = boxes[0]
            tile = cp.zeros(tiles[0].shape, cp.float32)
            rec = gpu_fetch.pack_records(tile.data.ptr, lo, list(tile.shape), [(full.data.ptr, [0] * 4, list(shape), lo, hi)])
            t_cut = _time_gpu(cp, _launch(cp, kernels, rec, 1))
            tb = tile.nbytes
            t_mc = _time_gpu(cp, lambda: rt.memcpyAsync(scratch.data.ptr, full.data.ptr, tb, rt.memcpyDeviceToDevice,
                                                          cp.cuda.get_current_stream().ptr))
            rows.append([str(shape), f"cut {name}", 1, tb / 2**20, tb / t_cut / 1e9, tb / t_mc / 1e9, t_mc / t_cut, "-",
                         "ok" if bool((tile == tiles[0]).all()) else "WRONG"])
            del tiles, dst, tile
    heads = ["tensor", "fetch", "pieces", "MiB", "kernel GB/s", "memcpy GB/s", "kernel/memcpy", "memcpy2D GB/s",
             "check"]
    print(f"MultiFetch kernel ({source.split(':')[0]}) vs cudaMemcpyAsync D2D of the same bytes "
          f"(GB/s = bytes moved / time; the copy reads and writes each byte once)")
    print(table(heads, rows))
    return {"kernel_source": source, "nchw": [dict(zip(heads, r)) for r in rows],
            "piece_sizes": piece_size_crossover(cp, kernels, quick), "paths": peer_paths(cp)}


def _memcpy2d_time(cp, dst, tiles, boxes, shape):
    """Seconds of one cudaMemcpy2DAsync per tile into `dst`, where each tile's rows (the row
    runs of the memcpy fallback, gpu_fetch.row_runs) are equally long and evenly spaced in
    both buffers; None where some tile is not one 2-D copy."""
    from autotile.backend import gpu_fetch

    rt = cp.cuda.runtime
    plans = []
    for t, (lo, hi) in zip(tiles, boxes):
        runs = gpu_fetch.row_runs(lo, list(t.shape), [0] * len(shape), list(shape), lo, hi, 4)
        src_off, dst_off, width = runs[:, 0], runs[:, 1], runs[:, 2]
        if len(runs) > 1 and (len(set(width)) != 1 or len(set(np.diff(src_off))) != 1
                              or len(set(np.diff(dst_off))) != 1):
            return None
        spitch = int(src_off[1] - src_off[0]) if len(runs) > 1 else int(width[0])
        dpitch = int(dst_off[1] - dst_off[0]) if len(runs) > 1 else int(width[0])
        plans.append((dst.data.ptr + int(dst_off[0]), dpitch, t.data.ptr + int(src_off[0]), spitch, int(width[0]),
                      len(runs)))

    def run():
        st = cp.cuda.get_current_stream().ptr
        for d, dp, src, sp, w, h in plans:
            rt.memcpy2DAsync(d, dp, src, sp, w, h, rt.memcpyDeviceToDevice, st)

    return _time_gpu(cp, run)


def piece_size_crossover(cp, kernels, quick: bool):
    """Contiguous pieces of one size: the kernel (one launch for 4 pieces) against one
    cudaMemcpyAsync per piece (copy engine); the runtime could pick the faster per size."""
    from autotile.backend import gpu_fetch

    rt = cp.cuda.runtime
    rows = []
    sizes = [4 << 10, 64 << 10, 1 << 20, 16 << 20] if quick else [4 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20,
                                                                  16 << 20, 64 << 20]
    k = 4
    for size in sizes:
        n = size // 4
        srcs = [cp.random.standard_normal(n, dtype=cp.float32) for _ in range(k)]
        dst = cp.empty(n * k, cp.float32)
        rec = gpu_fetch.pack_records(dst.data.ptr, [0], [n * k], [(s.data.ptr, [i * n], [n], [i * n], [(i + 1) * n])
                                                                  for i, s in enumerate(srcs)])
        t_kernel = _time_gpu(cp, _launch(cp, kernels, rec, k))

        def memcpys():
            st = cp.cuda.get_current_stream().ptr
            for i, s in enumerate(srcs):
                rt.memcpyAsync(dst.data.ptr + i * size, s.data.ptr, size, rt.memcpyDeviceToDevice, st)

        t_memcpy = _time_gpu(cp, memcpys)
        rows.append([size >> 10, k, k * size / t_kernel / 1e9, k * size / t_memcpy / 1e9,
                     "kernel" if t_kernel <= t_memcpy else "memcpy"])
    heads = ["piece KiB", "pieces", "kernel GB/s", "memcpy per piece GB/s", "faster"]
    print("Contiguous pieces: one MultiFetch launch vs one cudaMemcpyAsync per piece")
    print(table(heads, rows))
    return [dict(zip(heads, r)) for r in rows]


def peer_paths(cp):
    """The path the GPU runtime takes for each ordered GPU pair (CupyDevices.can_read)."""
    from autotile.backend.gpu_runtime import CupyDevices

    n = cp.cuda.runtime.getDeviceCount()
    dev = CupyDevices(n, cupy=cp)
    pairs = {f"{a}->{b}": dev.can_read(a, b) for a in range(n) for b in range(n)}
    print(f"MultiFetch paths between the {n} visible GPU(s) (reader->holder): {pairs}"
          + ("" if n > 1 else "; one GPU: every piece is local, peer access and cudaMemcpyPeerAsync are not exercised"))
    return pairs


# ----------------------------------------------------------------------------- training steps

def _zoo_values(sym):
    shapes = {n.name: tuple(int(v) for v in n.attrs["__shape__"].strip("()").split(",") if v.strip())
              for n in sym.topo_nodes() if n.is_variable and "__shape__" in n.attrs
              and (n.name == "data" or n.name.endswith("label"))}
    arg_shapes, _, aux_shapes = sym.infer_shape(**shapes)
    rng = np.random.default_rng(0)
    vals = {}
    for a, s in zip(sym.list_arguments() + sym.list_auxiliary_states(), arg_shapes + aux_shapes):
        vals[a] = (rng.integers(0, 10, size=s) if a.endswith("label") else rng.standard_normal(s) * 0.01
                   ).astype(np.float32)
    return shapes, vals


def bench_models(quick: bool):
    """(name, batch, builder) of the step benchmark: AlexNet batch 128 and VGG-16 batch 32."""
    import autotile as at

    return [("alexnet", 16 if quick else 128, lambda b: at.models.alexnet(batch=b)),
            ("vgg16", 4 if quick else 32, lambda b: at.models.vgg(16, batch=b))]


def _median_step(rt, tiles, steps: int):
    """Median wall seconds of `steps` steps from inputs in the arena to the step's end (as a
    PyTorch step with its tensors on the GPU), the median seconds of writing the inputs (data,
    parameters, optimizer states from the host, as a loop feeding ``res.params`` back does;
    they must be rewritten: a step may reuse their buffers once read), and the last step's
    stats; after two warm-up steps (the first runs op by op and builds the launch list, the
    second captures)."""
    for _ in range(2):
        rt.load(tiles)
        rt.run()
    times, enq, inputs = [], [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        rt.load(tiles)
        rt.dev.synchronize()  # the inputs land before the timed step
        t1 = time.perf_counter()
        st = rt.run()
        times.append(time.perf_counter() - t1)
        inputs.append(t1 - t0)
        enq.append(st["enqueue_seconds"])
    return float(np.median(times)), float(np.median(enq)), st, float(np.median(inputs))


def step_times(cp, quick: bool, steps: int, workers=(1, 2, 4, 8)):
    """AlexNet and VGG-16 training steps (SGD with momentum) on GPU 0 with 1..8 workers
    sharing it: the launch list's step (a captured graph where the step allows) beside the
    op-by-op step; rows, and {(model, workers): step seconds} for the PyTorch ratios."""
    import autotile as at
    from autotile.backend.gpu_runtime import CupyDevices, GpuRuntime
    from autotile.backend.tiles import step_inputs
    from autotile.execgraph import transform

    rows, by = [], {}
    for name, batch, build in bench_models(quick):
        sym = build(batch)
        shapes, vals = _zoo_values(sym)
        for k in workers:
            try:
                plan = at.plan(sym, devices=k, shapes=shapes, optimizer="momentum")
                eg = transform(sym, plan)
                tiles = step_inputs(eg, vals)
                rt = GpuRuntime(eg, devices=CupyDevices(k, cupy=cp, gpu_ids=[0]), replay=False)
                t_ops, enq_ops, _, _ = _median_step(rt, tiles, steps)
                del rt
                cp.get_default_memory_pool().free_all_blocks()
                rt = GpuRuntime(eg, devices=CupyDevices(k, cupy=cp, gpu_ids=[0]))
                t, enq, st, t_in = _median_step(rt, tiles, steps)
                arena = max(int(b) for b in eg.core.arena_bytes)
                pool = max(st["pool_bytes"]) if st.get("pool_bytes") else 0
                cap = st["capture"]
                rows.append([name, batch, k, t, enq, st["launch"]["mode"], t_ops, enq_ops, t_ops / t, t_in,
                             len(eg.ops), ",".join(st["kernels"]["host"]) or "-",
                             "yes" if cap["captured"] else (cap["reason"] or "-")[:60], plan.comm_bytes / 2**20,
                             arena / 2**20, pool / 2**20])
                by[name, k] = t
                del rt
                cp.get_default_memory_pool().free_all_blocks()
            except Exception as e:
                rows.append([name, batch, k, f"failed: {type(e).__name__}: {str(e)[:160]}"] + ["-"] * 12)
    heads = ["model", "batch", "workers", "step s", "enqueue s", "mode", "op-by-op step s", "op-by-op enqueue s",
             "op-by-op/step", "inputs s", "ops", "host ops", "captured", "comm MiB", "arena MiB/worker",
             "pool MiB/worker"]
    print("Training steps on GPU 0 (SGD with momentum; k workers share the one GPU; medians): the launch list's "
          "step vs the op-by-op step, each from inputs in the arena to its end; 'inputs s' writes the data, "
          "parameters and optimizer states from the host, which a loop feeding res.params back adds per step")
    print(table(heads, rows))
    for name, _, _ in bench_models(quick):
        for k in workers[1:]:
            if (name, 1) in by and (name, k) in by:
                print(f"{name}: {k} workers / 1 worker step time = {by[name, k] / by[name, 1]:.2f}x")
    return [dict(zip(heads, r)) for r in rows], by


def reference_times(quick: bool, steps: int, autotile_times: dict, workers=(1, 2, 4, 8)):
    """PyTorch on the same GPU (gpu_torch.py) and the autotile/PyTorch table."""
    from . import gpu_torch

    models = [(name, batch) for name, batch, _ in bench_models(quick)]
    ref = gpu_torch.torch_times(models, steps=steps, device="cuda")
    rows = gpu_torch.print_ratios(autotile_times, ref, models, workers)
    return {"torch": {f"{m}/{mode}": v for (m, mode), v in ref.items()}, "ratios": rows}


# ----------------------------------------------------------------------------- kernels per op

def _op_cases(b: int):
    """AlexNet's layer shapes at batch b: (label, op, attrs, input shapes)."""
    conv1 = dict(kernel=(11, 11), stride=(4, 4), pad=(2, 2), num_filter=64)
    conv3 = dict(kernel=(3, 3), stride=(1, 1), pad=(1, 1), num_filter=384)
    pool = dict(kernel=(3, 3), stride=(2, 2), pool_type="max")
    return [
        ("conv1 fwd", "Convolution", conv1, [(b, 3, 224, 224), (64, 3, 11, 11), (64,)]),
        ("conv3 fwd", "Convolution", conv3, [(b, 192, 13, 13), (384, 192, 3, 3), (384,)]),
        ("conv3 bwd data", "_backward_Convolution_data", conv3, [(b, 384, 13, 13), (384, 192, 3, 3),
                                                                 (b, 192, 13, 13)]),
        ("conv3 bwd weight", "_backward_Convolution_weight", conv3, [(b, 384, 13, 13), (b, 192, 13, 13)]),
        ("pool1 fwd (max 3x3/2)", "Pooling", pool, [(b, 64, 55, 55)]),
        ("pool1 bwd", "_backward_Pooling", pool, [(b, 64, 27, 27), (b, 64, 55, 55)]),
        ("fc6 fwd", "FullyConnected", dict(num_hidden=4096), [(b, 9216), (4096, 9216), (4096,)]),
        ("fc6 bwd data", "_backward_FullyConnected_data", dict(num_hidden=4096), [(b, 4096), (4096, 9216),
                                                                                  (b, 9216)]),
        ("relu fwd", "Activation", dict(act_type="relu"), [(b, 4096)]),
        ("relu conv1 out", "Activation", dict(act_type="relu"), [(b, 64, 55, 55)]),
    ]


def _reference(cp, torch, label, op, attrs, arrays):
    """The same op through CuPy's own routines or PyTorch (cuDNN/cuBLAS); None if neither has it."""
    if op == "FullyConnected":
        return "cupy matmul", lambda: arrays[0] @ arrays[1].T + arrays[2]
    if op == "_backward_FullyConnected_data":
        return "cupy matmul", lambda: arrays[0] @ arrays[1]
    if op == "Activation":
        return "cupy maximum", lambda: cp.maximum(arrays[0], 0)
    if torch is None:
        return None, None
    t = [torch.as_tensor(a, device="cuda") for a in arrays]
    F = torch.nn.functional
    if op == "Convolution":
        return "torch conv2d", lambda: F.conv2d(t[0], t[1], t[2], stride=attrs["stride"], padding=attrs["pad"])
    if op == "_backward_Convolution_data":
        return "torch conv2d_input", lambda: torch.nn.grad.conv2d_input(t[2].shape, t[1], t[0], stride=attrs["stride"],
                                                                        padding=attrs["pad"])
    if op == "_backward_Convolution_weight":
        w_shape = (attrs["num_filter"], t[1].shape[1]) + tuple(attrs["kernel"])
        return "torch conv2d_weight", lambda: torch.nn.grad.conv2d_weight(t[1], w_shape, t[0], stride=attrs["stride"],
                                                                          padding=attrs["pad"])
    if op == "Pooling":
        return "torch max_pool2d", lambda: F.max_pool2d(t[0], attrs["kernel"], attrs["stride"])
    if op == "_backward_Pooling":
        x = t[1].clone().requires_grad_(True)
        y = F.max_pool2d(x, attrs["kernel"], attrs["stride"])
        return "torch max_pool2d backward", lambda: torch.autograd.grad(y, x, t[0], retain_graph=True)
    return None, None


def op_times(cp, quick: bool):
    from autotile.backend.gpu_kernels import KERNELS
    from autotile.ops import registry
    from autotile.ops.registry import KernelContext

    try:
        import torch

        if not torch.cuda.is_available():
            torch = None
    except ImportError:
        torch = None
    rows = []
    rng = np.random.default_rng(0)
    for label, op, raw, in_shapes in _op_cases(8 if quick else 64):
        opdef = registry.get(op)
        attrs = registry.parse_attrs(opdef, {k: registry.format_value(v) for k, v in raw.items()})
        arrays = [cp.asarray(rng.standard_normal(s).astype(np.float32)) for s in in_shapes]
        ctx = KernelContext(is_train=True, xp=cp)
        ours = KERNELS.get(op) or opdef.forward
        t_ours = _time_gpu(cp, lambda: ours(attrs, arrays, ctx), repeat=10)
        name, ref = _reference(cp, torch, label, op, raw, arrays)
        if ref is not None:
            if name.startswith("torch"):
                torch.cuda.synchronize()
                ref()
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(10):
                    ref()
                torch.cuda.synchronize()
                t_ref = (time.perf_counter() - t0) / 10
            else:
                t_ref = _time_gpu(cp, ref, repeat=10)
            rows.append([label, op, t_ours * 1e3, name, t_ref * 1e3, t_ours / t_ref])
        else:
            rows.append([label, op, t_ours * 1e3, "-", "-", "-"])
    heads = ["layer", "op", "autotile ms", "reference", "reference ms", "autotile/reference"]
    print("Kernel time per op (GPU runtime kernels under CuPy vs CuPy's own ops / PyTorch cuDNN and cuBLAS)")
    print(table(heads, rows))
    return [dict(zip(heads, r)) for r in rows]


def main(argv=None):
    p = argparse.ArgumentParser(prog="autotile bench gpu", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes and batches")
    p.add_argument("--steps", type=int, default=20, help="timed training steps per row (default 20)")
    p.add_argument("--only", default="multifetch,steps,ops",
                   help="comma-separated parts to run: multifetch, steps, ops (default all)")
    p.add_argument("--workers", default="1,2,4,8", help="worker counts of the step rows (default 1,2,4,8)")
    p.add_argument("--torch", choices=("auto", "on", "off"), default="auto",
                   help="PyTorch reference columns beside the steps (auto: when torch sees a CUDA GPU)")
    p.add_argument("--sim", action="store_true",
                   help="no GPU needed: the host time per step, op by op vs replayed vs captured, on a "
                        "stand-in device side (gpu_host_cost.py)")
    args = p.parse_args(argv)
    parts = [s.strip() for s in args.only.split(",") if s.strip()]
    bad = [s for s in parts if s not in ("multifetch", "steps", "ops")]
    if bad or args.steps < 1:
        p.error(f"--only takes multifetch, steps, ops (got {bad})" if bad else "--steps must be at least 1")
    try:
        workers = tuple(int(w) for w in args.workers.split(","))
        assert workers and all(w >= 1 for w in workers)
    except (ValueError, AssertionError):
        p.error(f"--workers takes positive integers separated by commas, got {args.workers!r}")
    if args.sim:
        from . import gpu_host_cost

        rows = gpu_host_cost.main(steps=args.steps, quick=args.quick)
        print("wrote", write_json("gpu_sim.json", {"date": time.strftime("%Y-%m-%d"), "host_cost": rows}))
        return 0
    cp, why = _gpu()
    if cp is None:
        print(f"autotile bench gpu: {why}; nothing to measure (this benchmark needs a CUDA GPU; "
              f"--sim measures the host cost on a stand-in)")
        return 0
    props = cp.cuda.runtime.getDeviceProperties(0)
    out = {"device": props["name"].decode(), "date": time.strftime("%Y-%m-%d"),
           "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(), "driver": cp.cuda.runtime.driverGetVersion(),
           "cupy": cp.__version__}
    print(f"GPU 0: {out['device']}, CUDA runtime {out['cuda_runtime']}, driver {out['driver']}, CuPy {cp.__version__}")
    if "multifetch" in parts:
        out["multifetch"] = multifetch_bandwidth(cp, args.quick)
    if "steps" in parts:
        out["steps"], by = step_times(cp, args.quick, args.steps, workers)
        if args.torch != "off":
            try:
                import torch

                usable = torch.cuda.is_available()
            except ImportError:
                usable = False
            if usable:
                out["reference"] = reference_times(args.quick, args.steps, by, workers)
            elif args.torch == "on":
                print("autotile bench gpu: --torch on, but torch is not installed or sees no CUDA GPU")
                return 1
            else:
                print("(no PyTorch reference: torch is not installed or sees no CUDA GPU)")
    if "ops" in parts:
        out["ops"] = op_times(cp, args.quick)
    print("wrote", write_json("gpu.json", out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
