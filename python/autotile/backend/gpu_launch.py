"""The launch list of an execution graph on the GPU runtime: everything that does not change
between steps resolved once, so a step replays it (issue 32 item 1).

Per op, in the runtime's merged enqueue order, one small record: the worker, its stream, the
events it waits on (the cross-stream dependencies, deduplicated once), the event it records,
and what it launches:

* a compute op: its kernel call with the node, OpDef, tile attributes (``tile_attrs``, the
  costly part of the per-op path), input views in the arena (shape-only stand-ins built once),
  output views, auxiliary-state boxes;
* a fetch op: the MultiFetch launch over the records uploaded at build time (gpu_fetch), the
  memcpy row runs and staging buffers;
* a swap op: one asynchronous copy between the arena and the pinned host pool, its pointers
  resolved.

A step (:meth:`LaunchList.replay`) writes the graph inputs into their arena slots on each
worker's compute stream (asynchronously: no synchronisation), makes the origin stream (worker
0's compute stream) wait for them, forks every other stream from the origin with one event,
and then either launches the captured CUDA graph of the whole step (one call), or, where the
step cannot be captured, enqueues the records one by one. The step's only synchronisation is
its end.

Capture (``dev.begin_capture``/``end_capture``/``launch_graph``): the first replay of a given
(is_train, seed) enqueues the records inside a capture begun on the origin stream; every other
stream joins it through the fork event and joins back into the origin before the capture
ends, as CUDA requires. Ops whose kernel runs on the host (inputs copied down, the stream
synchronised) cannot be captured: the list names them in ``stats['capture']`` and replays
uncaptured. A capture that CUDA refuses (an unforeseen synchronising call) is reported the
same way, naming the op being enqueued when it failed."""
from __future__ import annotations

import time
from typing import Dict, List, Optional

import numpy as np

from ..errors import Error
from ..execgraph.tile_attrs import tile_attrs
from ..ops.registry import KernelContext, node_key
from .gpu_devices import _is_oom
from .sub_op import crop
from .tiles import input_tiles


class StepState:
    """What changes between steps and the records read when they run."""

    __slots__ = ("is_train", "seed", "rngs")

    def __init__(self, workers: int, is_train: bool = True, seed: int = 0):
        self.set(workers, is_train, seed)

    def set(self, workers: int, is_train: bool, seed: int):
        self.is_train, self.seed = bool(is_train), int(seed)
        self.rngs = [np.random.default_rng(seed + w) for w in range(workers)]


class ComputeLaunch:
    """One compute op resolved once: calling it runs the op's kernel on its arena views and
    writes its outputs (the work of SubOpRunner.run + GpuRuntime._compute, minus the
    per-step resolution of views, attributes and shapes)."""

    __slots__ = ("rt", "w", "name", "node", "opdef", "attrs", "inputs", "n_args", "aux", "outs", "out_views")

    def __init__(self, rt, op: dict):
        eg, runner = rt.eg, rt.runner
        low = eg.lowered
        self.rt, self.w = rt, op["device"]
        self.name = low.node_names[op["node"]]
        self.node = runner.nodes[self.name]
        self.opdef = self.node.opdef()
        in_t, out_t = eg.core_tensor_inputs[op["node"]], eg.core_tensor_outputs[op["node"]]
        self.inputs = [rt.views[b] if b >= 0 else runner.shape_only_input(op, j) for j, b in enumerate(op["inputs"])]
        out_boxes = [(eg.buffers[b]["lo"], eg.buffers[b]["hi"]) for b in op["outputs"]]
        self.attrs = tile_attrs(self.node.op, self.node.parsed_attrs(), op["input_boxes"], out_boxes,
                                [low.tensor_shapes[t] for t in in_t], [low.tensor_shapes[t] for t in out_t])
        self.n_args = len(self.opdef.arguments(self.attrs))
        self.aux = []
        for i, (lo, hi) in enumerate(op["input_boxes"][self.n_args:]):
            self.aux.append((low.tensor_names[in_t[self.n_args + i]], tuple(lo), tuple(hi),
                             tuple(h - l for l, h in zip(lo, hi))))
        self.outs = [(rt.views[b], eg.buffers[b], low.tensor_shapes[t]) for b, t in zip(op["outputs"], out_t)]
        self.out_views = [v for v, _, _ in self.outs] if runner.out_views else None

    def __call__(self, st: StepState, stream):
        try:
            self._run(st, stream)
        except Error:
            raise
        except Exception as e:
            if _is_oom(e):  # the runtime names the device, GPU and bytes
                raise
            raise Error(f"node '{self.name}' ({self.node.op}) on device {self.w} failed in a replayed step: "
                        f"{type(e).__name__}: {e}") from None

    def _run(self, st: StepState, stream):
        rt = self.rt
        rt._worker, rt._stream = self.w, stream  # the host kernel path copies on this stream
        ctx = KernelContext(is_train=st.is_train, aux=self.inputs[self.n_args:], rng=st.rngs[self.w], xp=rt.xp,
                            key=node_key(self.name, st.seed), out=self.out_views)
        aux_in = list(ctx.aux)
        outs = rt.runner.kernel(self.node, self.opdef, self.attrs, self.inputs, ctx)
        for (state, lo, hi, want), before, after in zip(self.aux, aux_in, ctx.aux):
            if after is not before:  # the kernel replaced the state: keep the tile's new value
                if tuple(after.shape) != want:
                    raise Error(f"node '{self.name}' updated auxiliary state {state} with shape "
                                f"{tuple(after.shape)}, its tile is {want}")
                rt.runner.aux_updates[(state, lo, hi)] = after
        xp = rt.xp
        for (view, buf, full), value in zip(self.outs, outs):
            if value is view:  # written in place (NumPy buffers): nothing to check or copy
                continue
            if tuple(value.shape) != view.shape:
                value = crop(value, buf, full)
                if tuple(value.shape) != view.shape:
                    raise Error(f"node '{self.name}' (op {self.node.op}) produced shape {tuple(value.shape)} for "
                                f"its tile, expected {view.shape}")
            if isinstance(value, np.ndarray) and xp is not np:
                rt.dev.to_device(self.w, view, value, stream)
            else:
                xp.copyto(view, value, casting="unsafe")


class LaunchList:
    """The step of a GpuRuntime resolved once (see the module docstring). Built after the
    runtime's first (op by op) step, which settles each op type's kernel path."""

    def __init__(self, rt, capture: bool = True):
        t0 = time.perf_counter()
        self.rt = rt
        eg, dev = rt.eg, rt.dev
        self.state = StepState(eg.devices)
        self.records = []  # (op index, worker, stream, events to wait on, event to record, launch)
        self.blockers: List[str] = []
        stream_of: Dict[int, int] = {}
        seq: Dict[int, int] = {}
        counters: Dict[int, int] = {}
        waited: Dict[tuple, int] = {}
        events = {}
        used = {}
        for i in rt.enqueue_order():
            op = eg.ops[i]
            w, kind = op["device"], op["kind"]
            swap = kind in ("swap_out", "swap_in")
            stream = dev.swap_stream(w) if swap else dev.stream(w, kind == "fetch")
            sid = 3 * w + (2 if swap else int(kind == "fetch"))
            waits = []
            for j in op["deps"]:  # the same deduplication as the op-by-op path
                sj = stream_of[j]
                if sj == sid or waited.get((sid, sj), -1) >= seq[j]:
                    continue
                waits.append(events[j])
                waited[sid, sj] = seq[j]
            try:
                launch = self._launch(i, op, w, stream, kind)
            except Exception as e:
                raise rt._op_error(e, op, w) from None
            events[i] = dev.event(w)
            self.records.append((i, w, stream, tuple(waits), events[i], launch))
            stream_of[i], seq[i] = sid, counters.get(sid, 0)
            counters[sid] = seq[i] + 1
            used[sid] = (w, stream)
        self.n_waits = sum(len(r[3]) for r in self.records)
        self.origin = dev.stream(0, False)
        self.others = [(w, s) for sid, (w, s) in sorted(used.items()) if s is not self.origin]
        self.inputs_ready = [dev.event(w) for w in range(eg.devices)]
        self.fork = dev.event(0)
        self.joins = [dev.event(w) for w, _ in self.others]
        self.graphs: Dict[tuple, object] = {}
        self.aux_of_graph: Dict[tuple, dict] = {}
        self.capture = capture and hasattr(dev, "begin_capture")
        self.capture_error: Optional[str] = None
        self._written = False  # inputs written since the last step (their events recorded)
        self.build_seconds = time.perf_counter() - t0

    def _launch(self, i: int, op: dict, w: int, stream, kind: str):
        rt, dev, st = self.rt, self.rt.dev, self.state
        if kind == "fetch":
            return lambda: rt._fetch_op(i, op, w, stream)
        if kind in ("swap_out", "swap_in"):
            src, dst = op["pieces"][0][0], op["outputs"][0]
            sv, dv = rt.views[src], rt.views[dst]
            if sv.nbytes != dv.nbytes or len(op["pieces"]) != 1:
                raise Error(f"{kind} op copies {len(op['pieces'])} piece(s) of {sv.nbytes} bytes into {dv.nbytes}: "
                            f"a swap copies one whole buffer")
            sptr, dptr, n, to_host = dev.ptr(sv), dev.ptr(dv), int(sv.nbytes), kind == "swap_out"
            return lambda: dev.memcpy_async(stream, dptr, sptr, n, to_host)
        rec = ComputeLaunch(rt, op)
        path = rt.kernel_paths.get(rec.opdef.name)
        if path not in ("gpu", "dispatch"):  # the host path copies to the host and synchronises the stream
            self.blockers.append(f"node '{rec.name}' ({rec.opdef.name}): {path or 'unknown'} kernel")
        return lambda: rec(st, stream)

    # ------------------------------------------------------------------ a step
    def write_inputs(self, tiles):
        """Writes (buffer, value) pairs into their arena slots on each worker's compute stream
        (tiles in the pinned host pool of a swapped plan directly: the last step has ended),
        then records each worker's inputs-ready event."""
        rt, dev, eg = self.rt, self.rt.dev, self.rt.eg
        for b, value in tiles:
            buf = eg.buffers[b]
            if buf.get("host"):
                rt.views[b][...] = value
            else:
                w = buf["device"]
                dev.upload_async(w, rt.views[b], value, dev.stream(w, False))
        for w in range(eg.devices):
            dev.record(w, self.inputs_ready[w], dev.stream(w, False))
        self._written = True

    def _enqueue(self, join: bool):
        """Forks every stream from the origin, enqueues every record, and (for a capture)
        joins every stream back into the origin."""
        dev = self.rt.dev
        dev.record(0, self.fork, self.origin)
        for w, s in self.others:
            dev.wait(w, s, self.fork)
        for i, w, stream, waits, event, launch in self.records:
            try:
                for ev in waits:
                    dev.wait(w, stream, ev)
                dev.enqueue(w, stream, launch)
                dev.record(w, event, stream)
            except Exception as e:
                raise _Failed(i, e) from None
        if join:
            for (w, s), ev in zip(self.others, self.joins):
                dev.record(w, ev, s)
                dev.wait(0, self.origin, ev)

    def replay(self, is_train: bool = True, seed: int = 0) -> dict:
        """One step: the inputs written by :meth:`write_inputs` since the last step (or the
        arena as it is), then the captured graph launched or the records enqueued; waits for
        the end. Returns the step's stats (``launch``, ``capture``, times)."""
        rt, dev, eg = self.rt, self.rt.dev, self.rt.eg
        rt.runner.aux_updates.clear()
        self.state.set(eg.devices, is_train, seed)
        key = (bool(is_train), int(seed))
        t0 = time.perf_counter()
        if not self._written:
            for w in range(eg.devices):
                dev.record(w, self.inputs_ready[w], dev.stream(w, False))
        self._written = False
        for w in range(1, eg.devices):  # outside any capture: a graph may not wait on outside events
            dev.wait(0, self.origin, self.inputs_ready[w])
        mode = "replay"
        try:
            if key in self.graphs:
                rt.runner.aux_updates.update(self.aux_of_graph[key])  # a graph reruns no Python
                dev.launch_graph(0, self.graphs[key], self.origin)
                mode = "graph"
            elif self.capture and not self.blockers and self.capture_error is None:
                mode = "graph" if self._capture(key) else "replay"
            else:
                self._enqueue(join=False)
        except _Failed as f:
            raise rt._op_error(f.error, eg.ops[f.index], eg.ops[f.index]["device"]) from None
        t_enqueue = time.perf_counter() - t0
        rt._sync()
        return {"step_seconds": time.perf_counter() - t0, "enqueue_seconds": t_enqueue, "stream_waits": self.n_waits,
                "launch": self.describe(mode), "capture": self.capture_stats(mode)}

    def _capture(self, key) -> bool:
        """Captures the step into a graph and launches it; on a capture CUDA refuses, records
        why and enqueues the step uncaptured. True when the graph ran."""
        rt, dev = self.rt, self.rt.dev
        failed = None
        dev.begin_capture(0, self.origin)
        try:
            self._enqueue(join=True)
        except _Failed as f:
            node = rt.eg.ops[f.index]["node"]
            name = rt.eg.lowered.node_names[node] if node >= 0 else "?"
            kind = rt.eg.ops[f.index]["kind"]
            failed = f"op {f.index} ({kind} of node '{name}'): {type(f.error).__name__}: {f.error}"
        try:
            graph = dev.end_capture(0, self.origin)
        except Exception as e:
            failed = failed or f"end of capture: {type(e).__name__}: {e}"
        if failed is not None:
            self.capture_error = failed[:300]
            rt.runner.aux_updates.clear()
            self._enqueue(join=False)
            return False
        self.graphs[key] = graph
        self.aux_of_graph[key] = dict(rt.runner.aux_updates)
        dev.launch_graph(0, graph, self.origin)
        return True

    def describe(self, mode: str) -> dict:
        """``stats['launch']``: how the step ran (ops, replay, graph) and the list's size."""
        if not hasattr(self, "_kinds"):
            self._kinds = {}
            for i, *_ in self.records:
                k = self.rt.eg.ops[i]["kind"]
                self._kinds[k] = self._kinds.get(k, 0) + 1
        return {"mode": mode, "records": len(self.records), "by_kind": dict(self._kinds),
                "build_seconds": self.build_seconds, "graphs": len(self.graphs)}

    def capture_stats(self, mode: str) -> dict:
        """``stats['capture']``: whether this step ran as a captured graph, and what kept it
        from being captured (ops on the host path, a capture CUDA refused, a device side
        without capture)."""
        why = None
        if mode != "graph":
            if self.blockers:
                why = f"{len(self.blockers)} op(s) run on the host and cannot be captured"
            elif self.capture_error:
                why = f"the capture failed: {self.capture_error}"
            elif not self.capture:
                why = "capture is off (capture=False) or the device side cannot capture"
        return {"captured": mode == "graph", "reason": why, "blocked_by": list(self.blockers[:50]),
                "n_blocked": len(self.blockers)}


class _Failed(Exception):
    """An exception raised while enqueueing record `index`."""

    def __init__(self, index: int, error: Exception):
        super().__init__(str(error))
        self.index, self.error = index, error


def step_tiles(eg, values: Dict[str, np.ndarray]):
    """(buffer, value) of every graph input's tiles, validated now (missing or misshapen
    inputs raise Error here, before anything is enqueued)."""
    return list(input_tiles(eg, values))


def train_steps(rt, values: Dict[str, np.ndarray], steps: int, is_train: bool = True, seeds=None,
                batches=None) -> list:
    """`steps` steps on runtime `rt` (a GpuRuntime, or any runtime with load, run, gather and
    runner.aux_updates: the host runtime), each fed the previous step's updated parameters,
    optimizer states and auxiliary states (``res.params`` fed back); per step the full value
    of every result tensor, the auxiliary states and the step's stats. `seeds` gives each
    step's seed (0 for every step by default); `batches` each step's own inputs (a dict per
    step, e.g. data and labels) over `values`."""
    from .multi_device import assemble_aux, result_names
    from .tiles import step_inputs

    if int(steps) < 1:
        raise Error(f"steps must be at least 1, got {steps}")
    eg = rt.eg
    tg = eg.training
    vals = dict(values)
    out = []
    for s in range(int(steps)):
        if batches is not None:
            vals.update(batches[s])
        inputs = step_inputs(eg, vals)
        rt.load(inputs)
        stats = rt.run(is_train=is_train, seed=0 if seeds is None else int(seeds[s]))
        full = {n: rt.gather(n) for n in result_names(eg)}
        aux = assemble_aux(eg, rt.runner.updated_aux(), inputs)
        out.append((full, aux, stats))
        if is_train:
            vals.update({p: full[u] for p, u in zip(tg.param_names, tg.updated_names)})
            vals.update({st: full[n] for st, n in zip(tg.state_names, tg.new_state_names)})
            vals.update(aux)
    return out
