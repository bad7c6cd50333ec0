"""A NumPy stand-in for the GPU runtime's device side (autotile.backend.gpu_runtime.CupyDevices)
for CPU tests: arrays are host memory, every stream is a queue whose work is deferred, and
synchronize() runs the queues in a random interleaving that respects only stream order and
event waits, as GPUs may. A wait the runtime forgets shows up as a wrong result. Pointers are
real host addresses, so MultiFetch runs the kernel's record list through the kernel body
compiled for the host (fetch_emulation fixture) and the memcpy fallback through memmove.

CUDA graph capture (the launch list, gpu_launch.py) as CUDA has it: begin_capture on a stream
makes it capture; another stream joins by waiting on an event recorded on a capturing stream;
work on a captured stream is recorded, not run; waiting inside the capture on an event
recorded outside it, work on a stream that has not joined, or ending the capture with a stream
not joined back into the origin are errors. launch_graph runs the recorded work again on
private copies of the streams (a graph's nodes are ordered by their dependencies only, not by
other work on the streams they were captured from), after the launching stream's earlier
work and before its later work, in a random interleaving. A stream synchronisation (to_host,
to_device: the host kernel path) inside a graph's work is an error, as it is in a capture."""
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
        self._capture = None  # while capturing: {"origin", "joined": set of streams, "items": [...]}
        self._graph_streams = []
        self._in_graph = False
        self.graph_launches = 0
        self.captures = 0
        self.async_uploads = 0

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
        cap = self._capture
        if cap is not None and stream in cap["joined"]:
            event.captured = cap
            cap["items"].append(("record", stream, event))
            return
        event.captured = None
        event.recorded += 1
        stream.q.append(("record", event, event.recorded))

    def wait(self, worker, stream, event):
        cap = self._capture
        if cap is not None and getattr(event, "captured", None) is cap:
            cap["joined"].add(stream)
            cap["items"].append(("wait", stream, event))
            return
        if cap is not None and stream in cap["joined"]:
            raise RuntimeError(f"{stream.name} waits inside a capture on an event recorded outside it")
        if event.recorded:  # CUDA: waits for the most recent record call issued
            stream.q.append(("wait", event, event.recorded))

    def enqueue(self, worker, stream, fn):
        if self.unsynced_uploads:
            raise RuntimeError(f"{self.unsynced_uploads} uploads on the default stream may not have landed "
                               f"before work on {stream.name}")
        cap = self._capture
        if cap is not None:
            if stream not in cap["joined"]:
                raise RuntimeError(f"work enqueued on {stream.name} during a capture it has not joined")
            cap["items"].append(("run", stream, fn))
            return
        stream.q.append(("run", fn))

    def upload_async(self, worker, view, host, stream):
        """An asynchronous host-to-device copy on `stream` (the host array is copied now, as
        CUDA stages pageable memory before the call returns)."""
        h = np.array(host, dtype=view.dtype)
        self.async_uploads += 1

        def copy():
            view[...] = h
        self.enqueue(worker, stream, copy)

    def _no_sync_in_graph(self, what):
        if self._in_graph:
            raise RuntimeError(f"{what} synchronises a stream inside a CUDA graph's work (not capturable)")

    def synchronize_stream(self, worker, stream):
        # runs inside the stream's own work in this stand-in: what came before it has run
        self._no_sync_in_graph("synchronize_stream")

    def to_host(self, worker, array, stream):
        self._no_sync_in_graph("to_host")
        return np.array(array)

    def to_device(self, worker, view, host, stream):
        self._no_sync_in_graph("to_device")
        view[...] = host

    # ---------------------------------------------------------------- capture
    def begin_capture(self, worker, stream):
        if self._capture is not None:
            raise RuntimeError("a capture is already under way")
        self._capture = {"origin": stream, "joined": {stream}, "items": []}

    def end_capture(self, worker, stream):
        cap, self._capture = self._capture, None
        if cap is None or cap["origin"] is not stream:
            raise RuntimeError("end_capture on a stream that did not begin the capture")
        last = {}
        for k, item in enumerate(cap["items"]):
            last[item[1]] = k
        for s, k in last.items():  # every other stream joined back: its last work waited on by the origin
            if s is stream:
                continue
            kind, _, ev = cap["items"][k]
            if kind != "record" or not any(it[0] == "wait" and it[1] is stream and it[2] is ev
                                           for it in cap["items"][k + 1:]):
                raise RuntimeError(f"capture ended with {s.name} not joined back into {stream.name} "
                                   f"(cudaErrorStreamCaptureUnjoined)")
        self.captures += 1
        return list(cap["items"])

    def launch_graph(self, worker, graph, stream):
        """Runs the captured items on fresh copies of their streams, with fresh events:
        after `stream`'s earlier work, before its later work."""
        self.graph_launches += 1
        copies, events = {}, {}
        start, done = _Event(), _Event()
        self.record(worker, start, stream)
        for kind, s, x in graph:
            if s not in copies:
                copies[s] = _Stream(f"graph:{s.name}")
                copies[s].q.append(("wait", start, start.recorded))
                self._graph_streams.append(copies[s])
            q = copies[s].q
            if kind == "run":
                q.append(("run", self._graph_work(x)))
            elif kind == "record":  # a fresh event per record: a wait takes the latest before it
                events[id(x)] = ev = _Event()
                ev.recorded = 1
                q.append(("record", ev, 1))
            else:
                q.append(("wait", events[id(x)], 1))
        origin = copies[graph[0][1]] if graph else None
        if origin is not None:  # every stream joined back into the origin: its end is the graph's
            done.recorded = 1
            origin.q.append(("record", done, 1))
            stream.q.append(("wait", done, 1))

    def _graph_work(self, fn):
        def run():
            self._in_graph = True
            try:
                fn()
            finally:
                self._in_graph = False
        return run

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
        if self._capture is not None:
            raise RuntimeError("synchronize during a capture")
        self.unsynced_uploads = 0
        self._drain()
        self._graph_streams = [s for s in self._graph_streams if s.q]

    def _drain(self):
        """Runs the queued work. Half the drains pick a ready stream uniformly at each item;
        the others give the streams random priorities (reshuffled now and then) and run the
        highest ready one, so one stream may run far ahead of the others, or starve until it
        blocks: races that a uniform pick almost never loses show up there."""
        streams = [s for group in self.streams for s in group] + self._graph_streams
        by_priority = bool(self.rng.integers(2))
        prio = {id(s): p for s, p in zip(streams, self.rng.permutation(len(streams)))}
        while any(s.q for s in streams):
            ready = [s for s in streams if s.q and (s.q[0][0] != "wait" or s.q[0][1].done >= s.q[0][2])]
            if not ready:
                raise RuntimeError("streams deadlocked: " + ", ".join(s.name for s in streams if s.q))
            if by_priority:
                if self.rng.random() < 0.02:
                    prio = {id(s): p for s, p in zip(streams, self.rng.permutation(len(streams)))}
                s = max(ready, key=lambda s: prio[id(s)])
            else:
                s = ready[int(self.rng.integers(len(ready)))]
            item = s.q.popleft()
            if item[0] == "run":
                item[1]()
            elif item[0] == "record":
                item[1].done = max(item[1].done, item[2])
