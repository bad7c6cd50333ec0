"""Run under mpirun: N training steps with params kept sharded between steps
(MPIRuntime.advance), optionally saving a checkpoint after step S or resuming from one
(possibly written by another number of ranks); rank 0 compares the last step's outputs and
updated params with N single-device steps and prints one JSON line.

    mpirun -np K python tests/mpi/mpi_steps.py MODEL --steps N [--save-at S --ckpt DIR] [--resume DIR]
"""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "execgraph"))

import autotile as at  # noqa: E402
from autotile.backend.mpi_runtime import MPIRuntime  # noqa: E402
from autotile.backend.tiles import step_inputs  # noqa: E402
from autotile.execgraph import transform  # noqa: E402
from models import MODELS, values  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--save-at", type=int, default=None)
    ap.add_argument("--ckpt", default=None)
    ap.add_argument("--resume", default=None)
    args = ap.parse_args()
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    sym, shapes, classes = MODELS[args.model]()
    vals = values(sym, shapes, classes)
    inputs = {k: vals[k] for k in shapes}
    params = {k: v for k, v in vals.items() if k not in shapes}
    plan = at.plan(sym, devices=comm.Get_size(), shapes=shapes)
    eg = transform(sym, plan)
    rt = MPIRuntime(eg, timeout=60)
    rt.load(step_inputs(eg, vals))
    first = rt.load_checkpoint(args.resume) if args.resume else 0
    for step in range(first, args.steps):
        rt.run()
        rt.advance()
        if args.save_at == step + 1:
            rt.save_checkpoint(args.ckpt)
    tg = eg.training
    got = rt.gather(list(tg.output_names) + list(tg.updated_names), root=0)
    rt.close()
    if comm.Get_rank() != 0:
        return 0
    for _ in range(args.steps):
        ref = at.backend.run(sym, inputs=inputs, params=params, train=True)
        params = {**params, **ref.params}
    for name, want in zip(tg.output_names, ref.outputs):
        np.testing.assert_allclose(got[name], want, rtol=1e-4, atol=1e-5, err_msg=f"output {name}")
    for p, u in zip(tg.param_names, tg.updated_names):
        np.testing.assert_allclose(got[u], ref.params[p], rtol=1e-4, atol=1e-5, err_msg=f"param {p}")
    print(json.dumps({"ok": True, "ranks": comm.Get_size(), "first_step": first, "steps": args.steps,
                      "step_after": rt.step}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
