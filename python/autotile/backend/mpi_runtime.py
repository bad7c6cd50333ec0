"""MPI runtime: the execution graph run as MPI ranks, one device per rank, MultiFetch over
one-sided RMA (mpi4py; ``pip install 'autotile[mpi]'``, see docs/mpi.md).

Launch with ``mpirun -np K python script.py`` (script calling
``at.backend.run(..., devices=K, ctx="mpi")``) or ``mpirun -np K autotile run MODEL
--devices K --ctx mpi``. Every rank plans and transforms the same model itself (planning
and transformation are deterministic); at start the ranks check that the world size equals
the devices and compare a hash of their ExecGraph (JSON, schedules, arena sizes), and refuse
to run, naming the ranks that differ, on a mismatch. Each rank then runs only its own
schedule (``eg.schedule(rank)``, with the swap-outs and swap-ins of a swapped plan inline:
:func:`rank_schedule`; its host buffers -- swapped-out copies, and the inputs and results a
swap plan keeps in host memory -- live in a host pool beside the arena window).


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


Results. :func:`run_mpi` gathers outputs, gradients, updated params, optimizer states and
BatchNorm statistics to rank 0 (``gather="root"``), to every rank (``"all"``) or not at all
(``"none"``: fetch them with :meth:`MPIRuntime.gather`, :meth:`MPIRuntime.allgather`,
:meth:`MPIRuntime.gather_aux` or :meth:`MPIRuntime.local_tiles`). With ``train=False`` it
runs partitioned inference (the forward graph planned alone). :meth:`MPIRuntime.advance`
carries updated params, optimizer states and BatchNorm statistics into the next step's
inputs without leaving the ranks.

The runtime's other concerns live beside it: the RMA windows and the Gets of a fetch in
:mod:`autotile.backend.mpi_rma`, progress flags, timeouts, failure announcements and the
watchdog in :mod:`autotile.backend.mpi_faults`, checkpoints (each rank's shards in the at.nd
format plus a JSON manifest, loadable on any number of ranks) in
:mod:`autotile.backend.mpi_checkpoint`.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from typing import Dict, List, Optional

import numpy as np

from ..errors import Error
from .mpi_checkpoint import Checkpoints
from .mpi_faults import DEFAULT_TIMEOUT, GRACE, FaultProtocol, RankFailure, Watchdog, abort_at_exit, mpi
from .mpi_rma import RMAWindows, piece_gets  # noqa: F401  (piece_gets: bench/mpi.py)
from .sub_op import SubOpRunner
from .tiles import box_index, input_tiles, is_extra_replica, overlap, step_inputs


def check_timeout(timeout, env=None) -> float:
    """Seconds to wait for another rank: `timeout`, else $AUTOTILE_MPI_TIMEOUT, else
    DEFAULT_TIMEOUT; Error naming the one given unless it is a positive finite number (-1 or
    nan would make every wait time out, or none)."""
    import math
    import numbers

    env = os.environ if env is None else env
    what, value = "timeout", timeout
    if timeout is None:
        text = env.get("AUTOTILE_MPI_TIMEOUT")
        if text is None:
            return float(DEFAULT_TIMEOUT)
        what = "AUTOTILE_MPI_TIMEOUT"
        try:
            value = float(text)
        except ValueError:
            value = text
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise Error(f"{what} must be a positive finite number of seconds, got {value!r}")
    return float(value)


def rank_schedule(eg, device: int) -> List[int]:
    """The ops one rank runs, in order: its compute schedule merged with its copy schedule (the
    swap-outs and swap-ins of a swapped plan, exec/swap_plan.h), which a rank runs inline. Each
    stream keeps its order; the earlier op on the memory clock goes first, and an op waits
    until its dependencies on this device have run (every rank merges the same way)."""
    streams = [list(eg.schedule(device)), list(eg.core.copy_schedule(device))]
    if not streams[1]:
        return streams[0]
    ops = eg.ops
    done, order, pos = set(), [], [0, 0]

    def ready(i):
        return all(d in done or ops[d]["device"] != device for d in ops[i]["deps"])

    while pos[0] < len(streams[0]) or pos[1] < len(streams[1]):
        heads = [(ops[streams[k][pos[k]]]["time"], k) for k in (0, 1) if pos[k] < len(streams[k])]
        for _, k in sorted(heads):
            i = streams[k][pos[k]]
            if ready(i):
                order.append(i)
                done.add(i)
                pos[k] += 1
                break
        else:
            stuck = [streams[k][pos[k]] for _, k in heads]
            raise Error(f"device {device}: its compute and copy schedules wait on each other (ops {stuck})")
    return order


def exec_graph_hash(eg) -> str:
    """SHA-256 of what every rank must agree on: the ExecGraph's JSON (ops, deps, pieces,
    buffers and their arena offsets), each device's schedule and arena size."""
    h = hashlib.sha256(eg.to_json().encode())
    for d in range(eg.devices):
        h.update(json.dumps([list(eg.schedule(d)), int(eg.core.arena_bytes[d])]).encode())
    return h.hexdigest()



class MPIRuntime(FaultProtocol, RMAWindows, Checkpoints):
    """Runs this rank's part of an ExecGraph; the ranks of `comm` are the devices."""

    def __init__(self, eg, comm=None, timeout: Optional[float] = None, window: str = "allocate",
                 strided: str = "subarray"):
        MPI = mpi()
        self.MPI = MPI
        self.eg = eg
        self.comm = MPI.COMM_WORLD if comm is None else comm
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self.timeout = check_timeout(timeout)
        if window not in ("allocate", "create"):
            raise Error(f"window must be 'allocate' or 'create', got {window!r}")
        if strided not in ("subarray", "rows"):
            raise Error(f"strided must be 'subarray' or 'rows', got {strided!r}")
        self.strided = strided
        if self.size != eg.devices:
            raise Error(f"the MPI world has {self.size} rank(s) but the plan is for {eg.devices} devices: "
                        f"launch with mpirun -np {eg.devices} (one rank per device) or plan for {self.size} devices")
        self._watchdog = Watchdog(self.rank, self.comm)
        self.exec_hash = exec_graph_hash(eg)
        self._watchdog.arm(self.timeout + GRACE, "comparing execution graphs across ranks")
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
        # a swapped plan's swap ops run inline, between the rank's compute and fetch ops
        self.schedules = [rank_schedule(eg, d) for d in range(self.size)]
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

        self._watchdog.arm(self.timeout + GRACE, "creating the RMA windows")  # collective
        self._open_windows(max(int(eg.core.arena_bytes[self.rank]), 8), window)
        self._watchdog.disarm()

        # where a swapped plan's tensors wait (exec/swap_plan.h): swapped-out copies, inputs
        # loaded there before the step, results that stay there (the tiles gathered)
        self.host_pool = np.zeros(max(int(eg.core.host_bytes[self.rank]), 1), dtype=np.uint8)
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
        memory = self.host_pool if b.get("host") else self.arena
        return memory[b["offset"]: b["offset"] + count * dtype.itemsize].view(dtype).reshape(shape)

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


    # ------------------------------------------------------------------ data in / out
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
        self._watchdog.arm(self.timeout + GRACE, "gathering results")
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
        self._watchdog.arm(self.timeout + GRACE, "gathering results")
        try:
            tiles = self.comm.allgather({n: self.local_tiles(n) for n in names})
        finally:
            self._watchdog.disarm()
        out = self._assemble(names, tiles)
        return out[names[0]] if single else out

    def _gather_aux(self, all_ranks: bool, root: int = 0):
        """Every rank's new auxiliary-state boxes of the step just run, as one list (on `root`
        only unless `all_ranks`; None elsewhere). Collective."""
        self._watchdog.arm(self.timeout + GRACE, "gathering BatchNorm statistics")
        try:
            mine = self.runner.updated_aux()
            parts = self.comm.allgather(mine) if all_ranks else self.comm.gather(mine, root=root)
        finally:
            self._watchdog.disarm()
        return None if parts is None else [u for part in parts for u in part]

    def gather_aux(self, values: Dict[str, np.ndarray], root: int = 0) -> Optional[Dict[str, np.ndarray]]:
        """The auxiliary states (BatchNorm moving statistics) after the step just run, in full,
        on rank `root` (None on the others): `values` holds them before the step. Collective."""
        from .multi_device import assemble_aux

        updates = self._gather_aux(False, root)
        return None if updates is None else assemble_aux(self.eg, updates, values)

    def allgather_aux(self, values: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        """:meth:`gather_aux` on every rank. Collective."""
        from .multi_device import assemble_aux

        return assemble_aux(self.eg, self._gather_aux(True), values)

    # ------------------------------------------------------------------ execution
    def run(self, is_train: bool = True, seed: int = 0) -> dict:
        """Runs this rank's schedule for one step; returns its timing stats. Raises Error
        (RankFailure when another rank failed or stopped answering) naming the node and rank."""
        eg, me = self.eg, self.rank
        ops = eg.ops
        base = [self._epoch * u for u in self.units]
        rng = np.random.default_rng(seed + me)
        fetch_seconds = wait_seconds = 0.0
        t_start = time.perf_counter()
        self.runner.aux_updates.clear()
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
                elif op["kind"] in ("swap_out", "swap_in"):  # between the arena and the host pool
                    self.views[op["outputs"][0]][...] = self.views[op["pieces"][0][0]]
                else:
                    t0 = time.perf_counter()
                    self._watchdog.arm(self.timeout + GRACE, f"fetching op {op_id}")
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
            abort_at_exit[0] = self
            if e.suspect is not None:
                self._suspects.add(e.suspect)
            if not e.reported:
                self._announce_failure(str(e), e.suspect)
            raise
        except Exception as e:
            abort_at_exit[0] = self
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
        """Makes the updated params, optimizer states and BatchNorm statistics of the step just
        run the inputs of the next step (a local copy where the tiles match, else gathered).
        Collective."""
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
        if any(a in eg.tensor_id for a in eg.training.aux_names):
            self._advance_aux()
        self.step += 1

    def _advance_aux(self):
        """This rank's input tiles of the auxiliary states take the boxes every rank's kernels
        rewrote this step (BatchNorm statistics). Collective."""
        updates = self._gather_aux(True)
        for (name, lo, hi, value) in updates:
            b = self.eg.core.tile(self.eg.tensor_id[name], self.rank)
            if b not in self._inputs:
                continue
            buf = self.eg.buffers[b]
            box = overlap(buf["lo"], buf["hi"], lo, hi)
            if box is not None:
                self._inputs[b][box_index(*box, buf["lo"])] = value[box_index(*box, lo)]

    def close(self):
        """Frees the windows and datatypes (collective); the arena views die with them."""
        self._watchdog.arm(self.timeout + GRACE, "freeing the RMA windows")
        try:
            self._free_windows()
        finally:
            self._watchdog.disarm()
            self._watchdog.stop()
        self.views = {}
        self.fetches = {}


def run_mpi(sym, devices: int, values: Dict[str, np.ndarray], train: bool = True, optimizer: str = "sgd",
            optimizer_args: Optional[dict] = None, seed: int = 0, plan=None, algorithm: str = "tofu",
            control_deps: bool = True, device_memory: Optional[int] = None, replicate_fallback: bool = False,
            gather: str = "root", timeout: Optional[float] = None, window: str = "allocate",
            strided: str = "subarray", comm=None):
    """One step with one device per MPI rank (at.backend.run(..., ctx="mpi")): a training
    step, or partitioned inference with ``train=False``. Every rank calls it with the same
    arguments. ``gather``: "root" (rank 0 gets outputs, grads, params, optimizer states and
    aux; other ranks get empty ones), "all" or "none" (stats only)."""
    from .multi_device import exec_stats, plan_and_transform, result_names, step_result
    from .result import Result

    MPI = mpi()
    comm = MPI.COMM_WORLD if comm is None else comm
    if gather not in ("root", "all", "none"):
        raise Error(f"gather must be 'root', 'all' or 'none', got {gather!r}")
    if comm.Get_size() != devices:
        raise Error(f"devices={devices} but the MPI world has {comm.Get_size()} rank(s): launch with "
                    f"mpirun -np {devices} (one rank per device)")
    plan, eg, stats = plan_and_transform(sym, devices, values, plan, algorithm, optimizer, control_deps,
                                         device_memory, replicate_fallback, train, optimizer_args)
    rt = MPIRuntime(eg, comm=comm, timeout=timeout, window=window, strided=strided)
    inputs = step_inputs(eg, values)
    rt.load(inputs)
    stats.update(rt.run(is_train=train, seed=seed))
    full, aux = {}, None
    if gather == "root":
        full = rt.gather(result_names(eg), root=0) or {}
        aux = rt.gather_aux(inputs, root=0)
    elif gather == "all":
        full = rt.allgather(result_names(eg))
        aux = rt.allgather_aux(inputs)
    rt.close()
    exec_stats(eg, stats)
    stats.update(bytes_received=stats["bytes_per_device"][rt.rank], exec_hash=rt.exec_hash)
    if aux is None:
        return Result(outputs=[], plan=plan, stats=stats)
    return step_result(eg, full, aux, plan, stats)


def run_cli(sym, inputs: Dict[str, np.ndarray], params: Dict[str, np.ndarray], devices: int, steps: int,
            seed: int = 0, checkpoint: Optional[str] = None, timeout: Optional[float] = None,
            out=sys.stdout, optimizer_args: Optional[dict] = None, plan=None, loss_of=None) -> int:
    """``autotile run MODEL --devices K --ctx mpi`` under ``mpirun -np K``: plans once (or
    runs `plan`), runs `steps` training steps keeping params sharded (resuming from and saving
    to `checkpoint` after every step when given), the SGD update set by `optimizer_args`;
    rank 0 prints one line per step: ``loss_of(first output)`` as the loss, else the first
    output's mean."""
    from .. import planner
    from ..execgraph import transform

    MPI = mpi()
    comm = MPI.COMM_WORLD
    if comm.Get_size() != devices:
        raise Error(f"--devices {devices} but the MPI world has {comm.Get_size()} rank(s): launch with "
                    f"mpirun -np {devices} autotile run ... --devices {devices} --ctx mpi")
    from ..autodiff.graph import default_data_names

    shapes = {n: tuple(np.shape(inputs[n])) for n in default_data_names(sym) if n in inputs}
    timeout = check_timeout(timeout)  # before planning: a bad --timeout is the user's at once
    plan = plan if plan is not None else planner.plan(sym, devices=devices, shapes=shapes)
    eg = transform(sym, plan, optimizer_args=optimizer_args)
    try:
        return _run_steps(eg, comm, inputs, params, steps, seed, checkpoint, timeout, out, loss_of)
    except MemoryError as e:  # NumPy's "Unable to allocate ...": this rank's share does not fit
        raise Error(_out_of_memory(eg, comm.Get_rank(), e)) from None
    except MPI.Exception as e:  # MPI_Win_allocate's "Out of memory"
        if "out of memory" not in str(e).lower():
            raise
        raise Error(_out_of_memory(eg, comm.Get_rank(), str(e).strip().splitlines()[-1])) from None


def _out_of_memory(eg, rank: int, what) -> str:
    """One line for a rank that ran out of host memory: how much its plan needs, what to change."""
    from ..planner.plan import _fmt_bytes

    need = int(eg.core.arena_bytes[rank]) + int(eg.core.host_bytes[rank])
    return (f"rank {rank}: out of memory ({what}); its share of the {eg.devices}-device plan takes "
            f"{_fmt_bytes(need)} besides the inputs and parameters it loads: launch on more ranks "
            f"(mpirun -np K ... --devices K) or with a smaller --batch")


def _run_steps(eg, comm, inputs, params, steps, seed, checkpoint, timeout, out, loss_of=None) -> int:
    """run_cli's steps on this rank (one MPIRuntime, its windows freed at the end)."""
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
            what = f"loss {loss_of(value):.6f}" if loss_of else f"output mean {float(np.mean(value)):.6f}"
            print(f"step {step + 1}/{steps}: {what}  time "
                  f"{time.perf_counter() - t0:.3f}s  (rank 0: fetch {stats['fetch_seconds']:.3f}s, "
                  f"wait {stats['wait_seconds']:.3f}s)", file=out, flush=True)
    rt.close()
    return 0
