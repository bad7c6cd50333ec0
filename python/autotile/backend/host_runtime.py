"""Host runtime: k virtual devices in one process.

Each device owns one arena laid out by the memory plan and runs its ops in a thread, in
schedule order; an op waits only for the ops it depends on (events, no barrier per op).
Compute ops run the node's NumPy kernel on tile views of the arena; MultiFetch ops assemble
regions from peer arenas with one C++ call that releases the GIL."""
from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Dict

import numpy as np

from .. import _core
from ..errors import Error
from .sub_op import SubOpRunner
from .tiles import box_index, input_tiles, value_tiles


def _blas_threads(n: int):
    """Limit BLAS to `n` threads inside the block (no-op without threadpoolctl)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=n, user_api="blas")


class _Failure:
    def __init__(self):
        self.lock = threading.Lock()
        self.error = None

    def set(self, err):
        with self.lock:
            if self.error is None:
                self.error = err


class HostRuntime:
    """Runs an ExecGraph (autotile.execgraph.ExecGraph) on virtual devices."""

    def __init__(self, eg, timeout: float = 600.0):
        self.eg = eg
        self.timeout = timeout
        low = eg.lowered
        self.dtypes = [np.dtype(d) for d in low.tensor_dtypes]
        self.arenas = [np.zeros(max(int(b), 1), dtype=np.uint8) for b in eg.core.arena_bytes]
        # each device's host pool: where swapped-out tensors wait (exec/swap_plan.h)
        self.host_pools = [np.zeros(max(int(b), 1), dtype=np.uint8) for b in eg.core.host_bytes]
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

    def gather(self, name: str) -> np.ndarray:
        """The full value of tensor `name` assembled from the devices' tiles (partials summed)."""
        tid = self.eg.tensor_id[name]
        full = np.zeros(self.eg.lowered.tensor_shapes[tid], dtype=self.dtypes[tid])
        for b in value_tiles(self.eg, name):
            full[box_index(self.eg.buffers[b]["lo"], self.eg.buffers[b]["hi"])] += self.views[b]
        return full

    # ------------------------------------------------------------------ execution
    def _compute(self, op: dict, is_train: bool, rng):
        outs = self.runner.run(op, lambda b: self.views[b], is_train, rng, self.seed)
        for b, value in zip(op["outputs"], outs):
            np.copyto(self.views[b], value, casting="unsafe")

    def _fetch(self, op: dict):
        dst_b = self.eg.buffers[op["outputs"][0]]
        pieces = [(self.views[src], self.eg.buffers[src]["lo"], lo, hi) for src, lo, hi in op["pieces"]]
        _core.multifetch(self.views[op["outputs"][0]], dst_b["lo"], pieces, op["accumulate"])

    def run(self, is_train: bool = True, seed: int = 0) -> dict:
        """Executes every device's schedule; returns timing stats. Raises Error naming the
        node and device if any op fails (the other devices stop at their next op)."""
        self.seed = seed
        ops = self.eg.ops
        done = [threading.Event() for _ in ops]
        failure = _Failure()
        timings = [0.0] * self.eg.devices
        fetch_seconds = [0.0] * self.eg.devices

        def worker(device: int):
            rng = np.random.default_rng(seed + device)
            t_start = time.perf_counter()
            for i in self.eg.schedule(device):
                op = ops[i]
                for dep in op["deps"]:
                    while not done[dep].wait(0.05):
                        if failure.error is not None:
                            return
                        if time.perf_counter() - t_start > self.timeout:
                            failure.set(Error(f"device {device} timed out waiting for op {dep}"))
                            return
                if failure.error is not None:
                    return
                try:
                    if op["kind"] == "compute":
                        self._compute(op, is_train, rng)
                    else:
                        t0 = time.perf_counter()
                        self._fetch(op)
                        fetch_seconds[device] += time.perf_counter() - t0
                except Exception as e:  # stop every device, name the node
                    name = self.eg.lowered.node_names[op["node"]] if op["node"] >= 0 else "?"
                    msg = str(e) if isinstance(e, Error) else f"{type(e).__name__}: {e}"
                    failure.set(Error(f"device {device}: {op['kind']} op of node '{name}' failed: {msg}"))
                    return
                done[i].set()
            timings[device] = time.perf_counter() - t_start

        def copier(device: int):
            """The device's copy stream: its swap-outs and swap-ins, in order, beside compute."""
            t_start = time.perf_counter()
            for i in self.eg.core.copy_schedule(device):
                op = ops[i]
                for dep in op["deps"]:
                    while not done[dep].wait(0.05):
                        if failure.error is not None:
                            return
                        if time.perf_counter() - t_start > self.timeout:
                            failure.set(Error(f"device {device}'s copy stream timed out waiting for op {dep}"))
                            return
                try:
                    self._fetch(op)
                except Exception as e:
                    name = self.eg.lowered.node_names[op["node"]] if op["node"] >= 0 else "?"
                    failure.set(Error(f"device {device}: {op['kind']} before node '{name}' failed: {e}"))
                    return
                done[i].set()

        t0 = time.perf_counter()
        threads = [threading.Thread(target=worker, args=(d,), daemon=True) for d in range(self.eg.devices)]
        threads += [threading.Thread(target=copier, args=(d,), daemon=True) for d in range(self.eg.devices)
                    if self.eg.core.copy_schedule(d)]
        # The device threads share the cores: BLAS threads of their own would oversubscribe
        # them (OpenBLAS spin-waits), several times slower than one BLAS thread per device.
        with _blas_threads(max(1, (os.cpu_count() or 1) // self.eg.devices)):
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        if failure.error is not None:
            raise failure.error
        return {"step_seconds": time.perf_counter() - t0, "device_seconds": timings, "fetch_seconds": fetch_seconds}
