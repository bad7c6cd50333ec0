"""The device side of the GPU runtime on CUDA GPUs through CuPy (``CupyDevices``): memory
pools and arenas, streams, events, copies, the MultiFetch kernel and CUDA graph capture. The
runtime (gpu_runtime.py) and the launch list (gpu_launch.py) use only this interface, so the
CPU tests drive them with a NumPy stand-in of it (tests/gpu/sim_devices.py)."""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from ..errors import Error
from . import gpu_fetch

_INSTALL_HINT = ("pip install 'cupy-cuda12x[ctk]' for CUDA 12 drivers or 'cupy-cuda13x[ctk]' for CUDA 13 (autotile's "
                 "'gpu' and 'gpu-cuda13' extras: pip install --no-build-isolation '.[gpu]' in its source tree); "
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
        self._step_keep = []  # host arrays of asynchronous uploads, until the step's end
        self._graph_pools = None  # during a capture: the pools the captured kernels allocate from
        self._captured_pools = []  # the pools of every graph captured (counted in pool_bytes)
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
        """Bytes each worker's pools hold now (arena, staging and cached temporaries, and the
        temporaries of every captured graph, which stay with the graph)."""
        held = [int(p.total_bytes()) for p in self.pools]
        for pools in self._captured_pools:
            for w, p in enumerate(pools):
                held[w] += int(p.total_bytes())
        return held

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
        pool = (self._graph_pools or self.pools)[worker]
        with cp.cuda.Device(self.gpu[worker]), cp.cuda.using_allocator(pool.malloc), stream:
            fn()

    def synchronize_stream(self, worker: int, stream):
        """Waits on the host for everything queued on `stream` (the host kernel path)."""
        with self.cp.cuda.Device(self.gpu[worker]):
            stream.synchronize()

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
        self._step_keep.clear()

    # ---------------------------------------------------------------- replay and CUDA graphs
    def upload_async(self, worker: int, view, host: np.ndarray, stream):
        """Copies `host` into device `view` on worker's `stream`, without synchronising: work
        enqueued after it on `stream`, or waiting on an event recorded there after it, sees
        the data. The host array is kept alive until the next synchronize()."""
        h = np.ascontiguousarray(host, dtype=view.dtype)
        self._step_keep.append(h)
        with self.cp.cuda.Device(self.gpu[worker]):
            view.set(h, stream=stream)

    def begin_capture(self, worker: int, stream):
        """Starts capturing `stream` (worker's GPU) into a CUDA graph, in CuPy's relaxed mode
        (a pool may still grow by cudaMalloc). Other streams join the capture by waiting on an
        event recorded on a capturing stream. Kernels enqueued until end_capture allocate
        their temporaries from fresh per-worker pools that only the graph uses afterwards:
        the graph replays the addresses it captured, so nothing else may reuse them."""
        cp = self.cp
        self._graph_pools = []
        for w in range(len(self.pools)):
            with cp.cuda.Device(self.gpu[w]):
                pool = cp.cuda.MemoryPool()
                if self.pool_limits[w]:
                    pool.set_limit(size=self.pool_limits[w])
                self._graph_pools.append(pool)
        with cp.cuda.Device(self.gpu[worker]):
            stream.begin_capture()

    def end_capture(self, worker: int, stream):
        """Ends the capture begun on `stream`: the instantiated graph (its pools kept with
        it). Raises CUDA's error when the capture was invalidated (it is over then too)."""
        pools, self._graph_pools = self._graph_pools, None
        self._captured_pools.append(pools)
        with self.cp.cuda.Device(self.gpu[worker]):
            graph = stream.end_capture()
        return _CudaGraph(graph, pools)

    def launch_graph(self, worker: int, graph, stream):
        """Launches a captured graph on `stream`: one call, whatever its node count."""
        with self.cp.cuda.Device(self.gpu[worker]):
            graph.graph.launch(stream)

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


class _CudaGraph:
    """A captured cupy.cuda.Graph and the pools its kernels' temporaries live in."""

    def __init__(self, graph, pools):
        self.graph = graph
        self.pools = pools
