"""Host runtime: k virtual devices in one process.

Each device owns one arena laid out by the memory plan and runs its ops in a thread, in
schedule order; an op waits only for the ops it depends on (events, no barrier per op).
Compute ops run the node's NumPy kernel on tile views of the arena; MultiFetch ops assemble
regions from peer arenas with one C++ call that releases the GIL."""
from __future__ import annotations

import contextlib
import mmap
import os
import queue
import threading
import time
from typing import Dict

import numpy as np

from .. import _core
from ..dtype_flags import is_bfloat16, numpy_dtype
from ..errors import Error
from .sub_op import SubOpRunner
from .tiles import box_index, buffer_span, freeable_tiles, input_tiles, value_tiles


#: bytes of a tile :meth:`HostRuntime.gather` adds before it frees them
GATHER_BLOCK = 4 << 20


def _zeroed_pages(nbytes: int):
    """(mapping, uint8 array over it): `nbytes` zero bytes in an anonymous mapping of their
    own, backed only once written; :meth:`HostRuntime.free` hands written pages back.
    Private, not shared: MADV_DONTNEED frees private pages (shared ones stay in shmem, data
    and all), and a private mapping can take 2 MB pages, from which MultiFetch copies short
    strided runs (one page each) 1.5-2.7x faster (`autotile bench multifetch`, docs/benchmarks.md)."""
    if not hasattr(mmap, "MAP_PRIVATE"):  # Windows: no flags
        pages = mmap.mmap(-1, max(int(nbytes), 1))
        return pages, np.frombuffer(pages, dtype=np.uint8)
    pages = mmap.mmap(-1, max(int(nbytes), 1), flags=mmap.MAP_PRIVATE)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        pages.madvise(mmap.MADV_HUGEPAGE)
    return pages, np.frombuffer(pages, dtype=np.uint8)


_CONTROLLER = []  # the process's threadpoolctl controller, found once


def _blas_threads(n: int):
    """Limit BLAS to `n` threads inside the block (no-op without threadpoolctl). The libraries
    are looked up once per process: threadpool_limits() looks them up on every call (1.1-1.3 ms,
    measured per host-runtime step by sim/calibrate.measure_dispatch)."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return contextlib.nullcontext()
    if not _CONTROLLER:
        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0].limit(limits=n, user_api="blas")


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity set where the OS has one (taskset,
    a container's cpuset, a benchmark's thread budget), else every core."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


class HostRuntime:
    """Runs an ExecGraph (autotile.execgraph.ExecGraph) on virtual devices."""

    def __init__(self, eg, timeout: float = 600.0):
        self.eg = eg
        self.timeout = timeout
        low = eg.lowered
        self.dtypes = [numpy_dtype(d) for d in low.tensor_dtypes]  # bfloat16 through ml_dtypes
        arenas = [_zeroed_pages(b) for b in eg.core.arena_bytes]
        # each device's host pool: where swapped-out tensors wait (exec/swap_plan.h)
        pools = [_zeroed_pages(b) for b in eg.core.host_bytes]
        self.arenas = [a for _, a in arenas]
        self.host_pools = [a for _, a in pools]
        self._pages = {(False, d): m for d, (m, _) in enumerate(arenas)}
        self._pages.update({(True, d): m for d, (m, _) in enumerate(pools)})
        self.views = [self._view(b) for b in eg.buffers]
        self.runner = SubOpRunner(eg)
        self.seed = 0  # the step's random seed (run() sets it; calibration replays ops directly)

    def _view(self, b: dict) -> np.ndarray:
        dtype = self.dtypes[b["tensor"]]
        shape = tuple(h - l for l, h in zip(b["lo"], b["hi"]))
        count = int(np.prod(shape)) if shape else 1
        arena = (self.host_pools if b.get("host") else self.arenas)[b["device"]]
        return arena[b["offset"]: b["offset"] + count * dtype.itemsize].view(dtype).reshape(shape)

    # ------------------------------------------------------------------ data in / out
    def load(self, values: Dict[str, np.ndarray]):
        """Writes every graph input (data, params, optimizer state) into its planned tiles."""
        for b, value in input_tiles(self.eg, values):
            self.views[b][...] = value

    def gather(self, name: str, free=()) -> np.ndarray:
        """The full value of tensor `name` assembled from the devices' tiles (partials summed).
        The tiles among buffer ids `free` are handed back to the system as they are added, a
        few MB of rows at a time, so assembling a tensor holds little of it twice."""
        tid = self.eg.tensor_id[name]
        full = np.zeros(self.eg.lowered.tensor_shapes[tid], dtype=self.dtypes[tid])
        banded = []
        for b in value_tiles(self.eg, name):
            region = full[box_index(self.eg.buffers[b]["lo"], self.eg.buffers[b]["hi"])]
            tile = self.views[b]
            if b not in free or tile.ndim == 0:
                region += tile
                if b in free:
                    self.free([b])
                continue
            host, device, start, end = buffer_span(self.eg, b)
            banded.append((region, tile, host, device, start, end, max(1, (end - start) // max(1, len(tile)))))
        if not banded:
            return full
        # Row bands of every tile in lockstep: tiles side by side (a split of an inner dim)
        # fill the same rows of `full` together, so the (huge) pages those rows touch are
        # written whole before the next band, not half-touched by one tile and held until
        # the other's turn. Each element still gets its tiles' values in the same order.
        step = max(1, min(GATHER_BLOCK // row_bytes for *_, row_bytes in banded))
        for r in range(0, max(len(t[1]) for t in banded), step):
            for region, tile, host, device, start, end, row_bytes in banded:
                if r >= len(tile):
                    continue
                region[r:r + step] += tile[r:r + step]
                last = min(r + step, len(tile))
                self._free_span(host, device, start + r * row_bytes, end if last == len(tile) else start + last * row_bytes)
        return full

    def gather_results(self, names) -> Dict[str, np.ndarray]:
        """:meth:`gather` of every name, freeing its tiles (replicas included) as they are
        added: the step's results then take the memory of their scattered copies rather than
        adding to it (the runtime's arenas are spent afterwards)."""
        freeable = freeable_tiles(self.eg, names)
        out = {}
        for name in names:
            out[name] = self.gather(name, free=set(freeable[name]))
            self.free(freeable[name])  # the extra replicas (the tiles gathered are free already)
        return out

    def free(self, buffers):
        """Hands the whole pages of `buffers` back to the system (they read as zeros after)."""
        for b in buffers:
            self._free_span(*buffer_span(self.eg, b))

    def _free_span(self, host: bool, device: int, start: int, end: int):
        """Hands the whole pages inside bytes [start, end) of an arena (or host pool) back."""
        madvise = getattr(mmap.mmap, "madvise", None)
        dontneed = getattr(mmap, "MADV_DONTNEED", None)
        if madvise is None or dontneed is None:
            return
        page = mmap.PAGESIZE
        first, last = -(-start // page) * page, end // page * page
        if last > first:
            self._pages[host, device].madvise(dontneed, first, last - first)

    # ------------------------------------------------------------------ execution
    def _compute(self, op: dict, is_train: bool, rng):
        outs = self.runner.run(op, lambda b: self.views[b], is_train, rng, self.seed)
        for b, value in zip(op["outputs"], outs):
            if not self.runner.in_place(value, self.views[b]):
                np.copyto(self.views[b], value, casting="unsafe")

    def _fetch(self, op: dict):
        dst_b = self.eg.buffers[op["outputs"][0]]
        dst = self.views[op["outputs"][0]]
        if is_bfloat16(dst.dtype):  # NumPy's buffer protocol has no bfloat16: its bits as uint16
            pieces = [(self.views[src].view(np.uint16), self.eg.buffers[src]["lo"], lo, hi)
                      for src, lo, hi in op["pieces"]]
            _core.multifetch(dst.view(np.uint16), dst_b["lo"], pieces, op["accumulate"], bfloat16=True)
            return
        pieces = [(self.views[src], self.eg.buffers[src]["lo"], lo, hi) for src, lo, hi in op["pieces"]]
        _core.multifetch(dst, dst_b["lo"], pieces, op["accumulate"])

    def _dependencies(self):
        """(streams, waiting, after): each device's compute and copy streams (op ids in
        order), how many ops each op waits for (its dependencies and the op before it on its
        stream), and for each op the ops that wait for it."""
        ops, devices = self.eg.ops, self.eg.devices
        streams = [self.eg.schedule(d) for d in range(devices)]
        streams += [s for s in (self.eg.core.copy_schedule(d) for d in range(devices)) if s]
        waiting = [0] * len(ops)
        after: list = [[] for _ in ops]  # op -> ops that wait for it
        for stream in streams:
            prev = -1
            for i in stream:
                for dep in ops[i]["deps"]:
                    after[dep].append(i)
                    waiting[i] += 1
                if prev >= 0:
                    after[prev].append(i)
                    waiting[i] += 1
                prev = i
        return streams, waiting, after

    def sequential_order(self) -> list:
        """Every scheduled op id in one order that :meth:`run`'s dependencies allow (for
        running ops one at a time, e.g. to measure each alone)."""
        streams, waiting, after = self._dependencies()
        ready = [i for s in streams for i in s if waiting[i] == 0]
        order = []
        while ready:
            i = ready.pop()
            order.append(i)
            for j in after[i]:
                waiting[j] -= 1
                if waiting[j] == 0:
                    ready.append(j)
        return order

    def execute(self, op_id: int, is_train: bool = True):
        """Runs op `op_id` alone (its inputs must be in place): a compute op's kernel, or the
        copy of a fetch or swap."""
        op = self.eg.ops[op_id]
        if op["kind"] == "compute":
            self._compute(op, is_train, np.random.default_rng(self.seed + op["device"]))
        else:
            self._fetch(op)

    def run(self, is_train: bool = True, seed: int = 0) -> dict:
        """Executes every device's schedule; returns timing stats. Raises Error naming the
        node and device if any op fails (the others stop), and on a deadlock or a step that
        outlasts `timeout`, naming an op that never ran.

        A small pool of worker threads runs ops as they become ready: each op waits for its
        dependencies and for the op before it on its device's compute (or copy) stream, the
        order each device's own thread used to keep. Thousands of devices cost no more than
        their ops (one thread per device made 4096 threads poll each other's events)."""
        self.seed = seed
        self.runner.aux_updates.clear()
        ops = self.eg.ops
        devices = self.eg.devices
        streams, waiting, after = self._dependencies()
        total = sum(len(s) for s in streams)
        rngs = [np.random.default_rng(seed + d) for d in range(devices)]
        finished_at = [0.0] * devices
        fetch_seconds = [0.0] * devices
        ready: "queue.SimpleQueue" = queue.SimpleQueue()
        lock = threading.Lock()
        state = {"done": 0, "running": 0, "error": None}
        workers = min(len(streams), max(8, 2 * usable_cores()))
        t0 = time.perf_counter()

        def stop(err):
            with lock:
                if state["error"] is None:
                    state["error"] = err
            for _ in range(workers):
                ready.put(-1)

        def execute(i: int):
            op = ops[i]
            device = op["device"]
            try:
                if op["kind"] == "compute":
                    self._compute(op, is_train, rngs[device])
                else:
                    t1 = time.perf_counter()
                    self._fetch(op)
                    fetch_seconds[device] += time.perf_counter() - t1
            except Exception as e:  # stop every device, name the node
                name = self.eg.lowered.node_names[op["node"]] if op["node"] >= 0 else "?"
                msg = str(e) if isinstance(e, Error) else f"{type(e).__name__}: {e}"
                what = f"{op['kind']} op of node" if op["kind"] in ("compute", "fetch") else f"{op['kind']} before node"
                stop(Error(f"device {device}: {what} '{name}' failed: {msg}"))
                return False
            if op["kind"] != "swap_out" and op["kind"] != "swap_in":
                finished_at[device] = time.perf_counter() - t0
            return True

        def worker():
            while True:
                try:
                    i = ready.get(timeout=min(self.timeout, 5.0))
                except queue.Empty:
                    if time.perf_counter() - t0 > self.timeout:
                        stuck = next(j for s in streams for j in s if waiting[j] > 0)
                        stop(Error(f"device {ops[stuck]['device']} timed out after {self.timeout:g} s waiting "
                                   f"for op {stuck}'s dependencies"))
                        return
                    continue
                if i < 0 or state["error"] is not None:
                    return
                if not execute(i):
                    return
                with lock:
                    state["done"] += 1
                    state["running"] -= 1
                    for j in after[i]:
                        waiting[j] -= 1
                        if waiting[j] == 0:
                            state["running"] += 1
                            ready.put(j)
                    over = state["done"] == total
                    stuck = not over and state["running"] == 0
                if over:
                    for _ in range(workers):
                        ready.put(-1)
                    return
                if stuck:  # nothing runs and nothing can: a dependency cycle
                    j = next(j for s in streams for j in s if waiting[j] > 0)
                    stop(Error(f"the execution graph deadlocks: op {j} on device {ops[j]['device']} "
                               f"waits for ops that wait for it"))
                    return

        for stream in streams:
            for i in stream:
                if waiting[i] == 0:
                    state["running"] += 1
                    ready.put(i)
        if total and state["running"] == 0:
            raise Error("the execution graph deadlocks: every op waits for another")
        threads = [threading.Thread(target=worker, daemon=True) for _ in range(workers)]
        # The workers share the cores: BLAS threads of their own would oversubscribe them
        # (OpenBLAS spin-waits), several times slower than one BLAS thread per worker.
        with _blas_threads(max(1, usable_cores() // max(1, min(workers, devices)))):
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        if state["error"] is not None:
            raise state["error"]
        return {"step_seconds": time.perf_counter() - t0, "device_seconds": finished_at,
                "fetch_seconds": fetch_seconds}
