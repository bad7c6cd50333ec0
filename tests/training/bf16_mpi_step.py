"""Run under mpirun (tests/training/test_bf16_mpi.py): one bfloat16 (or float16) training
step of the test MLP / BatchNorm CNN with ctx="mpi" on every rank; rank 0 compares it with
the same step on one device of the host runtime and prints one JSON line.

    mpirun -np K python tests/training/bf16_mpi_step.py mlp|cnn [--dtype bfloat16|float16]
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import autotile as at  # noqa: E402
from test_bf16 import bn_cnn, rel, step_args, tanh_mlp  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=["mlp", "cnn"])
    ap.add_argument("--dtype", default="bfloat16")
    args = ap.parse_args()
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    sym = tanh_mlp() if args.model == "mlp" else bn_cnn()
    kw = step_args(sym)
    res = at.backend.run(sym, comm.Get_size(), ctx="mpi", dtype=args.dtype, **kw)
    if comm.Get_rank() != 0:
        return
    one = at.backend.run(sym, 1, dtype=args.dtype, **kw)
    f32 = at.backend.run(sym, 1, **kw)
    print(json.dumps({
        "grads": max(rel(res.grads[n], one.grads[n]) for n in one.grads),
        "params": max(rel(res.params[n], one.params[n]) for n in one.params),
        "outputs": rel(res.outputs[0], one.outputs[0]),
        "aux": max([rel(res.aux[n], one.aux[n]) for n in one.aux] or [0.0]),
        "vs_float32": max(rel(one.grads[n], f32.grads[n]) for n in one.grads),
        "dtypes": sorted({str(v.dtype) for v in (*res.params.values(), *res.grads.values(), *res.aux.values())}),
    }), flush=True)


if __name__ == "__main__":
    main()
