"""A NumPy stand-in for the GPU runtime's device side (autotile.backend.gpu_runtime.CupyDevices)
for CPU tests: arrays are host memory, every stream is a queue whose work is deferred, and
synchronize() runs the queues in a random interleaving that respects only stream order and
event waits, as GPUs may. A wait the runtime forgets shows up as a wrong result. Pointers are
real host addresses, so MultiFetch runs the kernel's record list through the kernel body
compiled for the host (fetch_emulation fixture) and the memcpy fallback through memmove."""
from __future__ import annotations

import ctypes
from collections import deque

import numpy as np

_KINDS = {"autotile_multifetch_copy1": 1, "autotile_multifetch_copy2": 2, "autotile_multifetch_copy4": 4,
          "autotile_multifetch_copy8": 8, "autotile_multifetch_add_f32": 5, "autotile_multifetch_add_f64": 6}


class _Stream:
    def __init__(self, name):
        self.name = name
        self.q = deque()


class _Event:
    def __init__(self):
        self.recorded = 0  # record calls issued
        self.done = 0  # record calls executed


class SimDevices:
    def __init__(self, workers, fetch_lib, n_gpus=1, peer=True, seed=0, emulated_grid=(3, 2, 5)):
        self.xp = np
        self.n_gpus = n_gpus
        self.gpu = [w % n_gpus for w in range(workers)]
        self.peer = peer
        self.lib = fetch_lib
        self.rng = np.random.default_rng(seed)
        self.grid = emulated_grid  # small simulated grid: exercises the kernel's grid-stride loops
        self.streams = [(_Stream(f"compute{w}"), _Stream(f"copy{w}"), _Stream(f"swap{w}")) for w in range(workers)]
        self.kernel_source = "host emulation"
        self.launches = 0
        self.memcpys = 0
        self.swap_copies = 0
        self.pinned_bytes = 0
        self._keep = []
        self.unsynced_uploads = 0

    def describe(self):
        return {"gpus": list(self.gpu), "peer_access": self.peer}

    def alloc(self, worker, nbytes, what):
        return np.zeros(max(int(nbytes), 1), dtype=np.uint8)

    def alloc_pinned(self, worker, nbytes, what):
        self.pinned_bytes += int(nbytes)
        return np.zeros(max(int(nbytes), 1), dtype=np.uint8)

    def ptr(self, array):
        return int(array.ctypes.data)

    def upload(self, worker, view, host):
        # CUDA: a copy on the legacy default stream, which the workers' non-blocking streams
        # do not wait for; the runtime must synchronize before it enqueues work that reads it
        view[...] = host
        self.unsynced_uploads += 1

    def download(self, worker, view):
        return np.array(view)

    def stream(self, worker, copy):
        return self.streams[worker][1 if copy else 0]

    def swap_stream(self, worker):
        return self.streams[worker][2]

    def event(self, worker):
        return _Event()

    def record(self, worker, event, stream):
        event.recorded += 1
        stream.q.append(("record", event, event.recorded))

    def wait(self, worker, stream, event):
        if event.recorded:  # CUDA: waits for the most recent record call issued
            stream.q.append(("wait", event, event.recorded))

    def enqueue(self, worker, stream, fn):
        if self.unsynced_uploads:
            raise RuntimeError(f"{self.unsynced_uploads} uploads on the default stream may not have landed "
                               f"before work on {stream.name}")
        stream.q.append(("run", fn))

    def to_host(self, worker, array, stream):
        return np.array(array)

    def to_device(self, worker, view, host, stream):
        view[...] = host

    def can_read(self, dst_worker, src_worker):
        if self.gpu[dst_worker] == self.gpu[src_worker]:
            return "local"
        return "peer" if self.peer else "memcpy"

    def prepare_fetch(self, worker, name, records, n_pieces):
        """The host emulation decodes the records itself at each launch: the 'work' is them."""
        r = np.ascontiguousarray(records)
        self.unsynced_uploads += 1
        self._keep.append(r)
        return r

    def memset0(self, view, stream):
        view[...] = 0

    def memcpy(self, stream, dst_worker, dst_ptr, src_worker, src_ptr, nbytes):
        ctypes.memmove(dst_ptr, src_ptr, nbytes)
        self.memcpys += 1

    def memcpy_async(self, stream, dst_ptr, src_ptr, nbytes, to_host):
        ctypes.memmove(dst_ptr, src_ptr, nbytes)
        self.swap_copies += 1

    def launch_fetch(self, worker, stream, name, records, n_pieces, grid, block):
        assert records.shape[0] == n_pieces + 1 and grid[1] >= 1 and block == (256,)
        gx, gy, bx = self.grid
        rc = self.lib.autotile_multifetch_host(_KINDS[name], records.ctypes.data, n_pieces, gx, gy, bx)
        assert rc == 0
        self.launches += 1

    def synchronize(self):
        self.unsynced_uploads = 0
        self._drain()

    def _drain(self):
        streams = [s for group in self.streams for s in group]
        while any(s.q for s in streams):
            ready = [s for s in streams if s.q and (s.q[0][0] != "wait" or s.q[0][1].done >= s.q[0][2])]
            if not ready:
                raise RuntimeError("streams deadlocked: " + ", ".join(s.name for s in streams if s.q))
            s = ready[int(self.rng.integers(len(ready)))]
            item = s.q.popleft()
            if item[0] == "run":
                item[1]()
            elif item[0] == "record":
                item[1].done = max(item[1].done, item[2])
