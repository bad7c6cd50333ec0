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
from .gpu_kernels import KERNELS
from .sub_op import SubOpRunner
from .tiles import box_index, input_tiles, value_tiles

_INSTALL_HINT = ("pip install 'autotile[gpu]' (CuPy for CUDA 12 drivers) or 'autotile[gpu-cuda13]' (CUDA 13); "
                 "see docs/gpu.md")


def import_cupy():
    """CuPy, or a clear Error when it is not installed."""
    try:
        import cupy
    except ImportError as e:
        raise Error(f"ctx='gpu' needs CuPy, which is not installed ({e}): {_INSTALL_HINT}") from None
    return cupy


def _is_oom(e) -> bool:
    return type(e).__name__ == "OutOfMemoryError" or "cudaErrorMemoryAllocation" in str(e)


class CupyDevices:
    """The device side of the GPU runtime on CUDA GPUs through CuPy: memory, streams, events,
    copies and the MultiFetch kernel for `workers` workers. Worker i runs on
    ``gpu_ids[i % len(gpu_ids)]`` (all visible GPUs by default)."""

    def __init__(self, workers: int, cupy=None, gpu_ids: Optional[List[int]] = None):
        cp = cupy if cupy is not None else import_cupy()
        self.cp = cp
        self.xp = cp
        try:
            n = cp.cuda.runtime.getDeviceCount()
        except Exception as e:  # CUDARuntimeError: no driver, no device, driver too old
            raise Error(f"ctx='gpu' needs a CUDA GPU, and CUDA reports none usable: {type(e).__name__}: {e}") from None
        if n < 1:
            raise Error("ctx='gpu' needs a CUDA GPU, and none is visible (check CUDA_VISIBLE_DEVICES)")
        ids = list(range(n)) if gpu_ids is None else [int(g) for g in gpu_ids]
        bad = [g for g in ids if not 0 <= g < n]
        if not ids or bad:
            raise Error(f"gpu_ids {ids} must name visible GPUs (0..{n - 1})")
        self.n_gpus = len(ids)
        self.gpu = [ids[w % len(ids)] for w in range(workers)]
        self.pools, self.streams = [], []
        sharing = {g: self.gpu.count(g) for g in set(self.gpu)}
        self.pool_limits = []
        for w in range(workers):
            with cp.cuda.Device(self.gpu[w]):
                pool = cp.cuda.MemoryPool()
                self.pool_limits.append(self._cap(pool, sharing[self.gpu[w]]))
                self.pools.append(pool)
                self.streams.append(tuple(cp.cuda.Stream(non_blocking=True) for _ in range(3)))
        used = sorted(set(self.gpu))
        self.peer = {}
        for a in used:
            for b in used:
                if a != b:
                    self.peer[a, b] = self._enable_peer(a, b)
        self._kernels: Dict[int, dict] = {}
        self._keep = []
        self.kernel_source = None

    def _cap(self, pool, sharing: int) -> Optional[int]:
        """Caps `pool` at an equal share of the current GPU's free memory among the `sharing`
        workers on it (less 5% for CUDA's own use); returns the cap (None if not set)."""
        try:
            free, _total = self.cp.cuda.runtime.memGetInfo()
        except Exception:  # a stand-in without memGetInfo: leave the pool uncapped
            return None
        cap = int(free * 0.95) // max(1, sharing)
        pool.set_limit(size=cap)
        return cap

    def pool_bytes(self) -> List[int]:
        """Bytes each worker's pool holds now (arena, staging and cached temporaries)."""
        return [int(p.total_bytes()) for p in self.pools]

    def _enable_peer(self, a: int, b: int) -> bool:
        """Lets GPU a's kernels read GPU b's memory (UVA); False where the pair cannot."""
        rt = self.cp.cuda.runtime
        if not rt.deviceCanAccessPeer(a, b):
            return False
        with self.cp.cuda.Device(a):
            try:
                rt.deviceEnablePeerAccess(b)
            except Exception as e:
                if "PeerAccessAlreadyEnabled" not in str(e):
                    return False
        return True

    def describe(self) -> dict:
        names = {}
        for g in sorted(set(self.gpu)):
            try:
                names[g] = self.cp.cuda.runtime.getDeviceProperties(g)["name"].decode()
            except Exception:
                names[g] = "?"
        return {"gpus": list(self.gpu), "gpu_names": names,
                "peer_access": {f"{a}->{b}": ok for (a, b), ok in sorted(self.peer.items())}}

    # ---------------------------------------------------------------- memory
    def alloc(self, worker: int, nbytes: int, what: str):
        """`nbytes` of worker's pool as a uint8 array; Error naming the device and the bytes
        when the GPU is out of memory."""
        cp = self.cp
        try:
            with cp.cuda.Device(self.gpu[worker]):
                mem = self.pools[worker].malloc(max(int(nbytes), 1))
                return cp.ndarray((max(int(nbytes), 1),), dtype=np.uint8, memptr=mem)
        except Exception as e:
            if _is_oom(e):
                raise Error(f"device {worker} (GPU {self.gpu[worker]}): out of memory allocating {int(nbytes)} bytes "
                            f"for {what} ({e})") from None
            raise

    def alloc_pinned(self, worker: int, nbytes: int, what: str) -> np.ndarray:
        """`nbytes` of page-locked host memory as a NumPy uint8 array (asynchronous copies to
        and from the GPU need it); Error naming the device and the bytes when it cannot."""
        n = max(int(nbytes), 1)
        try:
            with self.cp.cuda.Device(self.gpu[worker]):
                return np.frombuffer(self.cp.cuda.alloc_pinned_memory(n), dtype=np.uint8, count=n)
        except Exception as e:
            raise Error(f"device {worker} (GPU {self.gpu[worker]}): cannot pin {n} bytes of host memory for "
                        f"{what}: {type(e).__name__}: {e}") from None

    def ptr(self, array) -> int:
        if isinstance(array, np.ndarray):  # a view of the pinned host pool
            return int(array.ctypes.data)
        return int(array.data.ptr)

    def upload(self, worker: int, view, host: np.ndarray):
        with self.cp.cuda.Device(self.gpu[worker]):
            view.set(np.ascontiguousarray(host, dtype=view.dtype))

    def download(self, worker: int, view) -> np.ndarray:
        with self.cp.cuda.Device(self.gpu[worker]):
            return self.cp.asnumpy(view)

    # ---------------------------------------------------------------- streams and events
    def stream(self, worker: int, copy: bool):
        return self.streams[worker][1 if copy else 0]

    def swap_stream(self, worker: int):
        """The stream of worker's swap-outs and swap-ins (device <-> pinned host pool)."""
        return self.streams[worker][2]

    def event(self, worker: int):
        with self.cp.cuda.Device(self.gpu[worker]):
            return self.cp.cuda.Event(disable_timing=True)

    def record(self, worker: int, event, stream):
        """Records `event` on worker's `stream` (with the worker's GPU current, as CUDA asks)."""
        with self.cp.cuda.Device(self.gpu[worker]):
            event.record(stream)

    def wait(self, worker: int, stream, event):
        """Makes worker's `stream` wait for `event`, which may belong to another GPU."""
        with self.cp.cuda.Device(self.gpu[worker]):
            stream.wait_event(event)

    def enqueue(self, worker: int, stream, fn):
        """Runs `fn` with worker's GPU, pool and `stream` current: what it launches goes on `stream`."""
        cp = self.cp
        with cp.cuda.Device(self.gpu[worker]), cp.cuda.using_allocator(self.pools[worker].malloc), stream:
            fn()

    def to_host(self, worker: int, array, stream) -> np.ndarray:
        host = self.cp.asnumpy(array, stream=stream)
        stream.synchronize()
        return host

    def to_device(self, worker: int, view, host: np.ndarray, stream):
        view.set(np.ascontiguousarray(host, dtype=view.dtype), stream=stream)
        stream.synchronize()  # the host array must outlive the copy

    def synchronize(self):
        for g in sorted(set(self.gpu)):
            with self.cp.cuda.Device(g):
                self.cp.cuda.runtime.deviceSynchronize()

    # ---------------------------------------------------------------- MultiFetch
    def can_read(self, dst_worker: int, src_worker: int) -> str:
        """'local' (same GPU), 'peer' (UVA read) or 'memcpy' (no peer access)."""
        a, b = self.gpu[dst_worker], self.gpu[src_worker]
        if a == b:
            return "local"
        return "peer" if self.peer.get((a, b)) else "memcpy"

    def memcpy_async(self, stream, dst_ptr: int, src_ptr: int, nbytes: int, to_host: bool):
        """An asynchronous copy on `stream` between the GPU and pinned host memory."""
        rt = self.cp.cuda.runtime
        rt.memcpyAsync(dst_ptr, src_ptr, nbytes, rt.memcpyDeviceToHost if to_host else rt.memcpyHostToDevice,
                       stream.ptr)

    def prepare_fetch(self, worker: int, name: str, records: np.ndarray, n_pieces: int):
        """Uploads a fetch op's records to worker's GPU and decodes them once into the
        per-piece work the fetch kernel reads (autotile_multifetch_prepare); the device array
        of that work. Runs on the default stream: the runtime synchronizes before the step."""
        cp = self.cp
        g = self.gpu[worker]
        kernels = self._load(g)
        with cp.cuda.Device(g):
            d_rec = cp.asarray(records)
            works = self.alloc(worker, n_pieces * gpu_fetch.WORK_BYTES, "MultiFetch piece work")
            gpu_fetch.prepare(kernels, name, d_rec, n_pieces, works)
            self._keep.append(d_rec)  # freed by the pool only after the launch has read it
            return works

    def memset0(self, view, stream):
        self.cp.cuda.runtime.memsetAsync(int(view.data.ptr), 0, int(view.nbytes), stream.ptr)

    def memcpy(self, stream, dst_worker: int, dst_ptr: int, src_worker: int, src_ptr: int, nbytes: int):
        self.cp.cuda.runtime.memcpyPeerAsync(dst_ptr, self.gpu[dst_worker], src_ptr, self.gpu[src_worker], nbytes,
                                             stream.ptr)

    def _load(self, g: int) -> dict:
        if g not in self._kernels:
            with self.cp.cuda.Device(g):
                self._kernels[g], self.kernel_source = gpu_fetch.load_kernels(self.cp, g)
        return self._kernels[g]

    def launch_fetch(self, worker: int, stream, name: str, works, n_pieces: int, grid, block):
        kernels = self._load(self.gpu[worker])
        with stream:
            kernels[name](grid, block, (works, np.int32(n_pieces)))


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
    without a CuPy kernel to the host."""

    def __init__(self, eg, devices=None, host_ops: Iterable[str] = (), dispatch: bool = True):
        self.eg = eg
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
        """Writes every graph input (data, params, optimizer state) into its planned tiles."""
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

    def _compute(self, op: dict, w: int, stream, is_train: bool, rng):
        self._worker, self._stream = w, stream
        outs = self.runner.run(op, lambda b: self.views[b], is_train, rng)
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
        """Enqueues every op on its worker's streams and waits for the GPUs; returns stats.
        Raises Error naming the device, GPU and node of an op that fails."""
        eg, dev = self.eg, self.dev
        self.runner.aux_updates.clear()
        rngs = [np.random.default_rng(seed + w) for w in range(eg.devices)]
        events = [None] * len(eg.ops)
        stream_of = [None] * len(eg.ops)
        seq = [0] * len(eg.ops)
        counters: Dict[int, int] = {}
        waited: Dict[tuple, int] = {}
        n_waits = swap_bytes = 0
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
                    swap_bytes += self._swap_op(op, w, stream)
                elif copy:
                    dev.enqueue(w, stream, lambda i=i, op=op, w=w, s=stream: self._fetch_op(i, op, w, s))
                else:
                    dev.enqueue(w, stream, lambda op=op, w=w, s=stream: self._compute(op, w, s, is_train, rngs[w]))
                events[i] = dev.event(w)
                dev.record(w, events[i], stream)
            except Exception as e:
                raise self._op_error(e, op, w) from None
            stream_of[i] = sid
            seq[i] = counters.get(sid, 0)
            counters[sid] = seq[i] + 1
        t_enqueue = time.perf_counter() - t0
        try:
            dev.synchronize()
        except Exception as e:
            if isinstance(e, Error):
                raise
            raise Error(f"ctx='gpu': a kernel failed while the step ran: {type(e).__name__}: {e}") from None
        by_path = {"gpu": [], "dispatch": [], "host": []}
        for name, path in sorted(self.kernel_paths.items()):
            by_path[path].append(name)
        return {"step_seconds": time.perf_counter() - t0, "enqueue_seconds": t_enqueue,
                "kernels": by_path, "dispatch_failed": dict(self.no_dispatch),
                "fetch_paths": dict(self.fetch_paths), "stream_waits": n_waits,
                "multifetch_kernel": getattr(dev, "kernel_source", None),
                "arena_bytes": [int(b) for b in eg.core.arena_bytes], "staging_bytes": list(self.staging_bytes),
                "host_pool_bytes": [int(b) for b in eg.core.host_bytes], "swap_bytes": swap_bytes,
                "pool_bytes": dev.pool_bytes() if hasattr(dev, "pool_bytes") else None,
                **dev.describe()}

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
