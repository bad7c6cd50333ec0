"""Event-driven simulation of one training step of an ExecGraph on a hardware profile.

Model (what is simulated, and what is not):

- Streams. Each device has a compute stream and ``copy_engines`` copy engines. Compute ops
  go to the compute stream, fetch (MultiFetch) ops to the copy engines, each queue in the
  device's schedule order; with 0 copy engines (the host runtime: one thread per device)
  fetches run on the compute stream too. An op starts when every op it depends on is done
  and its stream is free. On an ``in_order`` profile (the host runtime's worker thread runs
  its schedule strictly in order) it also waits for the ops before it in its queue; otherwise
  a free stream takes the earliest op of its queue that is ready (a dependency-driven engine
  such as MXNet's feeding GPU streams), so gradient exchange overlaps the backward pass.
  An in-order thread that had to block on a dependency (another device's op) starts its op
  ``wake_latency_s`` after the dependency is met: the waker's ``Event.set`` wakes it, and it
  must then get the GIL, which the waker holds while it dispatches its own next op (a
  measured machine figure, :func:`autotile.sim.calibrate.measure_wake_latency`).
- Compute. An op takes its cost-table time. On a profile whose devices share CPU cores
  (``cores`` set: the host), concurrent ops share the cores: an op that runs alone uses
  ``threads`` cores (all of them for BLAS kernels, one otherwise); when the running ops ask
  for more cores than there are, each runs ``cores / demand`` as fast (processor sharing).
  An op also runs slower while the other cores are busy (memory bandwidth, last-level cache
  and clock shared): its measured co-runner slowdown s (``CostTable.slowdown``) stretches it
  by ``1 + x (s - 1)``, x the fraction of the other cores the other running ops occupy.
- Host dispatch. The host runtime is Python: before its kernel (or copy) each op runs
  ``dispatch_compute_s`` (``dispatch_fetch_s``) of Python -- part of its measured time -- plus
  the runtime's ``op_overhead_s`` (ready queue, lock, hand-off to a worker), on one core; on a
  ``gil`` profile that part holds the one interpreter lock, so the devices' dispatches run one
  at a time (first come, first served) while their kernels run in parallel. A step starts
  ``step_overhead_s`` late (BLAS thread limits, worker threads). All four figures are measured
  on graphs of tiny ops (:func:`autotile.sim.calibrate.measure_dispatch`). Real steps hold the
  lock longer per op than tiny ops do (an op's Python between its NumPy calls, re-taking the
  lock after each, the worker pool's hand-offs): two serial terms, ``handoff_s`` per op and
  ``gil_fraction`` of the op's time, run under the lock with the dispatch (device figures,
  default 0), fitted to measured steps of other graphs (:func:`autotile.sim.fit.with_serial_terms`).
- Host fetches. On a ``fetch_on_cores`` profile (the host runtime: a MultiFetch is a copy
  the device thread runs in C++) a fetch is CPU work like a kernel: its cost-table time
  (``CostTable.fetch_time``, measured per piece shapes) on one core, sharing the cores
  with the kernels. Links and copy engines are then not used.
- Communication. A fetch gathers remote pieces from their source devices concurrently and
  finishes after its last piece, plus a local copy of the pieces already on the device (and
  of the sum, for accumulating fetches) at the device's local copy bandwidth. A remote piece
  first waits the route's latency (sum over the switch levels it climbs), then moves as a
  fluid: every link's bandwidth (each way) is split equally among the transfers crossing it,
  and a transfer moves at the rate of its most contended link. This never over-commits a
  link; it is simpler than max-min fairness (a transfer held back elsewhere does not give its
  share away), which can only make the simulation slightly pessimistic under contention.
- Not simulated: memory allocation time beyond what the calibration measured, kernel-launch
  queues beyond a fixed per-op overhead, contention between ops beyond the measured
  co-runner slowdown, PCIe protocol overheads beyond what the profile's bandwidth figures
  already include.
"""
from __future__ import annotations

import gc
import threading
from collections import deque
from dataclasses import dataclass, field
from heapq import heappop, heappush
from itertools import count
from math import prod
from operator import itemgetter
from operator import sub as _sub
from operator import truediv
from typing import Dict, List, Optional

import numpy as np

from ..errors import Error
from .cost_table import Calibration, CostTable, op_tiles
from .hardware import Hardware, load_profile
from .intervals import exposed_length, union_length

_EPS = 1e-15
#: a host calibration's machine figures that replace the profile's device figures of that name
MACHINE_FIGURES = ("wake_latency_s", "step_overhead_s", "op_overhead_s", "dispatch_compute_s", "dispatch_fetch_s",
                   "handoff_s", "gil_fraction")
_PART, _WAKE = "part", "wake"  # what a timer's end does (Simulator._run)
_COMPUTE, _TRANSFER = "compute", "transfer"  # the kinds of fluid activity
_REMOTE, _SWAP, _LOCAL = "remote", "swap", "local"  # how an op runs (Simulator._run)
_seq = itemgetter(1)  # an activity's or timer's start number


@dataclass
class SimResult:
    """Simulated step of an ExecGraph. Times in seconds, memory in bytes.

    compute/comm/exposed are per device: busy time of the compute kernels, time with at least
    one fetch in flight, and the part of that time with no compute kernel running (the
    communication the schedule did not hide). The scalar fields are the maxima over devices."""

    step_seconds: float
    compute_seconds: float
    comm_seconds: float
    exposed_comm_seconds: float
    device_compute: List[float]
    device_comm: List[float]
    device_exposed: List[float]
    device_finish: List[float]
    peak_memory: List[int]
    memory_bytes: float
    bytes_moved: int
    profile: str
    op_start: List[float] = field(repr=False, default_factory=list)
    op_end: List[float] = field(repr=False, default_factory=list)

    @property
    def fits(self) -> bool:
        """Whether every device's arena fits the profile's device memory."""
        return max(self.peak_memory, default=0) <= self.memory_bytes

    def summary(self) -> dict:
        return {"step_seconds": self.step_seconds, "compute_seconds": self.compute_seconds,
                "comm_seconds": self.comm_seconds, "exposed_comm_seconds": self.exposed_comm_seconds,
                "peak_memory": max(self.peak_memory, default=0), "fits": self.fits,
                "bytes_moved": self.bytes_moved, "profile": self.profile}


#: route tables by link hierarchy: (levels, devices) -> (routes, latencies, link indices) (Simulator._run)
_ROUTE_TABLES: Dict[tuple, tuple] = {}
_ROUTE_LOCK = threading.Lock()  # numbers new links: runs in other threads may share a table


def _route_table(hw: Hardware, k: int) -> tuple:
    """The route table of `hw`'s link levels on `k` devices, shared by the runs on equal
    levels (a route is a function of the levels alone); a fresh one for a Hardware subclass."""
    if type(hw) is not Hardware:
        return {}, {}, {}
    key = (tuple((lv.group, lv.bandwidth, lv.latency, lv.shared) for lv in hw.levels), k)
    table = _ROUTE_TABLES.get(key)
    if table is None:
        if len(_ROUTE_TABLES) >= 16:
            _ROUTE_TABLES.clear()
        table = _ROUTE_TABLES[key] = ({}, {}, {})
    return table


class Simulator:
    """Simulates ExecGraphs on one hardware profile (``Simulator("p2.8xlarge").run(eg)``)."""

    def __init__(self, hardware, calibration: Optional[Calibration] = None, cost: Optional[CostTable] = None):
        self.hw: Hardware = with_calibration(load_profile(hardware) if isinstance(hardware, str) else hardware,
                                             calibration)
        self.cost = cost or CostTable(self.hw, calibration)

    # ------------------------------------------------------------------ op setup
    def _compute_costs(self, eg, buffers):
        """A function op -> (seconds, co-runner slowdown, cores it keeps busy) of a compute op:
        the cost table's :meth:`~CostTable.op_time`, :meth:`~CostTable.slowdown` and
        :meth:`~CostTable.threads` (once per op kind), the first two computed once per
        distinct (kind, tiles) when neither method is overridden (the table's
        :meth:`~CostTable.time` then depends on the kind and tiles alone)."""
        cost = self.cost
        node_ops = eg.lowered.node_ops
        threads: Dict[str, float] = {}

        def threads_of(kind: str) -> float:
            if kind not in threads:
                threads[kind] = cost.threads(kind)
            return threads[kind]

        if type(cost).op_time is not CostTable.op_time or type(cost).slowdown is not CostTable.slowdown:
            return lambda o: (cost.op_time(eg, o), cost.slowdown(eg, o), threads_of(node_ops[o["node"]]))
        memo: Dict[tuple, tuple] = {}

        def costs(o):
            # the tiles as op_tiles reads them (ints), as a key: equal tiles cost the same
            key = (node_ops[o["node"]],
                   tuple([None if b < 0 else tuple(map(_sub, hi, lo))
                          for b, (lo, hi) in zip(o["inputs"], o["input_boxes"])]),
                   tuple([tuple(map(_sub, buffers[b]["hi"], buffers[b]["lo"])) for b in o["outputs"]]))
            hit = memo.get(key)
            if hit is None:
                hit = memo[key] = (*cost.tile_costs(*op_tiles(eg, o)), threads_of(key[0]))
            return hit

        return costs

    def run(self, eg) -> SimResult:
        """Simulate one step of `eg`; returns a :class:`SimResult`.

        Implementation: timers (local copies, wake-ups) wait in a heap by end time, transfers
        waiting their route's latency in one FIFO per latency; kernels and transfers in
        flight are kept in start order, their rates recomputed only when the set they depend
        on changes (one starting or ending). A compute op's figures are computed once per
        distinct kind and tiles, a route (links, latency) once per link hierarchy (a table the
        runs on equal levels share). Every float is computed as the model states it, in the
        same order: each event advances every fluid by its rate times the event's step, and
        what ends at one event is handled in start order. The cyclic garbage collector is
        paused while it runs (it creates hundreds of thousands of short-lived objects, none
        in a cycle the run needs collected)."""
        enabled = gc.isenabled()
        gc.disable()
        try:
            return self._run(eg)
        finally:
            if enabled:
                gc.enable()

    def _run(self, eg) -> SimResult:
        hw = self.hw
        k = eg.devices
        hw.check_devices(k)
        ops = eg.ops
        if type(ops) is not list:
            ops = list(ops)
        buffers = eg.buffers
        if type(buffers) is not list:
            buffers = list(buffers)
        n = len(ops)
        kinds = [o["kind"] for o in ops]
        # how each op runs: swaps over the host path, compute ops (and fetches on a host's
        # cores) on the device, other fetches over the links
        fetch_on_cores = hw.fetch_on_cores
        paths = {"swap_out": _SWAP, "swap_in": _SWAP, "compute": _LOCAL}
        path_of = [paths.get(kind, _LOCAL if fetch_on_cores else _REMOTE) for kind in kinds]
        # streams: per device, the compute queue and the copy queue (or one queue for both)
        engines = hw.copy_engines
        queues: List[List[int]] = []
        capacity: List[int] = []
        stream_of = [0] * n
        position = [0] * n  # in its queue
        copy_schedule = getattr(getattr(eg, "core", None), "copy_schedule", None)
        for d in range(k):
            comp, copy = [], []
            for i in eg.schedule(d):
                (copy if kinds[i] == "fetch" and engines > 0 else comp).append(i)
            # swap-outs/ins (exec/swap_plan.h): the device's own copy stream to host memory
            swaps = list(copy_schedule(d)) if copy_schedule is not None else []
            for q, cap in ((comp, 1), (copy, max(engines, 1)), (swaps, 1)):
                s = len(queues)
                for pos, i in enumerate(q):
                    stream_of[i] = s
                    position[i] = pos
                queues.append(q)
                capacity.append(cap)
        # In-order streams (the host runtime's threads) start only their queue's head; the
        # others (a dependency-driven engine feeding GPU streams, as MXNet's) start the
        # earliest op of the queue, in schedule order, whose dependencies are done.
        in_order = hw.in_order
        # a thread that blocked on a dependency resumes wake_latency after it is met
        wake = hw.wake_latency if in_order else 0.0
        last_end = [0.0] * len(queues)
        head = [0] * len(queues)
        running = [0] * len(queues)
        ready: List[List[int]] = [[] for _ in queues]  # heaps of queue positions (out of order)
        deps_left = [0] * n
        dependents: List[List[int]] = [[] for _ in range(n)]
        for i, o in enumerate(ops):
            deps = o["deps"]
            deps_left[i] = len(deps)
            for dep in deps:
                dependents[dep].append(i)
        parts_left = [0] * n
        after_transfers = [0.0] * n  # a fetch's local copy, after its last remote piece
        start = [0.0] * n
        end = [-1.0] * n
        # the runtime's fixed cost before the first op can start (BLAS thread limits, workers)
        now = hw.step_overhead
        done_count = 0
        gil_queue: deque = deque()  # dispatches waiting for the interpreter lock, FIFO
        gil_held = False
        # the profile's figures, read once
        cores = hw.cores
        use_gil = hw.gil
        dispatch_fetch, dispatch_compute, op_overhead = hw.dispatch_fetch, hw.dispatch_compute, hw.op_overhead
        handoff = float(hw.device.get("handoff_s", 0.0))
        gil_fraction = float(hw.device.get("gil_fraction", 0.0))
        cost = self.cost
        compute_costs = self._compute_costs(eg, buffers)
        fetch_costs = cost.fetch_costs if (type(cost).fetch_time is CostTable.fetch_time and  # pieces read once
                                           type(cost).slowdown is CostTable.slowdown) else \
            lambda eg, o: (cost.fetch_time(eg, o), cost.slowdown(eg, o))
        # a fetch's source buffers: (device, item size); what issuing a MultiFetch costs
        sources: List[Optional[tuple]] = [None] * len(buffers)
        fetch_overhead = float(hw.device.get("fetch_overhead_s", 0.0))
        local_bandwidth = hw.local_copy_bandwidth
        # (src, dst) -> route_entry; the levels a route crosses -> its latency; link id ->
        # index in `load` (shared by the runs on one hierarchy)
        routes, latencies, link_index = _route_table(hw, k)
        host_routes: Dict[tuple, Optional[tuple]] = {}  # (device, to host) -> as routes, or None
        inf = float("inf")

        # seq numbers every activity in start order. Timers (end, seq, op, what) wait in a
        # heap: their end is the end of one part of the op (_PART) or a woken thread's op
        # starting (_WAKE). Fluid activities are lists [work left, seq, rate, kind, op, ...]:
        # computes [seconds, seq, rate, _COMPUTE, op, cores it keeps busy, co-runner
        # slowdown, the activity that starts when it ends (dispatch -> kernel), holds the
        # interpreter lock], transfers [bytes, seq, rate, _TRANSFER, op, link indices,
        # bandwidths, end of latency, waiting]. A transfer first waits its route's latency in
        # one FIFO per latency (started in time order, they end in time order), then moves.
        # The fluids in flight, computes and moving transfers, are kept in start order.
        timers: List[tuple] = []
        latency_fifos: Dict[float, deque] = {}
        fifos: List[deque] = []
        computes: List[list] = []
        transfers: List[list] = []
        counter = count(1)
        compute_changed = False
        load: List[int] = [0] * len(link_index)  # transfers in flight per link
        transfers_changed = False  # since the transfers' rates were set

        def add_compute(a: list):
            nonlocal compute_changed
            a[1] = next(counter)
            computes.append(a)
            if cores:
                compute_changed = True
            else:
                a[2] = 1.0

        def route_entry(route, latency: float) -> tuple:
            """(latency, link indices, bandwidths, 1 + the largest index) of a route ((id,
            bandwidth, latency) per link)."""
            with _ROUTE_LOCK:
                for lid, _, _ in route:
                    if lid not in link_index:
                        link_index[lid] = len(link_index)
                links = tuple(link_index[lid] for lid, _, _ in route)
            return latency, links, tuple(bw for _, bw, _ in route), max(links, default=-1) + 1

        def new_fifo(latency: float) -> deque:
            """The FIFO of the transfers waiting a latency of `latency` seconds."""
            fifo = latency_fifos[latency] = deque()
            fifos.append(fifo)
            return fifo

        def host_route(device: int, to_host: bool):
            key = (device, to_host)
            if key not in host_routes:
                route = hw.host_route(device, k, to_host)
                host_routes[key] = None if route is None else route_entry(route, sum(lat for _, _, lat in route))
            return host_routes[key]

        def start_ops(batch):
            """Start the ops of `batch` in order at `now` (~op: the thread slept on a
            dependency, it runs the op after waking up)."""
            nonlocal gil_held
            for i in batch:
                if i < 0:
                    heappush(timers, (now + wake, next(counter), ~i, _WAKE))
                    continue
                o = ops[i]
                start[i] = now
                path = path_of[i]
                if path is _REMOTE:  # a fetch: remote pieces over the links, after their latency
                    # the bytes of fetch_pieces: each piece's elements times its source's item size
                    dst = o["device"]
                    by_src = {}
                    local = total = 0
                    for src_b, lo, hi in o["pieces"]:
                        info = sources[src_b]
                        if info is None:
                            buf = buffers[src_b]
                            full = int(prod(map(_sub, buf["hi"], buf["lo"])))
                            info = (int(buf["device"]), max(1, int(buf["bytes"]) // full) if full else 4)
                            sources[src_b] = info
                        src, itemsize = info
                        nbytes = prod(map(_sub, hi, lo)) * itemsize
                        total += nbytes
                        if src == dst:
                            local += nbytes
                        else:
                            by_src[src] = by_src.get(src, 0) + nbytes
                    # the local part (the pieces already here, and the sum) at the local copy bandwidth
                    local_seconds = fetch_overhead + (local + (total if o["accumulate"] else 0)) / local_bandwidth
                    if not by_src:
                        heappush(timers, (now + local_seconds, next(counter), i, _PART))
                        parts_left[i] = 1
                        continue
                    after_transfers[i] = local_seconds
                    parts_left[i] = len(by_src)
                    for src, nbytes in by_src.items():
                        route = routes.get((src, dst))
                        if route is None:
                            links = hw.route(src, dst, k)
                            climbed = tuple([lid[0] for lid, _, _ in links])  # the levels it crosses
                            latency = latencies.get(climbed)
                            if latency is None:
                                latency = latencies[climbed] = hw.latency(src, dst, k)
                            route = routes[(src, dst)] = route_entry(links, latency)
                        if route[3] > len(load):  # links numbered since this run began
                            load.extend([0] * (route[3] - len(load)))
                        latency = route[0]
                        fifo = latency_fifos.get(latency)
                        if fifo is None:
                            fifo = new_fifo(latency)
                        fifo.append([float(nbytes), next(counter), 0.0, _TRANSFER, i, route[1], route[2], now + latency,
                                     True])
                elif path is _SWAP:  # a copy over the device's path to host memory
                    nbytes = buffers[o["outputs"][0]]["bytes"]
                    parts_left[i] = 1
                    route = host_route(o["device"], kinds[i] == "swap_out")
                    if route is None:  # a private link
                        heappush(timers, (now + nbytes / hw.host_bandwidth, next(counter), i, _PART))
                    else:  # a fluid over the shared host path (each link split among the copies crossing it)
                        if route[3] > len(load):
                            load.extend([0] * (route[3] - len(load)))
                        fifo = latency_fifos.get(route[0])
                        if fifo is None:
                            fifo = new_fifo(route[0])
                        fifo.append([float(nbytes), next(counter), 0.0, _TRANSFER, i, route[1], route[2],
                                     now + route[0], True])
                else:  # computed on the device (a kernel, or a fetch on a host's cores)
                    is_fetch = kinds[i] == "fetch"
                    if is_fetch:
                        (seconds, slowdown), demand = fetch_costs(eg, o), 1.0
                    else:
                        seconds, slowdown, demand = compute_costs(o)
                    # the op's Python part (its own dispatch, within its measured time, and the
                    # runtime's per-op cost) runs first, on one core, holding the interpreter
                    # lock on a `gil` profile; the rest is the kernel or copy proper
                    python = min(dispatch_fetch if is_fetch else dispatch_compute, seconds)
                    kernel = [seconds - python, 0, 0.0, _COMPUTE, i, demand, slowdown, None, False]
                    parts_left[i] = 1
                    lead = python + op_overhead + handoff + gil_fraction * seconds
                    if lead <= 0:
                        add_compute(kernel)
                    elif not use_gil:
                        add_compute([lead, 0, 0.0, _COMPUTE, i, 1.0, 1.0, kernel, False])
                    elif gil_held:
                        gil_queue.append([lead, 0, 0.0, _COMPUTE, i, 1.0, 1.0, kernel, True])
                    else:
                        gil_held = True
                        add_compute([lead, 0, 0.0, _COMPUTE, i, 1.0, 1.0, kernel, True])

        # the streams that may start an op: every one at first, then those an op's end freed
        # (its own, and those of the ops whose last dependency it was)
        woken = set(range(len(queues)))

        def try_start():
            batch = []
            for s in sorted(woken):
                q = queues[s]
                if in_order:
                    while head[s] < len(q) and running[s] < capacity[s] and deps_left[q[head[s]]] == 0:
                        i = q[head[s]]
                        head[s] += 1
                        running[s] += 1
                        batch.append(~i if wake > 0 and now > last_end[s] + _EPS else i)
                else:
                    r = ready[s]
                    while r and running[s] < capacity[s]:
                        running[s] += 1
                        batch.append(q[heappop(r)])
            woken.clear()
            start_ops(batch)

        if not in_order:
            for i in range(n):
                if deps_left[i] == 0:
                    heappush(ready[stream_of[i]], position[i])

        try_start()
        while timers or computes or transfers or any(fifos):
            # rates of the fluid activities, where what they depend on changed
            if compute_changed:
                compute_changed = False
                demand = sum(a[5] for a in computes)
                share = min(1.0, cores / demand) if demand > 0 else 1.0
                for a in computes:
                    a[2] = share
                    if a[6] != 1.0 and cores > a[5]:
                        # co-runners: the share of the other cores the other running ops use
                        busy = min(1.0, (demand - a[5]) / (cores - a[5]))
                        a[2] = share / (1.0 + busy * (a[6] - 1.0))
            if transfers_changed:  # each transfer: its most contended link's share
                transfers_changed = False
                get = load.__getitem__
                for a in transfers:
                    if a[5]:
                        a[2] = min(map(truediv, a[6], map(get, a[5])))
            next_t = timers[0][0] if timers else inf
            for fifo in fifos:
                if fifo and fifo[0][7] < next_t:
                    next_t = fifo[0][7]
            for a in computes:
                rate = a[2]
                t = now + (a[0] / rate if rate > 0 else inf)
                if t < next_t:
                    next_t = t
            for a in transfers:
                rate = a[2]
                t = now + (a[0] / rate if rate > 0 else inf)
                if t < next_t:
                    next_t = t
            if next_t == inf:
                raise Error("simulation stalled: an activity can make no progress")
            dt = next_t - now
            now = next_t
            # what ends now: timers and activities
            finished = []
            horizon = now + _EPS
            while timers and timers[0][0] <= horizon:
                finished.append(heappop(timers))
            for fifo in fifos:
                while fifo and fifo[0][7] <= horizon:
                    finished.append(fifo.popleft())
            if computes:
                still = []
                for a in computes:
                    a[0] -= a[2] * dt
                    if a[0] <= 1e-9:
                        finished.append(a)
                    else:
                        still.append(a)
                if len(still) < len(computes):
                    computes = still
                    compute_changed = bool(cores)
            if transfers:
                still = []
                for a in transfers:
                    a[0] -= a[2] * dt
                    if a[0] <= 1e-9 * max(1.0, a[2]):
                        finished.append(a)
                        for x in a[5]:
                            load[x] -= 1
                        transfers_changed = True
                    else:
                        still.append(a)
                if len(still) < len(transfers):
                    transfers = still
            if len(finished) > 1:
                finished.sort(key=_seq)  # in start order, as the model lists them
            for item in finished:
                if type(item) is tuple:  # a timer
                    _, _, i, what = item
                    if what is _WAKE:  # the woken thread runs its op
                        start_ops((i,))
                        continue
                elif item[3] is _TRANSFER:
                    if item[8]:  # its latency is over: the bytes start moving
                        item[8] = False
                        if item[0] > 0:
                            item[1] = next(counter)
                            links = item[5]
                            item[2] = 0.0 if links else inf
                            transfers.append(item)
                            for x in links:
                                load[x] += 1
                            transfers_changed = True
                            continue
                    i = item[4]
                else:  # a compute activity
                    if item[8]:  # the lock passes to the next dispatch waiting for it
                        if gil_queue:
                            add_compute(gil_queue.popleft())
                        else:
                            gil_held = False
                    then = item[7]
                    if then is not None and then[0] > 0:  # the kernel after its dispatch
                        add_compute(then)
                        continue
                    i = item[4]
                # one part of op i is over: after the last, its local copy, then its end
                parts_left[i] -= 1
                if parts_left[i]:
                    continue
                local = after_transfers[i]
                if local > 0 and kinds[i] == "fetch":
                    after_transfers[i] = 0.0
                    parts_left[i] = 1
                    heappush(timers, (now + local, next(counter), i, _PART))
                    continue
                end[i] = now
                done_count += 1
                s = stream_of[i]
                running[s] -= 1
                last_end[s] = now
                woken.add(s)
                for j in dependents[i]:
                    left = deps_left[j] - 1
                    deps_left[j] = left
                    if not left:
                        woken.add(stream_of[j])
                        if not in_order:
                            heappush(ready[stream_of[j]], position[j])
            if woken:
                try_start()
        if done_count != n:
            stuck = next(i for i in range(n) if end[i] < 0)
            raise Error(f"simulation deadlocked: op {stuck} ({kinds[stuck]} on device "
                        f"{ops[stuck]['device']}) never ran; the schedule contradicts the dependencies")
        return self._result(eg, start, end, kinds, [o["device"] for o in ops])

    def _result(self, eg, start, end, kinds=None, devices=None) -> SimResult:
        k = eg.devices
        if kinds is None:
            kinds = [o["kind"] for o in eg.ops]
            devices = [o["device"] for o in eg.ops]
        starts, ends = np.array(start, dtype=float), np.array(end, dtype=float)
        device = np.array(devices, dtype=np.int64).reshape(-1)
        is_comp = np.array([kind == "compute" for kind in kinds], dtype=bool).reshape(-1)
        by_device = np.argsort(device, kind="stable")  # each device's ops in id order
        bounds = np.searchsorted(device[by_device], np.arange(k + 1))
        dev_compute, dev_comm, dev_exposed, finish = [], [], [], []
        for d in range(k):
            ids = by_device[bounds[d]:bounds[d + 1]]
            comp, comm = ids[is_comp[ids]], ids[~is_comp[ids]]
            cs, ce, ms, me = starts[comp], ends[comp], starts[comm], ends[comm]
            dev_compute.append(sum((ce - cs).tolist()) if self.hw.cores is None else union_length(cs, ce))
            dev_comm.append(union_length(ms, me))
            dev_exposed.append(exposed_length(ms, me, cs, ce))
            finish.append(float(ends[ids].max()) if len(ids) else 0.0)
        stats = eg.stats()
        return SimResult(step_seconds=max(finish, default=0.0), compute_seconds=max(dev_compute, default=0.0),
                         comm_seconds=max(dev_comm, default=0.0), exposed_comm_seconds=max(dev_exposed, default=0.0),
                         device_compute=dev_compute, device_comm=dev_comm, device_exposed=dev_exposed,
                         device_finish=finish, peak_memory=[int(eg.peak_memory(d)) for d in range(k)],
                         memory_bytes=self.hw.memory_bytes, bytes_moved=int(stats["bytes"]),
                         profile=self.hw.name, op_start=list(start), op_end=list(end))


def with_calibration(hw: Hardware, calibration: Optional[Calibration]) -> Hardware:
    """`hw` with a host calibration's figures in place of its own: the fetch model
    (:func:`_with_fetch_calibration`), the cores the runtime's threads got (``effective_cores``)
    and the runtime's wake-up latency and dispatch costs (:data:`MACHINE_FIGURES`); `hw` itself
    when the calibration has none of them."""
    if calibration is None:
        return hw
    if calibration.fetch:
        hw = _with_fetch_calibration(hw, calibration.fetch)
    machine = calibration.machine
    measured = [key for key in MACHINE_FIGURES if machine.get(key) is not None]
    if hw.cores and (machine.get("effective_cores") or measured):
        import copy

        hw = copy.deepcopy(hw)
        if machine.get("effective_cores"):  # the parallelism the runtime's threads got when calibrated
            hw.cores = float(machine["effective_cores"])
        for key in measured:  # wake-up latency, dispatch costs (calibrate.measure_dispatch)
            hw.device[key] = float(machine[key])
    return hw


def _with_fetch_calibration(hw: Hardware, fetch: dict) -> Hardware:
    """The host profile with its memory-bus bandwidth, fetch latency and local copy speed
    replaced by measured ones."""
    import copy

    hw = copy.deepcopy(hw)
    if "bandwidth" in fetch:
        for lv in hw.levels:
            lv.bandwidth = float(fetch["bandwidth"])
        hw.device["local_copy_bandwidth"] = float(fetch["bandwidth"])
    for key, figure in (("accumulate_bandwidth", "accumulate_bandwidth"), ("row_seconds", "fetch_row_seconds")):
        if key in fetch:
            hw.device[figure] = float(fetch[key])
    if "latency" in fetch:
        for lv in hw.levels:
            lv.latency = float(fetch["latency"]) / max(len(hw.levels), 1)
    if "overhead" in fetch:
        hw.device["fetch_overhead_s"] = float(fetch["overhead"])
    return hw


def simulate(eg, profile="p2.8xlarge", calibration: Optional[Calibration] = None) -> SimResult:
    """Simulate one training step of ExecGraph `eg` on `profile` (name, path or Hardware)."""
    return Simulator(profile, calibration).run(eg)
