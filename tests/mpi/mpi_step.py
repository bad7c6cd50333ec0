"""Run under mpirun: one training step (or with --inference, one partitioned forward pass) of
a test model with ctx="mpi" on every rank; rank 0 (every rank with --gather all) compares
outputs, gradients, updated params, optimizer states and BatchNorm statistics with the
single-device step and prints one JSON line (the test reads it).

    mpirun -np K python tests/mpi/mpi_step.py MODEL [--strided subarray|rows] [--window allocate|create]
                                                    [--inference] [--optimizer momentum]
"""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "execgraph"))

import autotile as at  # noqa: E402
from models import MODELS, assert_same_step, values  # noqa: E402


def mlp_dropout():
    """An MLP with dropout: every rank must drop exactly the single-device units."""
    x = at.sym.Variable("data")
    h = at.sym.FullyConnected(x, num_hidden=16, name="fc1")
    h = at.sym.Activation(h, act_type="relu", name="relu1")
    h = at.sym.Dropout(h, p=0.5, name="drop1")
    h = at.sym.FullyConnected(h, num_hidden=8, name="fc2")
    return at.sym.SoftmaxOutput(h, name="softmax"), {"data": (24, 12), "softmax_label": (24,)}, 8


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", help="a model of tests/execgraph/models.py, or 'dropout'")
    ap.add_argument("--devices", type=int, default=None, help="devices to plan for (default: the world size)")
    ap.add_argument("--strided", default="subarray")
    ap.add_argument("--window", default="allocate")
    ap.add_argument("--algorithm", default="tofu")
    ap.add_argument("--gather", default="root", help="root: rank 0 checks; all: every rank checks")
    ap.add_argument("--algorithm-rank1", default=None, help="plan with another algorithm on rank 1 (mismatch test)")
    ap.add_argument("--inference", action="store_true", help="train=False: the forward graph planned alone")
    ap.add_argument("--optimizer", default="sgd")
    args = ap.parse_args()
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    devices = args.devices or comm.Get_size()
    algorithm = args.algorithm_rank1 if args.algorithm_rank1 and comm.Get_rank() == 1 else args.algorithm
    sym, shapes, classes = mlp_dropout() if args.model == "dropout" else MODELS[args.model]()
    vals = values(sym, shapes, classes)
    inputs = {k: vals[k] for k in shapes}
    params = {k: v for k, v in vals.items() if k not in shapes}
    train = not args.inference
    plan = at.plan(sym, devices=devices, shapes=shapes, algorithm=algorithm, train=train, optimizer=args.optimizer)
    opt = {"optimizer": args.optimizer, "optimizer_args": {"lr": 0.05}} if train else {}
    res = at.backend.run(sym, devices=devices, inputs=inputs, params=params, train=train, ctx="mpi", plan=plan,
                         strided=args.strided, window=args.window, timeout=60, gather=args.gather, seed=3, **opt)
    if comm.Get_rank() != 0 and args.gather == "root":
        assert res.outputs == [] and res.grads == {} and res.params == {} and res.aux == {}
        return 0
    ref = at.backend.run(sym, inputs=inputs, params=params, train=train, seed=3, **opt)
    assert_same_step(res, ref, f"{args.model} on {comm.Get_size()} ranks")
    pairs = list(zip(res.outputs, ref.outputs)) + [(getattr(res, k)[n], v) for k in ("grads", "params", "states", "aux")
                                                   for n, v in getattr(ref, k).items()]
    worst = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b)), initial=0.0)) for a, b in pairs)
    print(json.dumps({"ok": True, "rank": comm.Get_rank(), "model": args.model, "ranks": comm.Get_size(),
                      "max_abs_diff": worst, "train": train,
                      "bytes": res.stats["bytes"], "plan_bytes": plan.comm_bytes,
                      "grads": len(ref.grads), "states": len(ref.states), "aux": len(ref.aux)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
