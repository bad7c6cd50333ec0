"""Run a function on ``n`` local processes joined in one ``torch.distributed`` gloo group: what
the tests and ``bench/engines_torch`` use to run a plan on 8 CPU processes of one host.
Across hosts (or for GPUs with nccl) use ``torchrun`` instead (docs/layouts.md)."""
from __future__ import annotations

import os
import socket
import time
import traceback
from typing import Any, Callable, List

from ..errors import Error


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, nprocs, port, fn, args, queue, threads, quiet):
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
        try:
            result = fn(rank, *args)
        finally:
            dist.destroy_process_group()
        queue.put((rank, True, result))
    except BaseException:  # the parent reports it with the rank
        queue.put((rank, False, traceback.format_exc()))


def run_local(fn: Callable, nprocs: int, *args, timeout: float = 600, threads: int = 1,
              start_method: str = "fork", quiet: bool = True) -> List[Any]:
    """``[fn(rank, *args) for each rank]``, run on `nprocs` processes that have joined one
    gloo process group (``MASTER_ADDR`` 127.0.0.1 on a free port). ``fork`` (the default)
    starts them from this process's state: no re-import of torch, and `fn` may be a closure.
    An exception on any rank is an :class:`autotile.Error` carrying its traceback; ranks
    that return nothing within `timeout` seconds are stopped and named. `quiet` keeps
    ``torch.distributed``'s warnings out of each rank's log."""
    import multiprocessing as mp

    # imported once here rather than in each forked process (distribute_tensor imports dynamo)
    import torch._dynamo  # noqa: F401
    import torch.distributed.tensor  # noqa: F401

    ctx = mp.get_context(start_method)
    queue = ctx.SimpleQueue()
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, nprocs, port, fn, args, queue, threads, quiet), daemon=True)
             for r in range(nprocs)]
    for p in procs:
        p.start()
    results: dict = {}
    failed = []
    deadline = time.monotonic() + timeout
    while len(results) + len(failed) < nprocs and time.monotonic() < deadline:
        if queue.empty():
            if not any(p.is_alive() for p in procs) and queue.empty():
                break
            time.sleep(0.02)
            continue
        rank, ok, value = queue.get()
        if ok:
            results[rank] = value
        else:  # the other ranks may wait for it in a collective: a few seconds, then stop
            failed.append((rank, value))
            deadline = min(deadline, time.monotonic() + 3)
    for p in procs:
        p.join(timeout=0.5 if failed else 5)
        if p.is_alive():
            p.kill()
            p.join()
    if failed:
        rank, text = sorted(failed)[0]
        raise Error(f"rank {rank} of {nprocs} failed:\n{text}")
    if len(results) < nprocs:
        missing = sorted(set(range(nprocs)) - set(results))
        raise Error(f"ranks {missing} of {nprocs} returned nothing within {timeout:.0f} s "
                    f"(exit codes {[p.exitcode for p in procs]})")
    return [results[r] for r in range(nprocs)]
