"""Run under mpirun: a training step in which rank RANK fails at its AT-th compute op, by
raising (--fault raise), by being killed with SIGKILL (--fault kill) or by stopping
(SIGSTOP: a hung rank that the launcher does not notice, --fault stop), or stops after the
step, when the others are in the collective that gathers results (--fault stop-in-gather:
their watchdog must abort the job). Every rank that gets an error prints
'RANK r ERROR: message' on stdout and exits non-zero.

    mpirun -np K python tests/mpi/mpi_fault.py MODEL --fault raise|kill|stop [--rank 1] [--at 3] [--timeout 5]
"""
import argparse
import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "execgraph"))

import autotile as at  # noqa: E402
from autotile.backend import sub_op  # noqa: E402
from models import MODELS, values  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--fault", choices=["raise", "kill", "stop", "stop-in-gather"], required=True)
    ap.add_argument("--rank", type=int, default=1)
    ap.add_argument("--at", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=5.0)
    args = ap.parse_args()
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    me = comm.Get_rank()
    if me == args.rank:
        original = sub_op.SubOpRunner.run
        count = [0]

        def faulty(self, op, view, is_train, rng, *rest):
            count[0] += 1
            if count[0] == args.at:
                if args.fault in ("kill", "stop"):
                    print(f"RANK {me} {'KILLING' if args.fault == 'kill' else 'STOPPING'} ITSELF", flush=True)
                    os.kill(os.getpid(), signal.SIGKILL if args.fault == "kill" else signal.SIGSTOP)
                    time.sleep(600)
                raise RuntimeError("injected fault")
            return original(self, op, view, is_train, rng, *rest)

        if args.fault == "stop-in-gather":
            from autotile.backend.mpi_runtime import MPIRuntime

            def stop(self, *a, **k):
                print(f"RANK {me} STOPPING ITSELF IN GATHER", flush=True)
                os.kill(os.getpid(), signal.SIGSTOP)

            MPIRuntime.gather = stop
        else:
            sub_op.SubOpRunner.run = faulty
    sym, shapes, classes = MODELS[args.model]()
    vals = values(sym, shapes, classes)
    try:
        at.backend.run(sym, devices=comm.Get_size(), inputs={k: vals[k] for k in shapes},
                       params={k: v for k, v in vals.items() if k not in shapes}, train=True, ctx="mpi",
                       timeout=args.timeout)
    except at.Error as e:
        print(f"RANK {me} ERROR: {e}", flush=True)
        return 1
    print(f"RANK {me} FINISHED", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
