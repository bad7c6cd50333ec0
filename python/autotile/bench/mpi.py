"""The MPI runtime (ctx="mpi") against the in-process runtime, and MultiFetch over RMA.

1. VGG-16 (small batch and image so it runs in minutes on a laptop): one training step on
   K MPI ranks (one device per rank) against the in-process host runtime on K virtual
   devices: median step time, time in fetches and in waits, bytes received per rank. Ranks
   run with MultiFetch pieces as subarray datatypes or as contiguous rows, on windows from
   MPI.Win.Allocate or MPI.Win.Create.
2. Bandwidth on loopback between two ranks: a MultiFetch piece fetched with passive-target
   Gets (Lock/Get/Unlock, the runtime's own piece_gets) — contiguous, and strided (half the
   columns of a tile) as subarray datatypes or rows — against MPI_Send/MPI_Recv of the same
   bytes; the target either waits inside MPI or sleeps in Python (as a rank does while its
   kernels run), which is what separates Win.Allocate from Win.Create.

    autotile bench mpi [--quick] [--ranks 4] [--batch 8] [--image 32] [--repeat 3]

Launches itself under mpirun (MPICH or Open MPI; every launch under a timeout); prints
tables and writes bench/out/mpi.json.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

import numpy as np

from .common import random_step_values, table, write_json

#: the directory holding the autotile package these ranks import (a checkout's python/ or site-packages)
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

LAUNCH_TIMEOUT = 900


def vgg_problem(batch, image):
    import autotile as at

    sym = at.models.vgg(16, batch=batch, classes=10, image=image)
    vals, shapes = random_step_values(sym)
    return sym, vals, shapes


def exec_graph(sym, shapes, devices):
    import autotile as at
    from autotile.execgraph import transform

    return transform(sym, at.plan(sym, devices=devices, shapes=shapes))


# ---------------------------------------------------------------------------- workers (under mpirun)
def worker_vgg(args):
    from mpi4py import MPI

    from autotile.backend.mpi_runtime import MPIRuntime
    from autotile.backend.tiles import step_inputs

    comm = MPI.COMM_WORLD
    sym, vals, shapes = vgg_problem(args.batch, args.image)
    eg = exec_graph(sym, shapes, comm.Get_size())
    rt = MPIRuntime(eg, window=args.window, strided=args.strided)
    rt.load(step_inputs(eg, vals))
    rt.run()  # warm-up
    steps = []
    for _ in range(args.repeat):
        comm.Barrier()
        t0 = time.perf_counter()
        s = rt.run()
        comm.Barrier()
        steps.append({"wall": time.perf_counter() - t0, "fetch": s["fetch_seconds"], "wait": s["wait_seconds"]})
    loss = rt.gather(eg.training.output_names[0], root=0)
    rt.close()
    everyone = comm.gather(steps, root=0)
    if comm.Get_rank() == 0:
        print("RESULT " + json.dumps({
            "window": args.window, "strided": args.strided, "ranks": comm.Get_size(),
            "step_seconds": statistics.median(s["wall"] for s in everyone[0]),
            "fetch_seconds": [statistics.median(s["fetch"] for s in r) for r in everyone],
            "wait_seconds": [statistics.median(s["wait"] for s in r) for r in everyone],
            "bytes_per_rank": eg.stats()["bytes_per_device"], "bytes": eg.stats()["bytes"],
            "output_sum": float(np.sum(loss))}), flush=True)


def worker_bandwidth(args):
    """Rank 0 fetches from rank 1 (Gets) or receives from it (Send/Recv)."""
    from mpi4py import MPI

    from autotile.backend.mpi_runtime import piece_gets

    comm = MPI.COMM_WORLD
    me = comm.Get_rank()
    rows_of = [2 ** p for p in args.row_powers]
    cols = 1024  # float32: 4 KB per row
    results = []
    for window in ("allocate", "create"):
        for target_mode in ("in-mpi", "sleeping"):
            for rows in rows_of:
                nbytes = rows * cols * 4
                if window == "allocate":
                    win = MPI.Win.Allocate(nbytes, 1, comm=comm)
                    tile = np.frombuffer(win.tomemory(), dtype=np.float32)[:rows * cols].reshape(rows, cols)
                else:
                    tile = np.zeros((rows, cols), np.float32)
                    win = MPI.Win.Create(tile, 1, comm=comm)
                tile[...] = me + 1
                comm.Barrier()
                reps = max(3, min(200, (64 << 20) // nbytes))
                if me == 0:
                    for kind, sub, start, strided in [
                            ("contiguous", (rows // 2, cols), (rows // 2, 0), "subarray"),
                            ("strided/subarray", (rows, cols // 2), (0, cols // 2), "subarray"),
                            ("strided/rows", (rows, cols // 2), (0, cols // 2), "rows")]:
                        dst = np.zeros(sub, np.float32)
                        items, types = piece_gets(MPI, np.float32, (rows, cols), 0, start, sub,
                                                  dst.reshape(-1).view(np.uint8), sub, (0, 0), strided)
                        times = []
                        for _ in range(reps):
                            t0 = time.perf_counter()
                            win.Lock(1, MPI.LOCK_SHARED, MPI.MODE_NOCHECK)
                            for origin, target in items:
                                win.Get(origin, 1, target=target)
                            win.Unlock(1)
                            times.append(time.perf_counter() - t0)
                        assert np.all(dst == 2.0)
                        for t in types:
                            t.Free()
                        moved = dst.nbytes
                        results.append({"window": window, "target": target_mode, "kind": "get " + kind,
                                        "bytes": moved, "seconds": statistics.median(times),
                                        "gb_per_s": moved / statistics.median(times) / 1e9})
                    comm.send("done", dest=1)
                else:
                    req = comm.irecv(source=0)
                    while not req.Test():
                        if target_mode == "sleeping":
                            time.sleep(0.001)  # a rank busy in Python/NumPy, outside MPI
                comm.Barrier()
                win.Free()
                # Send/Recv of the bytes a Get moved (half the tile, contiguous)
                if window == "allocate" and target_mode == "in-mpi":
                    half = rows // 2 * cols
                    buf = np.full(half, me + 1, np.float32)
                    times = []
                    for _ in range(reps):
                        comm.Barrier()
                        t0 = time.perf_counter()
                        if me == 0:
                            comm.Recv(buf, source=1)
                        else:
                            comm.Send(buf, dest=0)
                        times.append(time.perf_counter() - t0)
                    if me == 0:
                        assert np.all(buf == 2.0)
                        results.append({"window": "-", "target": "in-mpi", "kind": "send/recv", "bytes": buf.nbytes,
                                        "seconds": statistics.median(times),
                                        "gb_per_s": buf.nbytes / statistics.median(times) / 1e9})
    if me == 0:
        print("RESULT " + json.dumps(results), flush=True)


# ---------------------------------------------------------------------------- driver
def mpirun_cmd():
    exe = shutil.which("mpirun") or shutil.which("mpiexec")
    if exe is None:
        sys.exit("bench/mpi.py needs mpirun (pip install 'autotile[mpi]', docs/mpi.md)")
    version = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
    return [exe] + (["--oversubscribe"] if "Open MPI" in version else [])


def launch(ranks, worker_args):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    env["PYTHONPATH"] = PACKAGE_PARENT + os.pathsep + env.get("PYTHONPATH", "")
    cmd = mpirun_cmd() + ["-np", str(ranks), sys.executable, "-m", "autotile.bench.mpi"] + worker_args
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=LAUNCH_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        sys.exit(f"timed out: {' '.join(cmd)}")
    for line in out.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    sys.exit(f"no result from {' '.join(cmd)} (exit {proc.returncode}):\n{out[-3000:]}")


def in_process(args):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from autotile.backend.host_runtime import HostRuntime
    from autotile.backend.tiles import step_inputs

    sym, vals, shapes = vgg_problem(args.batch, args.image)
    eg = exec_graph(sym, shapes, args.ranks)
    rt = HostRuntime(eg)
    rt.load(step_inputs(eg, vals))
    rt.run()
    runs = [rt.run() for _ in range(args.repeat)]
    return {"step_seconds": statistics.median(r["step_seconds"] for r in runs),
            "fetch_seconds": [statistics.median(r["fetch_seconds"][d] for r in runs) for d in range(args.ranks)],
            "bytes_per_rank": eg.stats()["bytes_per_device"], "bytes": eg.stats()["bytes"],
            "output_sum": float(np.sum(rt.gather(eg.training.output_names[0])))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", choices=["vgg", "bandwidth"], default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--image", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--window", default="allocate")
    ap.add_argument("--strided", default="subarray")
    ap.add_argument("--row-powers", type=int, nargs="*", default=[1, 4, 8, 12])
    args = ap.parse_args()
    if args.worker == "vgg":
        return worker_vgg(args)
    if args.worker == "bandwidth":
        return worker_bandwidth(args)
    if args.quick:
        args.repeat, args.row_powers = 1, [1, 6, 10]
    common = ["--batch", str(args.batch), "--image", str(args.image), "--repeat", str(args.repeat)]
    host = in_process(args)
    rows = [("in-process", "-", "-", host["step_seconds"], max(host["fetch_seconds"]), "-",
             max(host["bytes_per_rank"]) / 1e6)]
    mpi_runs = []
    for window, strided in [("allocate", "subarray"), ("allocate", "rows"), ("create", "subarray")]:
        r = launch(args.ranks, ["--worker", "vgg", "--window", window, "--strided", strided] + common)
        assert abs(r["output_sum"] - host["output_sum"]) <= 1e-3 * max(1.0, abs(host["output_sum"])), (r, host)
        mpi_runs.append(r)
        rows.append((f"mpi x{args.ranks}", window, strided, r["step_seconds"], max(r["fetch_seconds"]),
                     max(r["wait_seconds"]), max(r["bytes_per_rank"]) / 1e6))
    print(f"VGG-16 training step, batch {args.batch}, image {args.image}, {args.ranks} devices "
          f"({host['bytes'] / 1e6:.1f} MB moved in all; per rank: "
          f"{', '.join(f'{b / 1e6:.2f}' for b in host['bytes_per_rank'])} MB)")
    print(table(["runtime", "window", "pieces", "step s", "max fetch s", "max wait s", "max MB/rank"], rows))
    bw = launch(2, ["--worker", "bandwidth", "--row-powers", *map(str, args.row_powers)])
    print("\nMultiFetch piece over RMA vs MPI_Send/Recv, 2 ranks on this machine")
    print(table(["window", "target", "transfer", "KB", "us", "GB/s"],
                [(b["window"], b["target"], b["kind"], b["bytes"] / 1024, b["seconds"] * 1e6, b["gb_per_s"])
                 for b in bw]))
    path = write_json("mpi.json", {"vgg16": {"batch": args.batch, "image": args.image, "ranks": args.ranks,
                                             "in_process": host, "mpi": mpi_runs},
                                   "bandwidth": bw})
    print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()
