"""GPU runtime: the execution graph's workers on CUDA GPUs through CuPy.

Worker i runs on GPU i % n_gpus (workers share a GPU when there are fewer GPUs than
workers; each keeps its own memory pool, arena and streams). Per worker:

* one memory pool (``cupy.cuda.MemoryPool``) and one arena allocated from it once, laid out
  by the static memory plan; kernel temporaries come from the same pool. Each pool is capped
  at its worker's share of the GPU's free memory (workers sharing a GPU cannot take each
  other's share; CuPy keeps freed blocks per stream, so they do not reuse each other's blocks
  anyway), and ``stats['pool_bytes']`` reports what each pool holds after the step beside its
  arena: the temporaries the static plan does not count;
* a compute stream (sub-operators), a copy stream (MultiFetch) and a swap stream (the
  swap-outs and swap-ins of a swapped plan, exec/swap_plan.h, in the device's copy schedule
  order) between the arena and a host pool in pinned (page-locked) host memory, so the
  copies run asynchronously beside the compute;
* one event per op; an op's stream waits on the events of the ops it depends on that ran on
  another stream (same worker or another one); nothing synchronises a whole device per op.

One host thread enqueues every worker's ops in a merged topological order, so every event an
op waits on has been recorded before the wait is issued. Kernels, per op type:

* ``gpu``: an array-module-generic kernel of gpu_kernels.KERNELS (cuBLAS GEMMs, im2col
  convolution, pooling, element-wise) run with CuPy;
* ``dispatch``: the registry's NumPy kernel called on CuPy arrays (NumPy's
  ``__array_function__``/``__array_ufunc__`` protocols route the calls to CuPy); tried once
  per op type and abandoned if it raises (e.g. it builds a NumPy array and mixes it in);
* ``host``: inputs copied to the host, the NumPy kernel, outputs copied back (the stream is
  synchronised around it). ``stats['kernels']`` reports which ops took which path.

MultiFetch runs the CUDA kernel of csrc/cuda/multifetch.cu (gpu_fetch.py): one launch per
fetch op over a record list uploaded once; sources on another GPU are read through UVA
where peer access is enabled, else copied row-run by row-run with cudaMemcpyPeerAsync
(into a staging buffer first when the fetch accumulates); a copied piece that is one
contiguous run of at least gpu_fetch.MEMCPY_MIN_BYTES goes through cudaMemcpyPeerAsync (the
copy engine) on any path. ``stats['fetch_paths']`` counts the pieces per path.

The device side is behind a small interface (``CupyDevices``); the CPU tests drive the same
runtime with a NumPy stand-in that defers every stream's work and runs it in random
interleavings, so a missing wait shows up as a wrong result (tests/gpu/sim_devices.py)."""
from __future__ import annotations

import time
from collections import Counter
from typing import Dict, Iterable, List, Optional

import numpy as np

from ..errors import Error
from ..ops.registry import KernelContext
from . import gpu_fetch
from .gpu_devices import CupyDevices, _is_oom, import_cupy  # noqa: F401 (public here too)
from .gpu_kernels import KERNELS
from .gpu_launch import LaunchList, step_tiles
from .sub_op import SubOpRunner
from .tiles import box_index, input_tiles, value_tiles


class _GpuSubOps(SubOpRunner):
    """SubOpRunner whose kernel call picks the CuPy kernel, NumPy dispatch or the host."""

    def __init__(self, eg, rt: "GpuRuntime"):
        super().__init__(eg, xp=rt.dev.xp)
        self.rt = rt

    def kernel(self, node, opdef, attrs, inputs, ctx):
        rt, name = self.rt, opdef.name
        if name not in rt.host_ops:
            impl = KERNELS.get(name)
            if impl is not None:
                rt.kernel_paths[name] = "gpu"
                return impl(attrs, inputs, ctx)
            if rt.dispatch and name not in rt.no_dispatch:
                if rt.kernel_paths.get(name) == "dispatch":  # known to work: no fallback hides a failure
                    return self._as_device(opdef.forward(attrs, inputs, ctx))
                outs = self._probe(name, opdef, attrs, inputs, ctx)
                if outs is not None:
                    rt.kernel_paths[name] = "dispatch"
                    return outs
        rt.kernel_paths[name] = "host"
        return rt.host_kernel(opdef, attrs, inputs, ctx)

    def _as_device(self, outs):
        return [o if isinstance(o, self.xp.ndarray) else self.xp.asarray(o) for o in outs]

    def _probe(self, name, opdef, attrs, inputs, ctx):
        """First call of an op type without a GPU kernel: its NumPy kernel on device copies of
        the inputs, so a kernel that writes an input and then fails leaves the real inputs as
        they were for the host kernel; the outputs, or None (the reason kept) when it raised."""
        xp = self.xp
        copies = [x.copy() if isinstance(x, xp.ndarray) and not (x.ndim and not any(x.strides)) else x
                  for x in inputs]  # shape-only stand-ins (all strides 0) stay as they are
        n_aux = len(ctx.aux)
        aux_in = copies[len(copies) - n_aux:] if n_aux else []
        pctx = KernelContext(is_train=ctx.is_train, aux=list(aux_in), rng=ctx.rng, xp=xp, key=ctx.key)
        state = ctx.rng.bit_generator.state if ctx.rng is not None else None
        try:
            outs = self._as_device(opdef.forward(attrs, copies, pctx))
        except Exception as e:
            if _is_oom(e):
                raise
            if state is not None:
                ctx.rng.bit_generator.state = state  # the host kernel draws the same numbers
            self.rt.no_dispatch[name] = f"{type(e).__name__}: {e}"[:200]
            return None
        for i, value in enumerate(pctx.aux):  # new auxiliary states (BatchNorm) reach the runner
            if value is not aux_in[i]:
                ctx.aux[i] = value
        return outs


class GpuRuntime:
    """Runs an ExecGraph on GPUs. `devices` is the device side (CupyDevices by default);
    `host_ops` names op types forced to the host kernel; `dispatch=False` sends every op
    without a CuPy kernel to the host.

    The first :meth:`run` enqueues op by op (kernel paths are settled, kernels compiled, pools
    warmed); the second builds the launch list (gpu_launch.LaunchList) and replays it,
    capturing it as a CUDA graph where the device side can and no op runs on the host; later
    runs launch the graph (or replay the list uncaptured).
    ``replay=False`` keeps the op-by-op path for every step; ``capture=False`` replays
    uncaptured."""

    def __init__(self, eg, devices=None, host_ops: Iterable[str] = (), dispatch: bool = True, replay: bool = True,
                 capture: bool = True):
        self.eg = eg
        self.replay = replay
        self.capture = capture
        self.launch: Optional[LaunchList] = None  # built after the first step (gpu_launch.py)
        self._swap_bytes = None
        self._steps = 0
        self.dev = devices if devices is not None else CupyDevices(eg.devices)
        self.xp = self.dev.xp
        self.host_ops = set(host_ops)
        self.dispatch = dispatch
        self.no_dispatch: Dict[str, str] = {}
        self.kernel_paths: Dict[str, str] = {}
        self.dtypes = [np.dtype(d) for d in eg.lowered.tensor_dtypes]
        self.arenas = [self.dev.alloc(w, int(b), "its arena (static memory plan)")
                       for w, b in enumerate(eg.core.arena_bytes)]
        host_bytes = [int(b) for b in eg.core.host_bytes]
        # where a swapped plan's tensors wait between uses: pinned, so the copies are asynchronous
        self.host_pools = [self.dev.alloc_pinned(w, b, "its host pool (swapped tensors)") if b else None
                           for w, b in enumerate(host_bytes)]
        self.views = [self._view(b) for b in eg.buffers]
        self.runner = _GpuSubOps(eg, self)
        self._worker = 0
        self._stream = None
        self._prepare_fetches()

    def _view(self, b: dict):
        dtype = self.dtypes[b["tensor"]]
        shape = tuple(h - l for l, h in zip(b["lo"], b["hi"]))
        count = int(np.prod(shape)) if shape else 1
        arena = (self.host_pools if b.get("host") else self.arenas)[b["device"]]
        return arena[b["offset"]: b["offset"] + count * dtype.itemsize].view(dtype).reshape(shape)

    # ------------------------------------------------------------------ MultiFetch plans
    def _prepare_fetches(self):
        """Per fetch op, once: its kernel records (uploaded to the destination GPU), its
        cudaMemcpyPeerAsync row runs and staging buffers for pieces without peer access."""
        eg, dev = self.eg, self.dev
        self.fetch_paths = Counter()
        self.staging_bytes = [0] * eg.devices
        self._fetch = {}
        for i, op in enumerate(eg.ops):
            if op["kind"] != "fetch":
                continue
            w, dst = op["device"], op["outputs"][0]
            dbuf = eg.buffers[dst]
            dtype = self.dtypes[dbuf["tensor"]]
            dshape = [h - l for l, h in zip(dbuf["lo"], dbuf["hi"])]
            dptr = dev.ptr(self.views[dst])
            kernel_pieces, runs, staging = [], [], []
            for src, lo, hi in op["pieces"]:
                if any(h <= l for l, h in zip(lo, hi)):
                    continue
                sbuf = eg.buffers[src]
                sw = sbuf["device"]
                sshape = [h - l for l, h in zip(sbuf["lo"], sbuf["hi"])]
                sptr = dev.ptr(self.views[src])
                path = dev.can_read(w, sw)
                if path != "memcpy" and not op["accumulate"]:
                    one = gpu_fetch.row_runs(sbuf["lo"], sshape, dbuf["lo"], dshape, lo, hi, dtype.itemsize)
                    if len(one) == 1 and one[0, 2] >= gpu_fetch.MEMCPY_MIN_BYTES:
                        path = "copy_engine"  # one large contiguous run: cudaMemcpyPeerAsync beats the kernel
                        so, do, n = (int(v) for v in one[0])
                        runs.append((sw, sptr + so, dptr + do, n))
                self.fetch_paths[path] += 1
                if path == "copy_engine":
                    continue
                if path != "memcpy":
                    kernel_pieces.append((sptr, sbuf["lo"], sshape, lo, hi))
                elif not op["accumulate"]:  # rows straight into the destination
                    for so, do, n in gpu_fetch.row_runs(sbuf["lo"], sshape, dbuf["lo"], dshape, lo, hi, dtype.itemsize):
                        runs.append((sw, sptr + int(so), dptr + int(do), int(n)))
                else:  # rows into a local staging buffer, which the kernel then adds
                    pshape = [h - l for l, h in zip(lo, hi)]
                    nbytes = int(np.prod(pshape)) * dtype.itemsize
                    stage = dev.alloc(w, nbytes, f"MultiFetch staging of op {i}")
                    staging.append(stage)
                    self.staging_bytes[w] += nbytes
                    stptr = dev.ptr(stage)
                    for so, do, n in gpu_fetch.row_runs(sbuf["lo"], sshape, lo, pshape, lo, hi, dtype.itemsize):
                        runs.append((sw, sptr + int(so), stptr + int(do), int(n)))
                    kernel_pieces.append((stptr, lo, pshape, lo, hi))
            launch = None
            if kernel_pieces:
                name = gpu_fetch.kernel_name(dtype, op["accumulate"])
                records = gpu_fetch.pack_records(dptr, dbuf["lo"], dshape, kernel_pieces)
                grid, block = gpu_fetch.launch_grid(records, dtype.itemsize)
                launch = (name, dev.prepare_fetch(w, name, records, len(kernel_pieces)), len(kernel_pieces), grid,
                          block)
            elif op["accumulate"]:
                gpu_fetch.kernel_name(dtype, True)  # raises for non-float accumulation
            self._fetch[i] = (runs, launch, staging)
        self.dev.synchronize()  # the records' uploads and decoding (default stream) land before any launch

    # ------------------------------------------------------------------ data in / out
    def load(self, values: Dict[str, np.ndarray]):
        """Writes every graph input (data, params, optimizer state) into its planned tiles.
        Once the launch list exists, the tiles are checked first (an Error names a missing or
        misshapen input before anything is enqueued), then copied asynchronously on each
        worker's compute stream, where the next run's step waits for them."""
        if self.replay and self.launch is not None:
            self.launch.write_inputs(step_tiles(self.eg, values))
            return
        for b, value in input_tiles(self.eg, values):
            if self.eg.buffers[b].get("host"):
                self.views[b][...] = value
            else:
                self.dev.upload(self.eg.buffers[b]["device"], self.views[b], value)
        # uploads go on each GPU's legacy default stream, which the workers' non-blocking
        # streams do not wait for: the first kernels could read a tile before it lands
        self.dev.synchronize()

    def gather(self, name: str) -> np.ndarray:
        """The full value of tensor `name` on the host, assembled from the tiles (partials summed)."""
        tid = self.eg.tensor_id[name]
        full = np.zeros(self.eg.lowered.tensor_shapes[tid], dtype=self.dtypes[tid])
        for b in value_tiles(self.eg, name):
            buf = self.eg.buffers[b]
            view = self.views[b]
            full[box_index(buf["lo"], buf["hi"])] += (view if buf.get("host") else
                                                      self.dev.download(buf["device"], view))
        return full

    # ------------------------------------------------------------------ kernels
    def host_kernel(self, opdef, attrs, inputs, ctx):
        """The NumPy kernel on host copies of the inputs (outputs go back in _compute)."""
        w, stream = self._worker, self._stream
        # the kernel reads its inputs on the host: what the stream has queued must be done
        # (this is why a host op cannot be captured into a CUDA graph)
        self.dev.synchronize_stream(w, stream)
        host = []
        for x in inputs:
            if isinstance(x, np.ndarray):
                host.append(x)
            elif x.size and all(s == 0 for s in x.strides):  # a shape-only stand-in
                host.append(np.broadcast_to(np.zeros((), x.dtype), tuple(x.shape)))
            else:
                host.append(self.dev.to_host(w, x, stream))
        n_aux = len(ctx.aux)
        # the node's key too: keyed kernels (Dropout) draw the same numbers as on every runtime
        hctx = KernelContext(is_train=ctx.is_train, aux=host[len(host) - n_aux:] if n_aux else [], rng=ctx.rng, xp=np,
                             key=ctx.key)
        outs = [np.asarray(o) for o in opdef.forward(attrs, host, hctx)]
        for i, value in enumerate(hctx.aux):  # new auxiliary states (BatchNorm) reach the runner
            if value is not host[len(host) - n_aux + i]:
                ctx.aux[i] = value
        return outs

    def _compute(self, op: dict, w: int, stream, is_train: bool, rng, seed: int = 0):
        self._worker, self._stream = w, stream
        outs = self.runner.run(op, lambda b: self.views[b], is_train, rng, seed)
        for b, value in zip(op["outputs"], outs):
            view = self.views[b]
            if isinstance(value, np.ndarray) and self.xp is not np:
                self.dev.to_device(w, view, value, stream)
            else:
                self.xp.copyto(view, value, casting="unsafe")

    def _fetch_op(self, i: int, op: dict, w: int, stream):
        runs, launch, _ = self._fetch[i]
        if op["accumulate"]:
            self.dev.memset0(self.views[op["outputs"][0]], stream)
        for sw, sptr, dptr, n in runs:
            self.dev.memcpy(stream, w, dptr, sw, sptr, n)
        if launch is not None:
            name, works, n_pieces, grid, block = launch
            self.dev.launch_fetch(w, stream, name, works, n_pieces, grid, block)

    def _swap_op(self, op: dict, w: int, stream) -> int:
        """Enqueues a swap-out (arena -> pinned host pool) or swap-in (back) on the swap
        stream: one asynchronous copy of the whole buffer; returns its bytes."""
        src, dst = op["pieces"][0][0], op["outputs"][0]
        sv, dv = self.views[src], self.views[dst]
        if sv.nbytes != dv.nbytes or len(op["pieces"]) != 1:
            raise Error(f"{op['kind']} op copies {len(op['pieces'])} piece(s) of {sv.nbytes} bytes into "
                        f"{dv.nbytes}: a swap copies one whole buffer")
        to_host = op["kind"] == "swap_out"
        sptr, dptr, n = self.dev.ptr(sv), self.dev.ptr(dv), int(sv.nbytes)
        self.dev.enqueue(w, stream, lambda: self.dev.memcpy_async(stream, dptr, sptr, n, to_host))
        return n

    # ------------------------------------------------------------------ execution
    def enqueue_order(self) -> List[int]:
        """Every op once, each worker's in its schedule order (its swap ops in its copy
        schedule's), interleaved round-robin, every op after the ops it depends on (so every
        event waited on is already recorded)."""
        eg = self.eg
        scheds = [eg.schedule(d) for d in range(eg.devices)]
        scheds += [s for s in (list(eg.core.copy_schedule(d)) for d in range(eg.devices)) if s]
        pos = [0] * len(scheds)
        done = [False] * len(eg.ops)
        order = []
        while len(order) < len(eg.ops):
            progress = False
            for d in range(len(scheds)):
                if pos[d] < len(scheds[d]):
                    i = scheds[d][pos[d]]
                    if all(done[j] for j in eg.ops[i]["deps"]):
                        order.append(i)
                        done[i] = True
                        pos[d] += 1
                        progress = True
            if not progress:
                stuck = [scheds[d][pos[d]] for d in range(len(scheds)) if pos[d] < len(scheds[d])]
                raise Error(f"the execution graph's schedules wait on each other (ops {stuck[:8]}): no order to run")
        return order

    def run(self, is_train: bool = True, seed: int = 0) -> dict:
        """One step: op by op the first time (or always with ``replay=False``), then the
        launch list's replay; waits for the GPUs and returns stats (``stats['launch']`` says
        which, ``stats['capture']`` whether it ran as a CUDA graph and what prevented it).
        Raises Error naming the device, GPU and node of an op that fails."""
        if self.replay and self.launch is None and self._steps:  # built once the first step settled it
            self.launch = LaunchList(self, capture=self.capture)
        self._steps += 1
        if self.replay and self.launch is not None:
            return self._stats(self.launch.replay(is_train, seed))
        stats = self._stats(self.run_ops(is_train, seed))
        stats["launch"] = {"mode": "ops"}
        why = ("the first step runs op by op (warm-up); later steps replay its launch list" if self.replay
               else "replay=False: every step runs op by op")
        stats["capture"] = {"captured": False, "reason": why, "blocked_by": [], "n_blocked": 0}
        return stats

    def _sync(self):
        try:
            self.dev.synchronize()
        except Exception as e:
            if isinstance(e, Error):
                raise
            raise Error(f"ctx='gpu': a kernel failed while the step ran: {type(e).__name__}: {e}") from None

    def _stats(self, step: dict) -> dict:
        eg, dev = self.eg, self.dev
        by_path = {"gpu": [], "dispatch": [], "host": []}
        for name, path in sorted(self.kernel_paths.items()):
            by_path[path].append(name)
        if self._swap_bytes is None:  # static: counted once, not on every step's host time
            self._swap_bytes = sum(int(self.views[o["outputs"][0]].nbytes) for o in eg.ops
                                   if o["kind"] in ("swap_out", "swap_in"))
        swap_bytes = self._swap_bytes
        return {**step, "kernels": by_path, "dispatch_failed": dict(self.no_dispatch),
                "fetch_paths": dict(self.fetch_paths),
                "multifetch_kernel": getattr(dev, "kernel_source", None),
                "arena_bytes": [int(b) for b in eg.core.arena_bytes], "staging_bytes": list(self.staging_bytes),
                "host_pool_bytes": [int(b) for b in eg.core.host_bytes], "swap_bytes": swap_bytes,
                "pool_bytes": dev.pool_bytes() if hasattr(dev, "pool_bytes") else None,
                **dev.describe()}

    def run_ops(self, is_train: bool = True, seed: int = 0) -> dict:
        """The op-by-op step: every op resolved and enqueued on its worker's streams (events
        made afresh), then one synchronisation; the step's times and wait count."""
        eg, dev = self.eg, self.dev
        self.runner.aux_updates.clear()
        rngs = [np.random.default_rng(seed + w) for w in range(eg.devices)]
        events = [None] * len(eg.ops)
        stream_of = [None] * len(eg.ops)
        seq = [0] * len(eg.ops)
        counters: Dict[int, int] = {}
        waited: Dict[tuple, int] = {}
        n_waits = 0
        t0 = time.perf_counter()
        for i in self.enqueue_order():
            op = eg.ops[i]
            w = op["device"]
            kind = op["kind"]
            copy = kind == "fetch"
            swap = kind in ("swap_out", "swap_in")
            stream = dev.swap_stream(w) if swap else dev.stream(w, copy)
            sid = 3 * w + (2 if swap else int(copy))
            try:
                for j in op["deps"]:
                    sj = stream_of[j]
                    if sj == sid or waited.get((sid, sj), -1) >= seq[j]:
                        continue  # same stream (in order), or a later op of that stream already waited on
                    dev.wait(w, stream, events[j])
                    waited[sid, sj] = seq[j]
                    n_waits += 1
                if swap:
                    self._swap_op(op, w, stream)
                elif copy:
                    dev.enqueue(w, stream, lambda i=i, op=op, w=w, s=stream: self._fetch_op(i, op, w, s))
                else:
                    dev.enqueue(w, stream,
                                lambda op=op, w=w, s=stream: self._compute(op, w, s, is_train, rngs[w], seed))
                events[i] = dev.event(w)
                dev.record(w, events[i], stream)
            except Exception as e:
                raise self._op_error(e, op, w) from None
            stream_of[i] = sid
            seq[i] = counters.get(sid, 0)
            counters[sid] = seq[i] + 1
        t_enqueue = time.perf_counter() - t0
        self._sync()
        return {"step_seconds": time.perf_counter() - t0, "enqueue_seconds": t_enqueue, "stream_waits": n_waits}

    def _op_error(self, e, op, w) -> Error:
        name = self.eg.lowered.node_names[op["node"]] if op["node"] >= 0 else "?"
        gpu = getattr(self.dev, "gpu", [None] * (w + 1))[w]
        where = f"device {w} (GPU {gpu})"
        if _is_oom(e):
            return Error(f"{where}: out of memory in the {op['kind']} op of node '{name}': {e}")
        msg = str(e) if isinstance(e, Error) else f"{type(e).__name__}: {e}"
        return Error(f"{where}: {op['kind']} op of node '{name}' failed: {msg}")


def run_gpu(sym, devices: int, values: Dict[str, np.ndarray], train: bool = True, optimizer: str = "sgd",
            optimizer_args: Optional[dict] = None, seed: int = 0, plan=None, algorithm: str = "tofu",
            control_deps: bool = True, device_memory: Optional[int] = None, replicate_fallback: bool = False,
            gpu_devices=None, host_ops: Iterable[str] = (), dispatch: bool = True):
    """One step of `sym` on `devices` workers placed on the visible GPUs
    (``at.backend.run(..., ctx="gpu")``): a training step, or partitioned inference with
    ``train=False``. `gpu_devices` replaces the CuPy device side (tests)."""
    dev = gpu_devices if gpu_devices is not None else CupyDevices(devices)  # fail early: no CuPy / GPU
    from .multi_device import run_partitioned

    return run_partitioned(lambda eg: GpuRuntime(eg, devices=dev, host_ops=host_ops, dispatch=dispatch), sym,
                           devices, values, train, optimizer, optimizer_args, seed, plan, algorithm, control_deps,
                           device_memory, replicate_fallback)
