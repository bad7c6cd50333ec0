"""MPI runtime: the execution graph run as MPI ranks, one device per rank, MultiFetch over
one-sided RMA (mpi4py; ``pip install 'autotile[mpi]'``, see docs/mpi.md).

Launch with ``mpirun -np K python script.py`` (script calling
``at.backend.run(..., devices=K, ctx="mpi")``) or ``mpirun -np K autotile run MODEL
--devices K --ctx mpi``. Every rank plans and transforms the same model itself (planning
and transformation are deterministic); at start the ranks check that the world size equals
the devices and compare a hash of their ExecGraph (JSON, schedules, arena sizes), and refuse
to run, naming the ranks that differ, on a mismatch. Each rank then runs only its own
schedule (``eg.schedule(rank)``).

Memory. A rank's arena (the static memory plan of its device) is exposed as an RMA window.
By default the window memory comes from ``MPI.Win.Allocate`` and the NumPy arena is a view
of it: on one node MPI then maps it as shared memory and a Get is a plain copy that needs
nothing from the target. ``window="create"`` instead exposes a NumPy arena with
``MPI.Win.Create``; MPICH then moves data by active messages that progress only while the
target is inside MPI, which costs milliseconds per Get while the target computes (measured
in bench/mpi.py; MPICH's ``MPIR_CVAR_ASYNC_PROGRESS=1`` helps partly).

MultiFetch. A fetch op assembles its destination tile from pieces of other tiles. Local
pieces are copied by the C++ multifetch kernel; remote pieces are read in one
passive-target epoch per source rank: ``Lock(source, SHARED, NOCHECK)``, one ``Get`` per
piece, ``Unlock(source)`` (the Unlock completes the Gets). A strided piece (a box inside a
box) is described either by derived datatypes (``Create_subarray`` on the source tile and on
the destination tile, the default) or as one Get per contiguous row (``strided="rows"``); the
data lands straight in the destination buffer. An accumulating fetch (a reduction: zero the
destination, add the pieces) gets remote pieces into contiguous staging arrays, then the
C++ kernel zeroes the destination and adds local and staged pieces. The arena window is only
ever locked shared, so MPI_MODE_NOCHECK is valid and no lock message is sent.

Synchronisation. The ExecGraph's deps already say when an op may run: after the producers
of what it reads (possibly on other ranks) and after every reader (possibly a remote fetch)
of memory it overwrites (the memory plan's reuse deps). Each rank runs its schedule in
order, so "op j of rank s is done" is "rank s completed at least pos(j) + 1 units of its
step", and one counter per rank says it all. Every rank exposes a second small window of
int64: ``[progress, failed, acks, suspect, message length, message bytes...]``. A step has
``len(schedule) + 1`` units per rank: unit 0 is "inputs loaded" (remote fetches of input
tiles wait for it), unit i + 1 is "op i of the schedule done"; progress counts units over all
steps. A rank publishes its progress (``Accumulate(REPLACE)`` on its own counter, after a
``Win.Sync`` of the arena window so its stores are visible) only after ops some other rank
depends on, after loading, and at the end of its schedule. A rank that needs op j of rank
s polls rank s's counter (``Get_accumulate(NO_OP)``, an atomic read) with exponential
back-off (50 us to 2 ms), caching what it saw. At the end of a step every rank waits until
all counters reach the step's end, so no rank rewrites inputs a peer is still reading.

Faults. Every wait has a timeout (``timeout`` seconds, default 300; env
``AUTOTILE_MPI_TIMEOUT``): a rank that waits longer for a peer raises an Error naming the
peer, the op it waits for and how far the peer got. A rank whose op raises writes its
message into its window and sets ``failed = rank + 1`` on every rank
(``Compare_and_swap``, so the first failure wins); pollers check their own ``failed`` word
and raise an Error quoting the failing rank's message. A rank that timed out announces
its failure the same way, with the rank it found unresponsive as ``suspect`` (no more RMA
goes to that rank). A watchdog thread bounds every MPI call (a Get or a collective that
never returns because a peer died): past the timeout plus a grace period it prints what
the rank was doing and calls ``MPI.COMM_WORLD.Abort``. After a failed step the process
aborts the job at exit instead of finalizing (MPI_Finalize would wait for dead peers),
after counting itself in every live rank's ``acks`` word and waiting (at most 5 s) until
all live ranks did, so every rank gets to print its error; ``mpirun`` returns non-zero in
bounded time.

Results. :func:`run_mpi` gathers outputs, gradients and updated params to rank 0 (``gather=
"root"``), to every rank (``"all"``) or not at all (``"none"``: fetch them with
:meth:`MPIRuntime.gather`, :meth:`MPIRuntime.allgather` or :meth:`MPIRuntime.local_tiles`).
:meth:`MPIRuntime.advance` carries updated params (and optimizer state) into the next
step's inputs without leaving the ranks; :meth:`MPIRuntime.save_checkpoint` writes each
rank's param shards in the at.nd format plus a JSON manifest, and
:meth:`MPIRuntime.load_checkpoint` restores them (on any number of ranks: a shard is cut
from whichever saved shards cover it).
"""
from __future__ import annotations

import atexit
import hashlib
import json
import os
import sys
import threading
import time
from typing import Dict, List, Optional

import numpy as np

from .. import _core
from ..errors import Error
from .sub_op import SubOpRunner
from .tiles import box_index, input_tiles, is_extra_replica, step_inputs

# The flag window of a rank, in int64 words: progress, failed rank + 1, acks, then what this
# rank reports when it fails: the rank it found dead + 1 (0: none), message length, message.
_PROGRESS, _FAILED, _ACKS, _SUSPECT, _MSGLEN, _HEADER = 0, 1, 2, 3, 4, 5
_MESSAGE_BYTES = 2048
_DEFAULT_TIMEOUT = 300.0
_GRACE = 10.0  # seconds the watchdog adds to the timeout before aborting

# The runtime whose step failed: the process then aborts the MPI job at exit instead of finalizing.
_abort_at_exit = [None]
_hook_registered: List[bool] = []
_ACK_WAIT = 5.0  # seconds a failed rank waits at exit for the others to have seen the failure


def mpi():
    """The mpi4py MPI module, or an Error saying how to install it."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise Error("ctx='mpi' needs mpi4py and an MPI library: pip install 'autotile[mpi]' "
                    f"(mpi4py + the mpich wheel) or see docs/mpi.md for a system MPI ({e})") from None
    if not _hook_registered:
        # registered after mpi4py's own exit handler, so it runs before MPI is finalized
        atexit.register(_exit_hook)
        _hook_registered.append(True)
    return MPI


def _exit_hook():
    rt = _abort_at_exit[0]
    if rt is not None:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
            rt._exit_barrier(_ACK_WAIT)
        except BaseException as e:  # abort anyway
            sys.stderr.write(f"autotile: rank {rt.rank}: {type(e).__name__} while waiting for the other ranks: {e}\n")
        finally:
            mpi().COMM_WORLD.Abort(1)



def exec_graph_hash(eg) -> str:
    """SHA-256 of what every rank must agree on: the ExecGraph's JSON (ops, deps, pieces,
    buffers and their arena offsets), each device's schedule and arena size."""
    h = hashlib.sha256(eg.to_json().encode())
    for d in range(eg.devices):
        h.update(json.dumps([list(eg.schedule(d)), int(eg.core.arena_bytes[d])]).encode())
    return h.hexdigest()


class RankFailure(Error):
    """Another rank failed (or stopped answering) during a step. `reported`: another rank
    said so (False when this rank noticed a peer stopped answering, and tells the others)."""

    def __init__(self, message: str, reported: bool = True, suspect: Optional[int] = None):
        super().__init__(message)
        self.reported = reported
        self.suspect = suspect  # the rank that stopped answering


class _Watchdog:
    """Bounds blocking MPI calls: past its deadline it reports and aborts the job."""

    def __init__(self, rank: int, comm):
        self.rank = rank
        self.comm = comm
        self.deadline = None
        self.where = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="autotile-mpi-watchdog", daemon=True)
        self._thread.start()

    def arm(self, seconds: float, where: str):
        self.where = where
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def disarm(self):
        self.deadline = None

    def stop(self):
        self._stop.set()

    def _loop(self):
        while not self._stop.wait(0.25):
            deadline = self.deadline
            if deadline is not None and time.monotonic() > deadline:
                sys.stderr.write(f"autotile: error: rank {self.rank}: no answer from MPI for more than "
                                 f"{self.seconds:g} s while {self.where} (a peer died or hangs); "
                                 "aborting the MPI job\n")
                sys.stderr.flush()
                threading.Timer(5.0, lambda: os._exit(1)).start()  # in case Abort itself hangs
                self.comm.Abort(1)
                return


def _runs(sub, src_shape, dst_shape):
    """Split box shape `sub` into contiguous runs common to a source tile of shape
    `src_shape` and a destination of shape `dst_shape`: (leading dims, run length in
    elements). The trailing dims the box fully covers in both, plus one more, are one run."""
    n = len(sub)
    k = n
    while k > 0 and sub[k - 1] == src_shape[k - 1] == dst_shape[k - 1]:
        k -= 1
    if k == 0:
        return (), int(np.prod(sub)) if n else 1
    return tuple(sub[:k - 1]), int(np.prod(sub[k - 1:]))


def piece_gets(MPI, dtype, src_shape, src_disp: int, src_start, sub, d_mem, d_shape, d_start, strided: str):
    """The Gets that copy box `sub` starting at `src_start` of a remote C-ordered tile of shape
    `src_shape` (at byte `src_disp` of the target's window) into the box starting at
    `d_start` of the local C-ordered array of shape `d_shape` whose bytes are `d_mem`.
    strided="subarray": one Get with subarray datatypes on both sides; "rows": one Get per
    contiguous run. Returns ([(origin spec, target spec)], committed datatypes to free later)."""
    from mpi4py.util.dtlib import from_numpy_dtype

    dtype = np.dtype(dtype)
    if strided == "subarray":
        base = from_numpy_dtype(dtype)
        if not src_shape:  # a scalar
            return [([d_mem, 1, base], (src_disp, 1, base))], []
        t_type = base.Create_subarray(list(src_shape), list(sub), list(src_start), order=MPI.ORDER_C).Commit()
        o_type = base.Create_subarray(list(d_shape), list(sub), list(d_start), order=MPI.ORDER_C).Commit()
        return [([d_mem, 1, o_type], (src_disp, 1, t_type))], [t_type, o_type]
    lead, run = _runs(sub, src_shape, d_shape)
    esz = dtype.itemsize
    s_strides = [int(np.prod(src_shape[i + 1:])) for i in range(len(src_shape))]
    d_strides = [int(np.prod(d_shape[i + 1:])) for i in range(len(d_shape))]
    items = []
    for idx in (np.ndindex(*lead) if lead else [()]):
        first_s = [s + i for s, i in zip(src_start, idx)] + list(src_start[len(idx):])
        first_d = [s + i for s, i in zip(d_start, idx)] + list(d_start[len(idx):])
        so = sum(a * b for a, b in zip(first_s, s_strides)) * esz
        do = sum(a * b for a, b in zip(first_d, d_strides)) * esz
        items.append(([d_mem[do: do + run * esz], run * esz, MPI.BYTE], (src_disp + so, run * esz, MPI.BYTE)))
    return items, []


class MPIRuntime:
    """Runs this rank's part of an ExecGraph; the ranks of `comm` are the devices."""

    def __init__(self, eg, comm=None, timeout: Optional[float] = None, window: str = "allocate",
                 strided: str = "subarray"):
        MPI = mpi()
        self.MPI = MPI
        self.eg = eg
        self.comm = MPI.COMM_WORLD if comm is None else comm
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        if timeout is None:
            timeout = float(os.environ.get("AUTOTILE_MPI_TIMEOUT", _DEFAULT_TIMEOUT))
        self.timeout = float(timeout)
        if window not in ("allocate", "create"):
            raise Error(f"window must be 'allocate' or 'create', got {window!r}")
        if strided not in ("subarray", "rows"):
            raise Error(f"strided must be 'subarray' or 'rows', got {strided!r}")
        self.strided = strided
        if self.size != eg.devices:
            raise Error(f"the MPI world has {self.size} rank(s) but the plan is for {eg.devices} devices: "
                        f"launch with mpirun -np {eg.devices} (one rank per device) or plan for {self.size} devices")
        self._watchdog = _Watchdog(self.rank, self.comm)
        self.exec_hash = exec_graph_hash(eg)
        self._watchdog.arm(self.timeout + _GRACE, "comparing execution graphs across ranks")
        hashes = self.comm.allgather(self.exec_hash)
        self._watchdog.disarm()
        if len(set(hashes)) > 1:
            ref = hashes[0]
            bad = [r for r, h in enumerate(hashes) if h != ref]
            good = [r for r, h in enumerate(hashes) if h == ref]
            raise Error(f"the execution graph differs across ranks: ranks {bad} built "
                        f"{', '.join(sorted({hashes[r][:12] for r in bad}))}, ranks {good} built {ref[:12]}; every "
                        "rank must plan the same model, shapes, algorithm and devices with the same autotile "
                        "version. Refusing to run")
        self.dtypes = [np.dtype(d) for d in eg.lowered.tensor_dtypes]
        self.runner = SubOpRunner(eg)
        self.schedules = [list(eg.schedule(d)) for d in range(self.size)]
        self.schedule = self.schedules[self.rank]
        self.units = [len(s) + 1 for s in self.schedules]  # progress units per step, per rank
        self.pos = {}  # op id -> its unit on its rank (1-based; unit 0 is "inputs loaded")
        for sched in self.schedules:
            for i, op_id in enumerate(sched):
                self.pos[op_id] = i + 1
        self._epoch = 0  # steps run (progress counters count units over all of them)
        self.step = 0  # training steps done (advance() and checkpoints count it)
        self._seen = [0] * self.size
        self._suspects = set()  # ranks that stopped answering: no RMA to them after a failure
        self._types = []

        # windows (collective): the arena, then the flags
        self._watchdog.arm(self.timeout + _GRACE, "creating the RMA windows")
        nbytes = max(int(eg.core.arena_bytes[self.rank]), 8)
        if window == "allocate":
            self.win = MPI.Win.Allocate(nbytes, 1, comm=self.comm)
            self.arena = np.frombuffer(self.win.tomemory(), dtype=np.uint8)[:nbytes]
            self.arena[...] = 0
        else:
            self.arena = np.zeros(nbytes, dtype=np.uint8)
            self.win = MPI.Win.Create(self.arena, 1, comm=self.comm)
        words = _HEADER + _MESSAGE_BYTES // 8
        self.fwin = MPI.Win.Allocate(words * 8, 8, comm=self.comm)
        self.flags = np.frombuffer(self.fwin.tomemory(), dtype=np.int64)[:words]
        self.flags[...] = 0
        self.comm.Barrier()  # every window is zeroed before anyone reads it
        self._watchdog.disarm()

        self.views: Dict[int, np.ndarray] = {}
        for b_id, b in enumerate(eg.buffers):
            if b["device"] == self.rank:
                self.views[b_id] = self._view(b)
        self._inputs: Dict[int, np.ndarray] = {}
        self._prepare()

    # ------------------------------------------------------------------ setup
    def _view(self, b: dict) -> np.ndarray:
        dtype = self.dtypes[b["tensor"]]
        shape = tuple(h - l for l, h in zip(b["lo"], b["hi"]))
        count = int(np.prod(shape)) if shape else 1
        return self.arena[b["offset"]: b["offset"] + count * dtype.itemsize].view(dtype).reshape(shape)

    def _prepare(self):
        """Per op of this rank: what it waits for, and per fetch the Gets it issues."""
        eg, me = self.eg, self.rank
        ops = eg.ops
        remote_dependents = set()
        remote_readers = set()  # ops of mine whose outputs some other rank fetches
        for i, op in enumerate(ops):
            for dep in op["deps"]:
                if ops[dep]["device"] != op["device"] and ops[dep]["device"] == me:
                    remote_dependents.add(dep)
            if op["kind"] == "fetch" and op["device"] != me:
                for src, _, _ in op["pieces"]:
                    if eg.buffers[src]["device"] == me and eg.buffers[src]["producer"] >= 0:
                        remote_readers.add(eg.buffers[src]["producer"])
        self.publish_after = remote_dependents | remote_readers
        self.waits = {}
        self.fetches = {}
        for op_id in self.schedule:
            op = ops[op_id]
            need = {}
            for dep in op["deps"]:
                s = ops[dep]["device"]
                if s != me:
                    need[s] = max(need.get(s, 0), self.pos[dep])
            if op["kind"] == "fetch":
                for src, _, _ in op["pieces"]:
                    sb = eg.buffers[src]
                    if sb["device"] != me:
                        need.setdefault(sb["device"], 0)  # at least its inputs are loaded
                        if sb["producer"] >= 0:
                            need[sb["device"]] = max(need[sb["device"]], self.pos[sb["producer"]])
                self.fetches[op_id] = self._fetch_plan(op)
            self.waits[op_id] = sorted(need.items())

    def _fetch_plan(self, op: dict) -> dict:
        eg = self.eg
        dst_id = op["outputs"][0]
        dst = eg.buffers[dst_id]
        dst_view = self.views[dst_id]
        dtype = dst_view.dtype
        dst_shape = tuple(h - l for l, h in zip(dst["lo"], dst["hi"]))
        local, staged, gets = [], [], {}
        for src_id, lo, hi in op["pieces"]:
            sb = eg.buffers[src_id]
            sub = tuple(h - l for l, h in zip(lo, hi))
            if any(n <= 0 for n in sub):
                continue
            if sb["device"] == self.rank:
                local.append((self.views[src_id], sb["lo"], lo, hi))
                continue
            src_shape = tuple(h - l for l, h in zip(sb["lo"], sb["hi"]))
            src_start = tuple(l - o for l, o in zip(lo, sb["lo"]))
            if op["accumulate"]:  # stage contiguous, add after the gets
                stage = np.empty(sub, dtype=dtype)
                staged.append((stage, lo, lo, hi))
                d_mem, d_shape, d_start = stage.reshape(-1).view(np.uint8), sub, (0,) * len(sub)
            else:
                d_mem = self.arena[dst["offset"]: dst["offset"] + dst_view.nbytes]
                d_shape, d_start = dst_shape, tuple(l - o for l, o in zip(lo, dst["lo"]))
            items, types = piece_gets(self.MPI, dtype, src_shape, sb["offset"], src_start, sub, d_mem, d_shape,
                                      d_start, self.strided)
            gets.setdefault(sb["device"], []).extend(items)
            self._types.extend(types)
        return {"dst": dst_view, "dst_lo": dst["lo"], "local": local, "staged": staged, "gets": gets,
                "accumulate": bool(op["accumulate"])}

    # ------------------------------------------------------------------ flags
    def _flag_read(self, rank: int) -> np.ndarray:
        MPI = self.MPI
        out = np.zeros(2, dtype=np.int64)
        self.fwin.Lock(rank, MPI.LOCK_SHARED, MPI.MODE_NOCHECK)
        self.fwin.Get_accumulate([np.zeros(2, np.int64), MPI.INT64_T], [out, MPI.INT64_T], rank,
                                 target=(0, 2, MPI.INT64_T), op=MPI.NO_OP)
        self.fwin.Unlock(rank)
        return out

    def _publish(self, value: int):
        MPI = self.MPI
        self.win.Lock(self.rank, MPI.LOCK_SHARED, MPI.MODE_NOCHECK)
        self.win.Sync()  # this rank's stores into the arena are visible to remote Gets
        self.win.Unlock(self.rank)
        self.fwin.Lock(self.rank, MPI.LOCK_SHARED, MPI.MODE_NOCHECK)
        self.fwin.Accumulate([np.array([value], np.int64), MPI.INT64_T], self.rank, target=(0, 1, MPI.INT64_T),
                             op=MPI.REPLACE)
        self.fwin.Unlock(self.rank)

    def _failure_message(self, rank: int) -> str:
        """The message of failed rank `rank` (and the rank it found dead joins the suspects)."""
        MPI = self.MPI
        words = _HEADER + _MESSAGE_BYTES // 8
        buf = np.zeros(words, dtype=np.int64)
        self.fwin.Lock(rank, MPI.LOCK_SHARED, MPI.MODE_NOCHECK)
        self.fwin.Get([buf, MPI.INT64_T], rank, target=(0, words, MPI.INT64_T))
        self.fwin.Unlock(rank)
        if int(buf[_SUSPECT]):
            self._suspects.add(int(buf[_SUSPECT]) - 1)
        n = int(buf[_MSGLEN])
        return buf[_HEADER:].view(np.uint8)[:n].tobytes().decode("utf-8", "replace")

    def _announce_failure(self, message: str, suspect: Optional[int] = None):
        """Writes `message` (and the rank found dead, if any) into this rank's window and marks
        every rank still alive failed by this one."""
        MPI = self.MPI
        data = message.encode("utf-8")[:_MESSAGE_BYTES]
        words = np.zeros(_MESSAGE_BYTES // 8 + 2, dtype=np.int64)
        words[0] = 0 if suspect is None else suspect + 1
        words[1] = len(data)
        words[2:].view(np.uint8)[:len(data)] = np.frombuffer(data, np.uint8)
        self._watchdog.arm(self.timeout + _GRACE, "telling the other ranks this rank failed")
        try:
            self.fwin.Lock(self.rank, MPI.LOCK_SHARED, MPI.MODE_NOCHECK)
            self.fwin.Put([words, MPI.INT64_T], self.rank, target=(_SUSPECT, len(words), MPI.INT64_T))
            self.fwin.Unlock(self.rank)
            mark = np.array([self.rank + 1], np.int64)
            for r in self._alive():
                result = np.zeros(1, np.int64)
                self.fwin.Lock(r, MPI.LOCK_SHARED, MPI.MODE_NOCHECK)
                self.fwin.Compare_and_swap([mark, MPI.INT64_T], [np.zeros(1, np.int64), MPI.INT64_T],
                                           [result, MPI.INT64_T], r, _FAILED)
                self.fwin.Unlock(r)
        finally:
            self._watchdog.disarm()

    def _alive(self) -> List[int]:
        return [r for r in range(self.size) if r not in self._suspects]

    def _exit_barrier(self, seconds: float):
        """At exit after a failed step: counts this rank on every rank's ack word and waits
        (at most `seconds`) until every rank did, so that all print their error before the
        job is aborted. A dead rank never acks: the wait then just runs out."""
        MPI = self.MPI
        self._watchdog.arm(seconds + _GRACE, "waiting for the other ranks to see the failure")
        one = np.ones(1, np.int64)
        alive = self._alive()
        for r in alive:
            self.fwin.Lock(r, MPI.LOCK_SHARED, MPI.MODE_NOCHECK)
            self.fwin.Accumulate([one, MPI.INT64_T], r, target=(_ACKS, 1, MPI.INT64_T), op=MPI.SUM)
            self.fwin.Unlock(r)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            out = np.zeros(1, np.int64)
            self.fwin.Lock(self.rank, MPI.LOCK_SHARED, MPI.MODE_NOCHECK)
            self.fwin.Get_accumulate([one, MPI.INT64_T], [out, MPI.INT64_T], self.rank,
                                     target=(_ACKS, 1, MPI.INT64_T), op=MPI.NO_OP)
            self.fwin.Unlock(self.rank)
            if int(out[0]) >= len(alive):
                break
            time.sleep(0.01)

    def _check_failed(self, own: Optional[np.ndarray] = None):
        failed = int((self._flag_read(self.rank) if own is None else own)[1])
        if failed:
            culprit = failed - 1
            raise RankFailure(f"rank {self.rank} stops: rank {culprit} failed: {self._failure_message(culprit)}")

    def _wait(self, rank: int, units: int, what):
        """Waits until `rank`'s progress counter reaches `units` (absolute), or fails.
        `what()` describes what is awaited (for messages)."""
        if self._seen[rank] >= units:
            return
        what = what()
        start = time.monotonic()
        delay = 50e-6
        polls = 0
        try:
            while True:
                self._watchdog.arm(self.timeout + _GRACE, f"waiting for rank {rank} ({what})")
                head = self._flag_read(rank)
                self._seen[rank] = int(head[0])
                if int(head[1]):
                    self._check_failed(head)
                if self._seen[rank] >= units:
                    return
                polls += 1
                if polls % 8 == 0:
                    self._check_failed()
                self._watchdog.disarm()
                if time.monotonic() - start > self.timeout:
                    base = self._epoch * self.units[rank]
                    raise RankFailure(f"rank {self.rank} timed out after {self.timeout:g} s waiting for rank {rank} "
                                      f"({what}); rank {rank} last reported {max(self._seen[rank] - base - 1, 0)} of "
                                      f"its {self.units[rank] - 1} ops done this step: it is stuck or dead",
                                      reported=False, suspect=rank)
                time.sleep(delay)
                delay = min(delay * 2, 2e-3)
        finally:
            self._watchdog.disarm()

    # ------------------------------------------------------------------ data in / out
    def _describe_wait(self, op_id: int, rank: int, unit: int) -> str:
        low = self.eg.lowered
        op = self.eg.ops[op_id]
        name = low.node_names[op["node"]] if op["node"] >= 0 else "?"
        if unit == 0:
            return f"its inputs, for {op['kind']} op {op_id} of node '{name}'"
        dep = self.schedules[rank][unit - 1]
        dep_op = self.eg.ops[dep]
        dep_name = low.node_names[dep_op["node"]] if dep_op["node"] >= 0 else "?"
        return f"its {dep_op['kind']} op {dep} of node '{dep_name}', for {op['kind']} op {op_id} of node '{name}'"

    def load(self, values: Dict[str, np.ndarray], names=None):
        """Keeps this rank's tiles of the graph inputs (all of them, or those in `names`);
        they are written into the arena at the start of every step."""
        for b, value in input_tiles(self.eg, values, [self.rank], names):
            self._inputs[b] = np.array(value, dtype=self.views[b].dtype, copy=True)

    def local_tiles(self, name: str, contributors_only: bool = True) -> List[tuple]:
        """This rank's tiles of tensor `name` as [(lo, hi, array copy)] (by default only the
        tiles that count in its full value: no second replica)."""
        tid = self.eg.tensor_id[name]
        b = self.eg.core.tile(tid, self.rank)
        if b < 0 or (contributors_only and is_extra_replica(self.eg, name, self.rank)):
            return []
        buf = self.eg.buffers[b]
        return [(tuple(buf["lo"]), tuple(buf["hi"]), np.array(self.views[b], copy=True))]

    def _assemble(self, names, tiles_by_rank) -> Dict[str, np.ndarray]:
        out = {}
        for name in names:
            tid = self.eg.tensor_id[name]
            full = np.zeros(self.eg.lowered.tensor_shapes[tid], dtype=self.dtypes[tid])
            for tiles in tiles_by_rank:
                for lo, hi, value in tiles[name]:
                    full[box_index(lo, hi)] += value
            out[name] = full
        return out

    def gather(self, names, root: int = 0):
        """Full values of the tensors in `names` (a name or a list) on rank `root` (partials
        summed); None on the other ranks. Collective."""
        single = isinstance(names, str)
        names = [names] if single else list(names)
        self._watchdog.arm(self.timeout + _GRACE, "gathering results")
        try:
            tiles = self.comm.gather({n: self.local_tiles(n) for n in names}, root=root)
        finally:
            self._watchdog.disarm()
        if self.rank != root:
            return None
        out = self._assemble(names, tiles)
        return out[names[0]] if single else out

    def allgather(self, names):
        """Full values of the tensors in `names` on every rank. Collective."""
        single = isinstance(names, str)
        names = [names] if single else list(names)
        self._watchdog.arm(self.timeout + _GRACE, "gathering results")
        try:
            tiles = self.comm.allgather({n: self.local_tiles(n) for n in names})
        finally:
            self._watchdog.disarm()
        out = self._assemble(names, tiles)
        return out[names[0]] if single else out

    # ------------------------------------------------------------------ execution
    def _fetch(self, plan: dict):
        MPI = self.MPI
        if not plan["accumulate"] and plan["local"]:
            _core.multifetch(plan["dst"], plan["dst_lo"], plan["local"], False)
        for source, items in plan["gets"].items():
            self.win.Lock(source, MPI.LOCK_SHARED, MPI.MODE_NOCHECK)
            for origin, target in items:
                self.win.Get(origin, source, target=target)
            self.win.Unlock(source)
        if plan["accumulate"]:
            _core.multifetch(plan["dst"], plan["dst_lo"], plan["local"] + plan["staged"], True)

    def run(self, is_train: bool = True, seed: int = 0) -> dict:
        """Runs this rank's schedule for one step; returns its timing stats. Raises Error
        (RankFailure when another rank failed or stopped answering) naming the node and rank."""
        eg, me = self.eg, self.rank
        ops = eg.ops
        base = [self._epoch * u for u in self.units]
        rng = np.random.default_rng(seed + me)
        fetch_seconds = wait_seconds = 0.0
        t_start = time.perf_counter()
        for b, value in self._inputs.items():
            self.views[b][...] = value
        self._publish(base[me] + 1)  # unit 0: inputs loaded
        op_id = None
        try:
            for i, op_id in enumerate(self.schedule):
                op = ops[op_id]
                t0 = time.perf_counter()
                for rank, unit in self.waits[op_id]:
                    self._wait(rank, base[rank] + unit + 1, lambda: self._describe_wait(op_id, rank, unit))
                wait_seconds += time.perf_counter() - t0
                if op["kind"] == "compute":
                    outs = self.runner.run(op, self.views.__getitem__, is_train, rng, seed)
                    for b, value in zip(op["outputs"], outs):
                        np.copyto(self.views[b], value, casting="unsafe")
                else:
                    t0 = time.perf_counter()
                    self._watchdog.arm(self.timeout + _GRACE, f"fetching op {op_id}")
                    try:
                        self._fetch(self.fetches[op_id])
                    finally:
                        self._watchdog.disarm()
                    fetch_seconds += time.perf_counter() - t0
                if op_id in self.publish_after:
                    self._publish(base[me] + i + 2)
            op_id = None
            self._publish(base[me] + self.units[me])
            t0 = time.perf_counter()
            for r in range(self.size):
                self._wait(r, base[r] + self.units[r], lambda: "the end of the step")
            wait_seconds += time.perf_counter() - t0
        except RankFailure as e:
            _abort_at_exit[0] = self
            if e.suspect is not None:
                self._suspects.add(e.suspect)
            if not e.reported:
                self._announce_failure(str(e), e.suspect)
            raise
        except Exception as e:
            _abort_at_exit[0] = self
            where = ""
            if op_id is not None:
                op = ops[op_id]
                name = eg.lowered.node_names[op["node"]] if op["node"] >= 0 else "?"
                where = f" {op['kind']} op {op_id} of node '{name}'"
            msg = str(e) if isinstance(e, Error) else f"{type(e).__name__}: {e}"
            msg = f"rank {me}:{where} failed: {msg}"
            try:
                self._announce_failure(msg)
            finally:
                raise Error(msg) from e
        self._epoch += 1
        return {"step_seconds": time.perf_counter() - t_start, "fetch_seconds": fetch_seconds,
                "wait_seconds": wait_seconds, "rank": me}

    # ------------------------------------------------------------------ across steps
    def _carried(self):
        """(input, its new value) pairs a training step hands to the next: params and optimizer states."""
        tg = self.eg.training
        return list(zip(tg.param_names, tg.updated_names)) + list(zip(tg.state_names, tg.new_state_names))

    def advance(self):
        """Makes the updated params and optimizer states of the step just run the inputs of the
        next step (a local copy where the tiles match, else gathered). Collective."""
        eg, me = self.eg, self.rank
        new, remote = {}, []
        for old, upd in self._carried():
            t_old, t_upd = eg.tensor_id[old], eg.tensor_id[upd]
            # decided on every device's tiles, so that all ranks agree on what to gather
            same = all(eg.core.tile(t_upd, d) >= 0 and not eg.buffers[eg.core.tile(t_upd, d)].get("partial")
                       and (eg.buffers[eg.core.tile(t_upd, d)]["lo"], eg.buffers[eg.core.tile(t_upd, d)]["hi"]) ==
                       (eg.buffers[eg.core.tile(t_old, d)]["lo"], eg.buffers[eg.core.tile(t_old, d)]["hi"])
                       for d in range(eg.devices))
            if not same:
                remote.append((old, upd))
            elif eg.core.tile(t_old, me) in self._inputs:
                new[eg.core.tile(t_old, me)] = np.array(self.views[eg.core.tile(t_upd, me)], copy=True)
        if remote:
            full = self.allgather([u for _, u in remote])
            self.load({old: full[upd] for old, upd in remote}, names=[old for old, _ in remote])
        self._inputs.update(new)
        self.step += 1

    def _checkpoint_names(self) -> List[str]:
        return [old for old, _ in self._carried()]

    def save_checkpoint(self, directory: str) -> str:
        """Writes this rank's shards of the params and optimizer states (the next step's
        inputs) as ``step<N>-rank<R>.params`` (at.nd format) and, from rank 0, the manifest
        ``manifest.json`` (written last, atomically). Collective; returns the manifest path."""
        from .. import ndarray

        eg, me = self.eg, self.rank
        os.makedirs(directory, exist_ok=True)
        fname = f"step{self.step:08d}-rank{me}.params"
        arrays, shards = {}, []
        for name in self._checkpoint_names():
            b = eg.core.tile(eg.tensor_id[name], me)
            if b not in self._inputs or is_extra_replica(eg, name, me):
                continue
            key = f"{name}@{me}"
            arrays[key] = self._inputs[b]
            buf = eg.buffers[b]
            shards.append({"tensor": name, "key": key, "file": fname, "lo": list(buf["lo"]), "hi": list(buf["hi"])})
        tmp = os.path.join(directory, fname + ".tmp")
        ndarray.save(tmp, arrays)
        os.replace(tmp, os.path.join(directory, fname))
        self._watchdog.arm(self.timeout + _GRACE, "writing a checkpoint")
        try:
            everything = self.comm.gather(shards, root=0)
            path = os.path.join(directory, "manifest.json")
            if me == 0:
                low = eg.lowered
                manifest = {
                    "format": "autotile-mpi-checkpoint", "version": 1, "step": self.step, "devices": eg.devices,
                    "exec_hash": self.exec_hash,
                    "tensors": {n: {"shape": list(low.tensor_shapes[eg.tensor_id[n]]),
                                    "dtype": str(self.dtypes[eg.tensor_id[n]])} for n in self._checkpoint_names()},
                    "shards": [s for part in everything for s in part]}
                with open(path + ".tmp", "w") as f:
                    json.dump(manifest, f, indent=1)
                os.replace(path + ".tmp", path)
            self.comm.Barrier()
        finally:
            self._watchdog.disarm()
        for old in os.listdir(directory):  # this rank's shards of earlier checkpoints
            if old.endswith(f"-rank{me}.params") and old != fname:
                os.remove(os.path.join(directory, old))
        return path

    def load_checkpoint(self, directory: str) -> int:
        """Restores params and optimizer states from a checkpoint written by
        :meth:`save_checkpoint` (by any number of ranks, under any plan: every tile is cut from
        the saved shards that cover it). Returns the checkpoint's step."""
        from .. import ndarray

        eg = self.eg
        path = os.path.join(directory, "manifest.json")
        try:
            with open(path) as f:
                manifest = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise Error(f"cannot read checkpoint manifest '{path}': {e}") from None
        if manifest.get("format") != "autotile-mpi-checkpoint":
            raise Error(f"'{path}' is not an autotile MPI checkpoint manifest")
        files = {}
        for name in self._checkpoint_names():
            tid = eg.tensor_id[name]
            info = manifest["tensors"].get(name)
            shape = tuple(eg.lowered.tensor_shapes[tid])
            if info is None or tuple(info["shape"]) != shape:
                raise Error(f"checkpoint '{directory}' does not fit this model: tensor '{name}' has shape {shape}, "
                            f"the checkpoint {'lacks it' if info is None else 'has ' + str(tuple(info['shape']))}")
            b = eg.core.tile(tid, self.rank)
            if b not in self._inputs:
                continue
            lo, hi = eg.buffers[b]["lo"], eg.buffers[b]["hi"]
            region = np.zeros(tuple(h - l for l, h in zip(lo, hi)), dtype=self.dtypes[tid])
            covered = np.zeros(region.shape, dtype=bool)
            for shard in manifest["shards"]:
                if shard["tensor"] != name:
                    continue
                ilo = [max(a, c) for a, c in zip(lo, shard["lo"])]
                ihi = [min(a, c) for a, c in zip(hi, shard["hi"])]
                if any(h <= l for l, h in zip(ilo, ihi)):
                    continue
                if shard["file"] not in files:
                    files[shard["file"]] = ndarray.load(os.path.join(directory, shard["file"]))
                value = files[shard["file"]][shard["key"]]
                region[box_index(ilo, ihi, lo)] = value[box_index(ilo, ihi, shard["lo"])]
                covered[box_index(ilo, ihi, lo)] = True
            if not covered.all():
                raise Error(f"checkpoint '{directory}' does not cover tensor '{name}' in box {tuple(lo)}..{tuple(hi)}")
            self._inputs[b] = region
        self.step = int(manifest["step"])
        return self.step

    def close(self):
        """Frees the windows and datatypes (collective); the arena views die with them."""
        self._watchdog.arm(self.timeout + _GRACE, "freeing the RMA windows")
        try:
            self.win.Free()
            self.fwin.Free()
        finally:
            self._watchdog.disarm()
            self._watchdog.stop()
        for t in self._types:
            t.Free()
        self._types = []
        self.views = {}
        self.fetches = {}
        self.arena = self.flags = None


def run_mpi(sym, devices: int, values: Dict[str, np.ndarray], train: bool = True, optimizer: str = "sgd",
            optimizer_args: Optional[dict] = None, seed: int = 0, plan=None, algorithm: str = "tofu",
            control_deps: bool = True, device_memory: Optional[int] = None, replicate_fallback: bool = False,
            gather: str = "root", timeout: Optional[float] = None, window: str = "allocate",
            strided: str = "subarray", comm=None):
    """One training step with one device per MPI rank (at.backend.run(..., ctx="mpi")).
    Every rank calls it with the same arguments. ``gather``: "root" (rank 0 gets outputs,
    grads and params; other ranks get empty ones), "all" or "none" (stats only)."""
    from .run import Result

    MPI = mpi()
    comm = MPI.COMM_WORLD if comm is None else comm
    if not train:
        raise Error("ctx='mpi' runs training steps (train=True)")
    if optimizer_args:
        raise Error("optimizer_args are not supported with ctx='mpi' yet: the plan uses the optimizer's defaults")
    if gather not in ("root", "all", "none"):
        raise Error(f"gather must be 'root', 'all' or 'none', got {gather!r}")
    if comm.Get_size() != devices:
        raise Error(f"devices={devices} but the MPI world has {comm.Get_size()} rank(s): launch with "
                    f"mpirun -np {devices} (one rank per device)")
    from .multi_device import plan_and_transform

    plan, eg, stats = plan_and_transform(sym, devices, values, plan, algorithm, optimizer, control_deps,
                                         device_memory, replicate_fallback)
    rt = MPIRuntime(eg, comm=comm, timeout=timeout, window=window, strided=strided)
    rt.load(step_inputs(eg, values))
    stats.update(rt.run(is_train=True, seed=seed))
    tg = eg.training
    names = list(tg.output_names) + list(tg.grad_names) + list(tg.updated_names)
    full = {}
    if gather == "root":
        full = rt.gather(names, root=0) or {}
    elif gather == "all":
        full = rt.allgather(names)
    rt.close()
    es = eg.stats()
    stats.update(bytes=es["bytes"], bytes_per_device=es["bytes_per_device"], peak_memory=es["peak_memory"],
                 bytes_received=es["bytes_per_device"][rt.rank], exec_hash=rt.exec_hash)
    if not full:
        return Result(outputs=[], plan=plan, stats=stats)
    return Result(outputs=[full[n] for n in tg.output_names],
                  grads={p: full[g] for p, g in zip(tg.param_names, tg.grad_names)},
                  params={p: full[u] for p, u in zip(tg.param_names, tg.updated_names)}, plan=plan, stats=stats)


def run_cli(sym, inputs: Dict[str, np.ndarray], params: Dict[str, np.ndarray], devices: int, steps: int,
            seed: int = 0, checkpoint: Optional[str] = None, timeout: Optional[float] = None,
            out=sys.stdout) -> int:
    """``autotile run MODEL --devices K --ctx mpi`` under ``mpirun -np K``: plans once, runs
    `steps` training steps keeping params sharded (resuming from and saving to `checkpoint`
    after every step when given); rank 0 prints one line per step."""
    from .. import planner
    from ..execgraph import transform

    MPI = mpi()
    comm = MPI.COMM_WORLD
    if comm.Get_size() != devices:
        raise Error(f"--devices {devices} but the MPI world has {comm.Get_size()} rank(s): launch with "
                    f"mpirun -np {devices} autotile run ... --devices {devices} --ctx mpi")
    from ..autodiff.graph import default_data_names

    shapes = {n: tuple(np.shape(inputs[n])) for n in default_data_names(sym) if n in inputs}
    plan = planner.plan(sym, devices=devices, shapes=shapes)
    eg = transform(sym, plan)
    rt = MPIRuntime(eg, comm=comm, timeout=timeout)
    rt.load(step_inputs(eg, {**params, **inputs}))
    start = 0
    if checkpoint and os.path.exists(os.path.join(checkpoint, "manifest.json")):
        start = rt.load_checkpoint(checkpoint)
        if rt.rank == 0:
            print(f"resumed from {checkpoint} at step {start}", file=out, flush=True)
    out_name = eg.training.output_names[0]
    for step in range(start, steps):
        t0 = time.perf_counter()
        stats = rt.run(is_train=True, seed=seed)
        value = rt.gather(out_name, root=0)
        rt.advance()
        if checkpoint:
            rt.save_checkpoint(checkpoint)
        if rt.rank == 0:
            print(f"step {step + 1}/{steps}: output mean {float(np.mean(value)):.6f}  time "
                  f"{time.perf_counter() - t0:.3f}s  (rank 0: fetch {stats['fetch_seconds']:.3f}s, "
                  f"wait {stats['wait_seconds']:.3f}s)", file=out, flush=True)
    rt.close()
    return 0
