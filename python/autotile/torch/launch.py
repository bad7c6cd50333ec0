"""Run a function on ``n`` local processes joined in one ``torch.distributed`` gloo group: what
the tests and ``bench/engines_torch`` use to run a plan on 8 CPU processes of one host.
Across hosts (or for GPUs with nccl) use ``torchrun`` instead (docs/layouts.md)."""
from __future__ import annotations

import math
import numbers
import os
import re
import signal
import socket
import time
import traceback
from typing import Any, Callable, List

from ..errors import Error


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, nprocs, port, fn, args, conn, threads, quiet):
    import pickle

    import torch
    import torch.distributed as dist

    torch.set_num_threads(threads)
    if quiet:  # DTensor's per-redistribution advice and gloo's all-to-all fallback notice, once per rank
        import logging

        for name in ("torch.distributed", "torch._logging"):
            logging.getLogger(name).setLevel(logging.ERROR)
        import warnings

        # CommDebugMode's module tracker hooks every module's backward; the inputs need no gradient
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(nprocs))
    if os.path.exists("/sys/class/net/lo"):  # gloo on the loopback device, whatever the host name resolves to
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    try:
        dist.init_process_group("gloo", rank=rank, world_size=nprocs)
        # every rank connected before any starts (a rank returning at once and leaving broke
        # the others' connection set-up: 'connectFullMesh failed')
        dist.barrier()
        result = fn(rank, *args)
        try:  # plain pickle: a tensor through multiprocessing's shared memory dies with this process
            blob = pickle.dumps(result)
        except Exception as e:
            raise TypeError(f"the result of {getattr(fn, '__name__', 'fn')} on rank {rank} cannot be "
                            f"pickled: {e}") from None
        conn.send((True, blob))
    except BaseException as e:  # the parent reports it with the rank; leave at once (no teardown)
        conn.send((False, (f"{type(e).__name__}: {e}", traceback.format_exc())))
        os._exit(1)
    try:  # the others may still be reading this rank's last messages
        dist.barrier()
        dist.destroy_process_group()
    except BaseException:
        pass


#: what a rank raises when another rank's process went away under a collective
_PEER_GONE = re.compile(r"Connection (closed|reset) by peer|connectFullMesh failed|Broken pipe|"
                        r"DistNetworkError|DistBackendError|Socket Timeout|Connection refused")


def _check_args(fn, nprocs, timeout, threads, start_method):
    import multiprocessing as mp

    if not callable(fn):
        raise Error(f"run_local: fn must be callable (fn(rank, *args)), got {type(fn).__name__}")
    if isinstance(nprocs, bool) or not isinstance(nprocs, numbers.Integral) or nprocs < 1:
        raise Error(f"run_local: nprocs must be a positive integer (the number of ranks), got {nprocs!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not math.isfinite(timeout) \
            or timeout <= 0:
        raise Error(f"run_local: timeout must be a positive number of seconds, got {timeout!r}")
    if isinstance(threads, bool) or not isinstance(threads, numbers.Integral) or threads < 1:
        raise Error(f"run_local: threads must be a positive integer (torch threads per rank), got {threads!r}")
    if start_method not in mp.get_all_start_methods():
        raise Error(f"run_local: start_method must be one of {mp.get_all_start_methods()}, got {start_method!r}")


def _death(code) -> str:
    if code is None:
        return "was still running"
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code} without returning" if code else "exited without returning a result"


def run_local(fn: Callable, nprocs: int, *args, timeout: float = 600, threads: int = 1,
              start_method: str = "fork", quiet: bool = True) -> List[Any]:
    """``[fn(rank, *args) for each rank]``, run on `nprocs` processes that have joined one
    gloo process group (``MASTER_ADDR`` 127.0.0.1 on a free port). ``fork`` (the default)
    starts them from this process's state: no re-import of torch, and `fn` may be a closure.
    Results travel pickled (tensors included).

    A failure is an :class:`autotile.Error` naming the rank at fault and what happened to it:
    the exception it raised (with its traceback), the exit code it left with, the signal that
    killed it (a segfault: SIGSEGV). Ranks that only failed because that one went away under
    a collective (gloo's "connection closed by peer") are listed after it, not blamed. Ranks
    that return nothing within `timeout` seconds of their start are stopped and named; the
    call returns within about a second of `timeout` (after torch's one-time imports).
    `quiet` keeps ``torch.distributed``'s warnings out of each rank's log."""
    import multiprocessing as mp
    import pickle
    from multiprocessing.connection import wait

    _check_args(fn, nprocs, timeout, threads, start_method)
    # imported once here rather than in each forked process (distribute_tensor imports dynamo)
    import torch._dynamo  # noqa: F401
    import torch.distributed.tensor  # noqa: F401

    deadline = time.monotonic() + timeout  # from the ranks' start (after that one-time import)

    ctx = mp.get_context(start_method)
    port = _free_port()
    # one pipe per rank, its write end held by that rank alone (made and closed here around its
    # start, so no later rank inherits it): a rank that dies mid-message (killed at the deadline,
    # by the OOM killer) is an end of file on its pipe, not a read that waits forever
    procs, readers = [], {}
    for r in range(nprocs):
        reader, writer = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_worker, args=(r, nprocs, port, fn, args, writer, threads, quiet), daemon=True)
        try:
            p.start()
        except Exception as e:  # spawn / forkserver pickle fn and args
            reader.close()
            for q in procs:
                q.kill()
                q.join()
            _close(readers)
            raise Error(f"run_local: cannot start rank {r} with start_method={start_method!r}: {type(e).__name__}: "
                        f"{e} (fork, the default, takes closures; spawn and forkserver need fn and args that "
                        f"pickle: a module-level function)") from None
        finally:
            writer.close()
        procs.append(p)
        readers[reader] = r
    results: dict = {}
    raised: dict = {}  # rank -> (exception line, traceback)

    def drain(timeout=0.0):
        for c in wait(list(readers), timeout) if readers else ():
            r = readers.pop(c)
            try:
                ok, value = c.recv()
            except (EOFError, OSError):  # it left without a (whole) message: reported by its exit
                continue
            finally:
                c.close()
            (results if ok else raised)[r] = value

    try:
        while True:
            drain(0.02)
            heard = set(results) | set(raised)
            gone = {r for r, p in enumerate(procs) if r not in heard and not p.is_alive()}
            if len(heard) + len(gone) == nprocs:
                break
            if (raised or gone) and deadline > time.monotonic() + 2:
                deadline = time.monotonic() + 2  # the others may wait for it in a collective: 2 s to report
            if time.monotonic() >= deadline:
                break
            if not readers:
                time.sleep(0.02)
        stopped = []  # ranks still running at the deadline, reported or not
        for r, p in enumerate(procs):  # the ranks that reported leave at once (teardown only)
            p.join(timeout=max(0.05, min(2.0, deadline - time.monotonic())))
            if p.is_alive():
                stopped.append(r)
                p.kill()
                p.join()
        drain()  # every rank has exited: what is left on a pipe is whole or an end of file
    finally:  # an interrupt (KeyboardInterrupt) stops the ranks too
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
        _close(readers)
    if len(results) == nprocs:
        return [pickle.loads(results[r]) for r in range(nprocs)]
    stopped = [r for r in stopped if r not in results and r not in raised]
    raise Error(_failure_report(nprocs, timeout, results, raised, [p.exitcode for p in procs], stopped))


def _close(connections) -> None:
    for c in list(connections):
        c.close()


def _failure_report(nprocs, timeout, results, raised, codes, stopped) -> str:
    """The message of a failed run_local: the ranks at fault first, then those that failed
    only because a peer went away, then those stopped at the timeout."""
    own, echo, dead = {}, {}, {}
    for r in range(nprocs):
        if r in raised:
            (echo if _PEER_GONE.search(raised[r][1]) else own)[r] = raised[r]
        elif r not in results and r not in stopped:
            dead[r] = _death(codes[r])
    lines, detail = [], ""
    for r in sorted(set(own) | set(dead)):
        lines.append(f"rank {r} of {nprocs} raised {own[r][0]}" if r in own else f"rank {r} of {nprocs} {dead[r]}")
    if stopped:
        which = f"rank {stopped[0]}" if len(stopped) == 1 else f"ranks {', '.join(map(str, stopped))}"
        if lines or echo:  # stopped 2 s after another rank failed, not at the timeout
            lines.append(f"{which} of {nprocs} still running 2 s after that (stopped)")
        else:
            lines.append(f"{which} of {nprocs} returned nothing within {timeout:g} s (stopped)")
    if lines and echo:
        lines.append(f"then failed in a collective (a peer went away): rank{'s' if len(echo) > 1 else ''} "
                     f"{', '.join(map(str, sorted(echo)))}: {echo[min(echo)][0].splitlines()[0][:200]}")
    elif echo:  # no rank at fault to show: the network (or gloo) itself
        lines += [f"rank {r} of {nprocs} raised {echo[r][0]}" for r in sorted(echo)]
    for r in sorted(own) or ([] if dead or stopped else sorted(echo)[:1]):
        detail += f"\n--- rank {r}:\n{(own.get(r) or echo[r])[1]}"
    return "\n".join(lines) + detail
