"""Host runtime: k virtual devices in one process.

Each device owns one arena laid out by the memory plan and runs its ops in a thread, in
schedule order; an op waits only for the ops it depends on (events, no barrier per op).
Compute ops run the node's NumPy kernel on tile views of the arena; MultiFetch ops assemble
regions from peer arenas with one C++ call that releases the GIL."""
from __future__ import annotations

import threading
import time
from typing import Dict, List

import numpy as np

from .. import _core
from ..errors import Error
from ..execgraph.tile_attrs import tile_attrs
from ..ops import registry
from ..ops.registry import KernelContext


def _crop(value: np.ndarray, buf: dict, full_shape) -> np.ndarray:
    """A kernel that read whole dims of its inputs (e.g. softmax's class dim when the plan
    splits it) computes those dims in full: keep the part the tile owns."""
    if value.shape == tuple(h - l for l, h in zip(buf["lo"], buf["hi"])) or value.ndim != len(full_shape):
        return value
    index = []
    for d, (lo, hi) in enumerate(zip(buf["lo"], buf["hi"])):
        if value.shape[d] == hi - lo:
            index.append(slice(None))
        elif value.shape[d] == full_shape[d]:
            index.append(slice(lo, hi))
        else:
            return value
    return value[tuple(index)]


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
        self.views = [self._view(b) for b in eg.buffers]
        # Symbol nodes of the training graph by name (kernels and attributes).
        self.nodes = {n.name: n for n in eg.training.symbol.topo_nodes() if not n.is_variable}

    def _view(self, b: dict) -> np.ndarray:
        dtype = self.dtypes[b["tensor"]]
        shape = tuple(h - l for l, h in zip(b["lo"], b["hi"]))
        count = int(np.prod(shape)) if shape else 1
        arena = self.arenas[b["device"]]
        return arena[b["offset"]: b["offset"] + count * dtype.itemsize].view(dtype).reshape(shape)

    # ------------------------------------------------------------------ data in / out
    def load(self, values: Dict[str, np.ndarray]):
        """Writes every graph input (data, params, optimizer state) into its planned tiles."""
        low = self.eg.lowered
        for tid, name in enumerate(low.tensor_names):
            if self.eg.core.tile(tid, 0) < 0:
                continue
            for d in range(self.eg.devices):
                b = self.eg.buffers[self.eg.core.tile(tid, d)]
                if b["producer"] >= 0:
                    break
                if name not in values:
                    raise Error(f"missing input '{name}'")
                full = np.asarray(values[name], dtype=self.dtypes[tid])
                if full.shape != tuple(low.tensor_shapes[tid]):
                    raise Error(f"input '{name}' has shape {full.shape}, the plan expects {tuple(low.tensor_shapes[tid])}")
                self.views[self.eg.core.tile(tid, d)][...] = full[tuple(slice(l, h) for l, h in zip(b["lo"], b["hi"]))]

    def gather(self, name: str) -> np.ndarray:
        """The full value of tensor `name` assembled from the devices' tiles (partials summed)."""
        low = self.eg.lowered
        tid = self.eg.tensor_id[name]
        full = np.zeros(low.tensor_shapes[tid], dtype=self.dtypes[tid])
        plan_tilings = self.eg.plan.tensor_tilings[name]
        factors = self.eg.core.factors
        for d in range(self.eg.devices):
            digits, rest = [], d
            for k in reversed(factors):
                digits.append(rest % k)
                rest //= k
            digits.reverse()
            if any(t == "replicate" and dig != 0 for t, dig in zip(plan_tilings, digits)):
                continue  # one replica is enough
            b = self.eg.buffers[self.eg.core.tile(tid, d)]
            full[tuple(slice(l, h) for l, h in zip(b["lo"], b["hi"]))] += self.views[self.eg.core.tile(tid, d)]
        return full

    # ------------------------------------------------------------------ execution
    def _compute(self, op: dict, is_train: bool, rng):
        low = self.eg.lowered
        name = low.node_names[op["node"]]
        node = self.nodes[name]
        opdef = node.opdef()
        attrs = node.parsed_attrs()
        in_tensors = self.eg.core_tensor_inputs[op["node"]]
        inputs = []
        for j, b in enumerate(op["inputs"]):
            if b >= 0:
                inputs.append(self.views[b])
            else:  # the op needs only this input's shape (a shape donor, e.g. of its output)
                lo, hi = op["input_boxes"][j]
                shape = tuple(h - l for l, h in zip(lo, hi))
                full = tuple(low.tensor_shapes[in_tensors[j]])
                for t, b in zip(self.eg.core_tensor_outputs[op["node"]], op["outputs"]):
                    if tuple(low.tensor_shapes[t]) == full:
                        ob = self.eg.buffers[b]
                        shape = tuple(h - l for l, h in zip(ob["lo"], ob["hi"]))
                        break
                inputs.append(np.broadcast_to(np.zeros((), self.dtypes[in_tensors[j]]), shape))
        in_shapes = [low.tensor_shapes[t] for t in in_tensors]
        out_tensors = self.eg.core_tensor_outputs[op["node"]]
        out_shapes = [low.tensor_shapes[t] for t in out_tensors]
        out_boxes = [(self.eg.buffers[b]["lo"], self.eg.buffers[b]["hi"]) for b in op["outputs"]]
        attrs = tile_attrs(node.op, attrs, op["input_boxes"], out_boxes, in_shapes, out_shapes)
        n_args = len(opdef.arguments(attrs))
        ctx = KernelContext(is_train=is_train, aux=list(inputs[n_args:]), rng=rng)
        outs = opdef.forward(attrs, inputs, ctx)
        for b, t, value in zip(op["outputs"], out_tensors, outs):
            view = self.views[b]
            value = _crop(np.asarray(value), self.eg.buffers[b], low.tensor_shapes[t])
            if value.shape != view.shape:
                raise Error(f"node '{name}' (op {node.op}) on device {op['device']} produced shape {value.shape} "
                            f"for its tile, expected {view.shape}: the op cannot run on this tile "
                            f"(a tile_attrs hook is missing for {node.op})")
            np.copyto(view, value, casting="unsafe")

    def _fetch(self, op: dict):
        dst_b = self.eg.buffers[op["outputs"][0]]
        pieces = [(self.views[src], self.eg.buffers[src]["lo"], lo, hi) for src, lo, hi in op["pieces"]]
        _core.multifetch(self.views[op["outputs"][0]], dst_b["lo"], pieces, op["accumulate"])

    def run(self, is_train: bool = True, seed: int = 0) -> dict:
        """Executes every device's schedule; returns timing stats. Raises Error naming the
        node and device if any op fails (the other devices stop at their next op)."""
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

        t0 = time.perf_counter()
        threads = [threading.Thread(target=worker, args=(d,), daemon=True) for d in range(self.eg.devices)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if failure.error is not None:
            raise failure.error
        return {"step_seconds": time.perf_counter() - t0, "device_seconds": timings, "fetch_seconds": fetch_seconds}
