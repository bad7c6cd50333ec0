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

import heapq
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ..errors import Error
from .cost_table import Calibration, CostTable, fetch_pieces
from .hardware import Hardware, load_profile

_EPS = 1e-15
#: a host calibration's machine figures that replace the profile's device figures of that name
MACHINE_FIGURES = ("wake_latency_s", "step_overhead_s", "op_overhead_s", "dispatch_compute_s", "dispatch_fetch_s",
                   "handoff_s", "gil_fraction")
_START = object()  # a timer whose end starts its op (a device thread waking up)


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


class _Activity:
    """A part of an op in flight: fluid work (compute seconds or bytes) or a timer."""

    __slots__ = ("demand", "gil", "kind", "links", "op", "rate", "remaining", "slowdown", "then", "timer_end")

    def __init__(self, op, kind, remaining=0.0, links=(), demand=1.0, timer_end=None, then=None, slowdown=1.0,
                 gil=False):
        self.op = op
        self.gil = gil  # holds the interpreter lock while it runs (an op's Python dispatch)
        self.kind = kind  # "compute" (kernels, and fetches on host cores) | "transfer" | "timer"
        self.remaining = remaining
        self.links = links
        self.demand = demand
        self.slowdown = slowdown
        self.timer_end = timer_end
        self.rate = 0.0
        self.then = then  # the activity that starts when this one ends (latency -> bytes, dispatch -> kernel)


def _union_length(intervals) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def _exposed(comm, compute) -> float:
    """Length of the time covered by `comm` intervals and by no `compute` interval."""
    events = [(a, 0, 1) for a, b in comm] + [(b, 0, -1) for a, b in comm]
    events += [(a, 1, 1) for a, b in compute] + [(b, 1, -1) for a, b in compute]
    events.sort(key=lambda e: (e[0], e[2]))
    depth = [0, 0]
    last, total = None, 0.0
    for t, which, delta in events:
        if last is not None and depth[0] > 0 and depth[1] == 0:
            total += t - last
        depth[which] += delta
        last = t
    return total


class Simulator:
    """Simulates ExecGraphs on one hardware profile (``Simulator("p2.8xlarge").run(eg)``)."""

    def __init__(self, hardware, calibration: Optional[Calibration] = None, cost: Optional[CostTable] = None):
        self.hw: Hardware = with_calibration(load_profile(hardware) if isinstance(hardware, str) else hardware,
                                             calibration)
        self.cost = cost or CostTable(self.hw, calibration)

    # ------------------------------------------------------------------ op setup
    def _fetch_parts(self, eg, op: dict, k: int):
        """(bytes per source device, local seconds) of a fetch op."""
        dst = op["device"]
        by_src: Dict[int, int] = {}
        local = total = 0
        for src, nbytes, _, _ in fetch_pieces(eg, op):
            total += nbytes
            if src == dst:
                local += nbytes
            else:
                by_src[src] = by_src.get(src, 0) + nbytes
        local_bytes = local + (total if op["accumulate"] else 0)
        # fetch_overhead_s: the fixed cost of issuing one MultiFetch (the host runtime's Python)
        overhead = float(self.hw.device.get("fetch_overhead_s", 0.0))
        return by_src, overhead + local_bytes / self.hw.local_copy_bandwidth

    def run(self, eg) -> SimResult:
        """Simulate one step of `eg`; returns a :class:`SimResult`."""
        hw = self.hw
        k = eg.devices
        hw.check_devices(k)
        ops = eg.ops
        n = len(ops)
        # streams: per device, the compute queue and the copy queue (or one queue for both)
        engines = hw.copy_engines
        queues: List[List[int]] = []
        capacity: List[int] = []
        stream_of = [0] * n
        for d in range(k):
            comp, copy = [], []
            for i in eg.schedule(d):
                (copy if ops[i]["kind"] == "fetch" and engines > 0 else comp).append(i)
            # swap-outs/ins (exec/swap_plan.h): the device's own copy stream to host memory
            copy_schedule = getattr(getattr(eg, "core", None), "copy_schedule", None)
            swaps = list(copy_schedule(d)) if copy_schedule is not None else []
            for q, cap in ((comp, 1), (copy, max(engines, 1)), (swaps, 1)):
                for i in q:
                    stream_of[i] = len(queues)
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
        position = [0] * n
        for q in queues:
            for pos, i in enumerate(q):
                position[i] = pos
        deps_left = [len(o["deps"]) for o in ops]
        dependents: List[List[int]] = [[] for _ in range(n)]
        for i, o in enumerate(ops):
            for dep in o["deps"]:
                dependents[dep].append(i)
        parts_left = [0] * n
        after_transfers: Dict[int, float] = {}
        start = [0.0] * n
        end = [-1.0] * n
        active: List[_Activity] = []
        # the runtime's fixed cost before the first op can start (BLAS thread limits, workers)
        now = hw.step_overhead
        done_count = 0
        gil_queue: List[_Activity] = []  # dispatches waiting for the interpreter lock, FIFO
        gil_held = [False]

        def take_gil(a: _Activity):
            if gil_held[0]:
                gil_queue.append(a)
            else:
                gil_held[0] = True
                active.append(a)

        def start_op(i: int):
            o = ops[i]
            start[i] = now
            if o["kind"] in ("swap_out", "swap_in"):  # a copy over the device's path to host memory
                nbytes = eg.buffers[o["outputs"][0]]["bytes"]
                parts_left[i] = 1
                route = hw.host_route(o["device"], k, o["kind"] == "swap_out")
                if route is None:  # a private link
                    active.append(_Activity(i, "timer", timer_end=now + nbytes / hw.host_bandwidth))
                    return
                # a fluid over the shared host path (each link split among the copies crossing it)
                transfer = _Activity(i, "transfer", remaining=float(nbytes), links=tuple((l, b) for l, b, _ in route))
                active.append(_Activity(i, "timer", timer_end=now + sum(lat for _, _, lat in route), then=transfer))
                return
            if o["kind"] == "compute" or hw.fetch_on_cores:
                is_fetch = o["kind"] == "fetch"
                kind = "fetch" if is_fetch else eg.lowered.node_ops[o["node"]]
                seconds = self.cost.fetch_time(eg, o) if is_fetch else self.cost.op_time(eg, o)
                # the op's Python part (its own dispatch, within its measured time, and the
                # runtime's per-op cost) runs first, on one core, holding the interpreter lock
                # on a `gil` profile; the rest is the kernel or copy proper
                python = min(hw.dispatch_fetch if is_fetch else hw.dispatch_compute, seconds)
                kernel = _Activity(i, "compute", remaining=seconds - python, slowdown=self.cost.slowdown(eg, o),
                                   demand=1.0 if is_fetch else self.cost.threads(kind))
                parts_left[i] = 1
                lead = (python + hw.op_overhead + float(hw.device.get("handoff_s", 0.0))
                        + float(hw.device.get("gil_fraction", 0.0)) * seconds)
                if lead <= 0:
                    active.append(kernel)
                elif hw.gil:
                    take_gil(_Activity(i, "compute", remaining=lead, then=kernel, gil=True))
                else:
                    active.append(_Activity(i, "compute", remaining=lead, then=kernel))
                return
            by_src, local_seconds = self._fetch_parts(eg, o, k)
            if not by_src:
                active.append(_Activity(i, "timer", timer_end=now + local_seconds))
                parts_left[i] = 1
                return
            after_transfers[i] = local_seconds
            parts_left[i] = len(by_src)
            for src, nbytes in by_src.items():
                route = hw.route(src, o["device"], k)
                links = tuple((lid, bw) for lid, bw, _ in route)
                transfer = _Activity(i, "transfer", remaining=float(nbytes), links=links)
                active.append(_Activity(i, "timer", timer_end=now + hw.latency(src, o["device"], k),
                                        then=transfer))

        def try_start():
            for s, q in enumerate(queues):
                if in_order:
                    while head[s] < len(q) and running[s] < capacity[s] and deps_left[q[head[s]]] == 0:
                        i = q[head[s]]
                        head[s] += 1
                        running[s] += 1
                        if wake > 0 and now > last_end[s] + _EPS:  # the thread slept on a dependency
                            active.append(_Activity(i, "timer", timer_end=now + wake, then=_START))
                        else:
                            start_op(i)
                else:
                    while ready[s] and running[s] < capacity[s]:
                        i = q[heapq.heappop(ready[s])]
                        running[s] += 1
                        start_op(i)

        def finish_op(i: int):
            nonlocal done_count
            end[i] = now
            done_count += 1
            running[stream_of[i]] -= 1
            last_end[stream_of[i]] = now
            for j in dependents[i]:
                deps_left[j] -= 1
                if deps_left[j] == 0 and not in_order:
                    heapq.heappush(ready[stream_of[j]], position[j])

        if not in_order:
            for i in range(n):
                if deps_left[i] == 0:
                    heapq.heappush(ready[stream_of[i]], position[i])

        try_start()
        while active:
            # rates of the fluid activities
            cores = hw.cores
            demand = sum(a.demand for a in active if a.kind == "compute") if cores else 0.0
            share = min(1.0, cores / demand) if cores and demand > 0 else 1.0
            load: Dict[tuple, int] = {}
            for a in active:
                if a.kind == "transfer":
                    for lid, _ in a.links:
                        load[lid] = load.get(lid, 0) + 1
            next_t = float("inf")
            for a in active:
                if a.kind == "timer":
                    next_t = min(next_t, a.timer_end)
                    continue
                if a.kind == "compute":
                    a.rate = share
                    if a.slowdown != 1.0 and cores and cores > a.demand:
                        # co-runners: the share of the other cores the other running ops use
                        busy = min(1.0, (demand - a.demand) / (cores - a.demand))
                        a.rate = share / (1.0 + busy * (a.slowdown - 1.0))
                else:
                    a.rate = min(bw / load[lid] for lid, bw in a.links) if a.links else float("inf")
                next_t = min(next_t, now + (a.remaining / a.rate if a.rate > 0 else float("inf")))
            if next_t == float("inf"):
                raise Error("simulation stalled: an activity can make no progress")
            dt = next_t - now
            now = next_t
            still = []
            finished = []
            for a in active:
                if a.kind == "timer":
                    if a.timer_end <= now + _EPS:
                        finished.append(a)
                    else:
                        still.append(a)
                    continue
                a.remaining -= a.rate * dt
                scale = 1.0 if a.kind == "compute" else max(1.0, a.rate)
                if a.remaining <= 1e-9 * scale:
                    finished.append(a)
                else:
                    still.append(a)
            active = still
            for a in finished:
                if a.gil:  # the lock passes to the next dispatch waiting for it
                    if gil_queue:
                        active.append(gil_queue.pop(0))
                    else:
                        gil_held[0] = False
                if a.then is _START:  # the woken thread runs its op
                    start_op(a.op)
                    continue
                if a.then is not None:  # latency over: the bytes start moving
                    if a.then.remaining > 0:
                        active.append(a.then)
                        continue
                i = a.op
                parts_left[i] -= 1
                if parts_left[i] == 0:
                    local = after_transfers.pop(i, 0.0)
                    if local > 0 and ops[i]["kind"] == "fetch":
                        parts_left[i] = 1
                        active.append(_Activity(i, "timer", timer_end=now + local))
                    else:
                        finish_op(i)
            try_start()
        if done_count != n:
            stuck = next(i for i in range(n) if end[i] < 0)
            raise Error(f"simulation deadlocked: op {stuck} ({ops[stuck]['kind']} on device "
                        f"{ops[stuck]['device']}) never ran; the schedule contradicts the dependencies")
        return self._result(eg, start, end)

    def _result(self, eg, start, end) -> SimResult:
        k = eg.devices
        comp = [[] for _ in range(k)]
        comm = [[] for _ in range(k)]
        for i, o in enumerate(eg.ops):
            (comp if o["kind"] == "compute" else comm)[o["device"]].append((start[i], end[i]))
        dev_compute = [sum(b - a for a, b in comp[d]) if self.hw.cores is None else _union_length(comp[d])
                       for d in range(k)]
        dev_comm = [_union_length(comm[d]) for d in range(k)]
        dev_exposed = [_exposed(comm[d], comp[d]) for d in range(k)]
        finish = [max((b for _, b in comp[d] + comm[d]), default=0.0) for d in range(k)]
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
