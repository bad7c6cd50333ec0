"""Run under mpirun: N training steps with params, optimizer states and BatchNorm statistics
kept sharded between steps (MPIRuntime.advance), optionally saving a checkpoint after step S
or resuming from one (possibly written by another number of ranks); rank 0 compares the last
step's outputs, updated params, optimizer states and BatchNorm statistics with N
single-device steps (each fed the last one's) and prints one JSON line.

    mpirun -np K python tests/mpi/mpi_steps.py MODEL --steps N [--optimizer momentum]
                                               [--save-at S --ckpt DIR] [--resume DIR]
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
    ap.add_argument("--optimizer", default="sgd")
    args = ap.parse_args()
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    sym, shapes, classes = MODELS[args.model]()
    vals = values(sym, shapes, classes)
    inputs = {k: vals[k] for k in shapes}
    params = {k: v for k, v in vals.items() if k not in shapes}
    plan = at.plan(sym, devices=comm.Get_size(), shapes=shapes, optimizer=args.optimizer)
    eg = transform(sym, plan, optimizer_args={"lr": 0.05})
    rt = MPIRuntime(eg, timeout=60)
    rt.load(step_inputs(eg, vals))
    first = rt.load_checkpoint(args.resume) if args.resume else 0
    for step in range(first, args.steps):
        rt.run()
        rt.advance()
        if args.save_at == step + 1:
            rt.save_checkpoint(args.ckpt)
    tg = eg.training
    got = rt.gather(list(tg.output_names) + list(tg.updated_names) + list(tg.new_state_names), root=0)
    # a training step's BatchNorm kernels rewrite every channel: the starting values do not show
    aux = rt.gather_aux(vals, root=0)
    rt.close()
    if comm.Get_rank() != 0:
        return 0
    states = {}
    for _ in range(args.steps):
        ref = at.backend.run(sym, inputs=inputs, params=params, train=True, optimizer=args.optimizer,
                             optimizer_args={"lr": 0.05}, states=states)
        params, states = {**params, **ref.params, **ref.aux}, ref.states
    for name, want in zip(tg.output_names, ref.outputs):
        np.testing.assert_allclose(got[name], want, rtol=1e-4, atol=1e-5, err_msg=f"output {name}")
    for p, u in zip(tg.param_names, tg.updated_names):
        np.testing.assert_allclose(got[u], ref.params[p], rtol=1e-4, atol=1e-5, err_msg=f"param {p}")
    for s, n in zip(tg.state_names, tg.new_state_names):
        np.testing.assert_allclose(got[n], ref.states[s], rtol=1e-4, atol=1e-5, err_msg=f"optimizer state {s}")
    assert sorted(aux) == sorted(ref.aux)
    for a in ref.aux:  # carried between steps (and through the checkpoint) as the params are
        np.testing.assert_allclose(aux[a], ref.aux[a], rtol=1e-4, atol=1e-6, err_msg=f"aux {a}")
    print(json.dumps({"ok": True, "ranks": comm.Get_size(), "first_step": first, "steps": args.steps,
                      "step_after": rt.step}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
