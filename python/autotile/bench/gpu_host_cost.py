"""Host cost of a GPU step without a GPU: the GPU runtime's own Python work per step, op by
op against the launch list's replay (uncaptured) and its captured graph, on a stand-in
device side whose kernels, copies and events cost nothing (``autotile bench gpu --sim``).

On CUDA a step's host time is what the enqueueing thread spends per op: resolving the op
(views, tile attributes), building its kernel context, the kernel's own launch calls and the
event calls. The stand-in keeps the runtime's work and drops the device's: every stream's
work runs at once on the host as CuPy's does, kernels return their output buffers untouched,
fetches and copies do nothing, and a captured graph's launch is one call. What it measures is
therefore the part of the host time the launch list removes; the kernel launch calls
themselves (a few microseconds each on CUDA, the same op by op and replayed, gone in a
graph) are not in it. Models at AlexNet's and VGG-16's op counts (batch 2: the op count does
not depend on the batch)."""
from __future__ import annotations

import time

import numpy as np

from .common import table


class _Event:
    __slots__ = ()


class CostDevices:
    """A device side whose device work costs nothing (see the module docstring)."""

    def __init__(self, workers: int):
        self.xp = np
        self.gpu = [0] * workers
        self.streams = [(object(), object(), object()) for _ in range(workers)]
        self.kernel_source = "none (host-cost stand-in)"
        self._capturing = False
        self.graph_launches = 0

    def describe(self):
        return {"gpus": list(self.gpu)}

    def alloc(self, worker, nbytes, what):
        return np.zeros(max(int(nbytes), 1), dtype=np.uint8)

    alloc_pinned = alloc

    def ptr(self, array):
        return int(array.ctypes.data)

    def upload(self, worker, view, host):
        view[...] = host

    def upload_async(self, worker, view, host, stream):
        view[...] = host

    def download(self, worker, view):
        return np.array(view)

    def stream(self, worker, copy):
        return self.streams[worker][1 if copy else 0]

    def swap_stream(self, worker):
        return self.streams[worker][2]

    def event(self, worker):
        return _Event()

    def record(self, worker, event, stream):
        pass

    def wait(self, worker, stream, event):
        pass

    def enqueue(self, worker, stream, fn):
        fn()  # CuPy runs the Python at enqueue time too (the launches go on the stream)

    def synchronize_stream(self, worker, stream):
        pass

    def to_host(self, worker, array, stream):
        return array

    def to_device(self, worker, view, host, stream):
        pass

    def synchronize(self):
        pass

    def can_read(self, dst_worker, src_worker):
        return "local"

    def prepare_fetch(self, worker, name, records, n_pieces):
        return records

    def memset0(self, view, stream):
        pass

    def memcpy(self, *args):
        pass

    def memcpy_async(self, *args):
        pass

    def launch_fetch(self, *args):
        pass

    def begin_capture(self, worker, stream):
        self._capturing = True

    def end_capture(self, worker, stream):
        self._capturing = False
        return object()

    def launch_graph(self, worker, graph, stream):
        self.graph_launches += 1


def _null_kernels(rt):
    """Kernels return their output buffers untouched: the device's work costs nothing, the
    runtime's own work per op stays."""
    def kernel(node, opdef, attrs, inputs, ctx, _views={}):
        return list(ctx.out) if ctx.out is not None else [np.zeros(1)]

    rt.runner.kernel = kernel
    rt.runner.out_views = True  # the stand-in has NumPy buffers to hand the kernels
    rt.kernel_paths.update({n.op: "gpu" for n in rt.runner.nodes.values()})


def host_cost(models=None, workers=(1, 2, 4, 8), steps: int = 20):
    """Rows of the host-cost table: per model and worker count, the median host seconds per
    step op by op, replayed (uncaptured) and as a captured graph."""
    import autotile as at
    from autotile.backend.gpu_runtime import GpuRuntime
    from autotile.backend.tiles import step_inputs
    from autotile.execgraph import transform

    from .gpu import _zoo_values

    models = models or [("alexnet", lambda: at.models.alexnet(batch=2)), ("vgg16", lambda: at.models.vgg(16, batch=2))]
    rows = []
    for name, build in models:
        sym = build()
        shapes, vals = _zoo_values(sym)
        for k in workers:
            eg = transform(sym, at.plan(sym, devices=k, shapes=shapes))
            tiles = step_inputs(eg, vals)
            times = {}
            build_s = None
            for mode, kw in (("ops", {"replay": False}), ("replay", {"capture": False}), ("graph", {})):
                rt = GpuRuntime(eg, devices=CostDevices(k), **kw)
                _null_kernels(rt)
                for _ in range(2):  # the first step runs op by op, the second captures
                    rt.load(tiles)
                    rt.run()
                samples = []
                for _ in range(steps):  # the step alone: its inputs stay in the arena
                    t0 = time.perf_counter()
                    st = rt.run()
                    samples.append(time.perf_counter() - t0)
                assert st["launch"]["mode"] == mode, (mode, st["launch"])
                times[mode] = float(np.median(samples))
                if rt.launch is not None:
                    build_s = rt.launch.build_seconds
                if mode == "graph":  # writing every input tile (params included), as each step does
                    samples = []
                    for _ in range(max(3, steps // 4)):
                        t0 = time.perf_counter()
                        rt.load(tiles)  # checked, then written (asynchronously on a GPU)
                        samples.append(time.perf_counter() - t0)
                    rt.run()
                    times["inputs"] = float(np.median(samples))
            rows.append([name, k, len(eg.ops), times["ops"] * 1e3, times["replay"] * 1e3, times["graph"] * 1e3,
                         times["ops"] / times["replay"], times["ops"] / times["graph"], build_s * 1e3,
                         times["inputs"] * 1e3])
    return rows


HEADS = ["model", "workers", "ops", "op by op ms", "replay ms", "graph ms", "ops/replay", "ops/graph",
         "build ms (once)", "inputs ms"]


def main(steps: int = 20, quick: bool = False) -> list:
    """Prints the host-cost table (median of `steps` steps per cell) and returns its rows."""
    rows = host_cost(workers=(1, 8) if quick else (1, 2, 4, 8), steps=steps)
    print(f"Host time per GPU step on the stand-in (no device work; median of {steps} steps): op by op vs the "
          f"launch list replayed vs its captured graph; 'inputs ms' writes every input tile (data, params, "
          f"optimizer states: host memcpy here, host-to-device copies on a GPU), which each step adds")
    print(table(HEADS, rows))
    return [dict(zip(HEADS, r)) for r in rows]
