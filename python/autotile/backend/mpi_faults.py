"""Fault handling of the MPI runtime (autotile.backend.mpi_runtime): the flag window each
rank exposes, progress publishing and polling with timeouts, failure announcements, the
watchdog that bounds blocking MPI calls, and aborting the job at exit after a failure.

Every wait has a timeout (``timeout`` seconds, default 300; env
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
"""
from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from typing import List, Optional

import numpy as np

from ..errors import Error, install_hint

# The flag window of a rank, in int64 words: progress, failed rank + 1, acks, then what this
# rank reports when it fails: the rank it found dead + 1 (0: none), message length, message.
_PROGRESS, _FAILED, _ACKS, _SUSPECT, _MSGLEN, _HEADER = 0, 1, 2, 3, 4, 5
_MESSAGE_BYTES = 2048
DEFAULT_TIMEOUT = 300.0
GRACE = 10.0  # seconds the watchdog adds to the timeout before aborting

# The runtime whose step failed: the process then aborts the MPI job at exit instead of finalizing.
abort_at_exit = [None]
_hook_registered: List[bool] = []
_ACK_WAIT = 5.0  # seconds a failed rank waits at exit for the others to have seen the failure
#: int64 words of a rank's flag window
FLAG_WORDS = _HEADER + _MESSAGE_BYTES // 8


def mpi():
    """The mpi4py MPI module, or an Error saying how to install it."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise Error(f"ctx='mpi' needs mpi4py and an MPI library: {install_hint('mpi')}, "
                    f"or see docs/mpi.md for a system MPI ({e})") from None
    if not _hook_registered:
        # registered after mpi4py's own exit handler, so it runs before MPI is finalized
        atexit.register(_exit_hook)
        _hook_registered.append(True)
    return MPI


def _exit_hook():
    rt = abort_at_exit[0]
    if rt is not None:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
            rt._exit_barrier(_ACK_WAIT)
        except BaseException as e:  # abort anyway
            sys.stderr.write(f"autotile: rank {rt.rank}: {type(e).__name__} while waiting for the other ranks: {e}\n")
        finally:
            mpi().COMM_WORLD.Abort(1)


class RankFailure(Error):
    """Another rank failed (or stopped answering) during a step. `reported`: another rank
    said so (False when this rank noticed a peer stopped answering, and tells the others)."""

    def __init__(self, message: str, reported: bool = True, suspect: Optional[int] = None):
        super().__init__(message)
        self.reported = reported
        self.suspect = suspect  # the rank that stopped answering


class Watchdog:
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


class FaultProtocol:
    """The flag-window half of :class:`MPIRuntime`: publishing progress, waiting for peers'
    progress with a timeout, and telling every rank that one failed. Needs ``MPI``, ``rank``,
    ``size``, ``win`` (the arena window), ``fwin`` (the flag window), ``timeout``,
    ``_watchdog``, ``_suspects``, ``_seen``, ``_epoch`` and ``units`` on the runtime."""

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
        words = FLAG_WORDS
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
        self._watchdog.arm(self.timeout + GRACE, "telling the other ranks this rank failed")
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
        self._watchdog.arm(seconds + GRACE, "waiting for the other ranks to see the failure")
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
                self._watchdog.arm(self.timeout + GRACE, f"waiting for rank {rank} ({what})")
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
