"""``autotile run MODEL``: training (or inference) steps on synthetic inputs, on CPU virtual
devices, GPUs or MPI ranks; prints the loss and time of each step."""
from __future__ import annotations

import time

from ..errors import Error
from .args import (Progress, add_dtype_arg, add_init_args, load_model, model_args, positive_float, positive_int,
                   seed_arg)


def cmd_run(args) -> int:
    """Run ``args.steps`` steps of the model and print each step's loss and time."""
    import numpy as np

    from .. import backend
    from ..training import check_finite_loss, sgd_args, softmax_loss
    from . import synthetic_inputs  # through the package: tests replace it there

    sym = load_model(args)
    if not args.inference:  # a model without a loss (an exported classifier) gets one, and we say which
        from ..autodiff.objective import has_loss, training_objective

        if not has_loss(sym):
            sym, objective = training_objective(sym)
            print(f"objective: {objective}")
    values = synthetic_inputs(sym, args.seed, init=args.init)
    values.update({k: np.asarray(v) for k, v in sym.params.items() if k in values})  # the model's own weights
    from ..autodiff.graph import default_data_names

    data_names = set(default_data_names(sym))
    params = {k: v for k, v in values.items() if k not in data_names}
    inputs = {k: v for k, v in values.items() if k not in params}
    del values  # the first step's params are params'; each update replaces them (one copy, issue 13)
    if args.dtype != "float32":  # mixed precision: the casts go in once, planned and run as they are
        from ..backend.run import mixed_precision_symbol

        sym = mixed_precision_symbol(sym, args.dtype, args.ctx, {**params, **inputs})
    if args.inference and args.ctx == "mpi":
        raise Error("--inference runs on --ctx cpu or gpu (under mpirun, call at.backend.run(train=False))")
    batch = next((int(np.shape(v)[0]) for v in inputs.values() if np.ndim(v) > 0), 1)
    opt_args = sgd_args(args.lr, batch) if not args.inference else None
    if args.ctx == "mpi":  # under mpirun -np K: one device per rank, params stay sharded across steps
        from ..backend.mpi_runtime import run_cli

        return run_cli(sym, inputs, params, devices=args.devices, steps=args.steps, seed=args.seed,
                       checkpoint=args.checkpoint, timeout=args.timeout, optimizer_args=opt_args)
    plan = None
    if args.devices > 1:  # plan once, run every step with it
        from .. import planner

        with Progress("planning"):
            plan = planner.plan(sym, devices=args.devices, shapes={k: v.shape for k, v in inputs.items()},
                                train=not args.inference)
        print(f"plan: {args.devices} devices, {plan.comm_bytes / 1e6:.1f} MB moved per step "
              f"(search {plan.search_seconds * 1000:.1f} ms)")
    head = sym.entries[0][0]
    label = next((k for k in inputs if k.endswith("label")), None)
    states = {}
    for step in range(args.steps):
        t0 = time.perf_counter()
        res = backend.run(sym, devices=args.devices, inputs=inputs, params=params, train=not args.inference,
                          ctx=args.ctx, optimizer_args=opt_args, seed=args.seed + step, states=states,
                          **({"plan": plan} if plan is not None else {}))
        params.update(res.params)
        params.update(res.aux)  # BatchNorm statistics and optimizer state carry to the next step
        states = res.states
        out = res.outputs[0]
        if head.op == "SoftmaxOutput" and label is not None:
            loss, what = softmax_loss(out if out.ndim > 1 else out.reshape(1, -1), inputs[label])[0], "loss"
        else:
            loss, what = float(np.mean(out)), "output mean"
        print(f"step {step + 1}/{args.steps}: {what} {loss:.6f}  time {time.perf_counter() - t0:.3f}s")
        del res, out  # its gradients would otherwise stay resident through the next step
        if not args.inference:  # stop as `autotile train` does: later steps would only compute NaN
            check_finite_loss(loss, f"step {step + 1}", args.lr)
    return 0


def add_parser(sub) -> None:
    """The ``run`` subcommand."""
    sp = sub.add_parser("run", help="run training steps and print loss and timing")
    model_args(sp)
    sp.add_argument("--devices", type=positive_int, default=1)
    sp.add_argument("--steps", type=positive_int, default=1)
    sp.add_argument("--ctx", default="cpu", choices=["cpu", "gpu", "mpi"])
    sp.add_argument("--seed", type=seed_arg, default=0)
    add_dtype_arg(sp)
    sp.add_argument("--inference", action="store_true",
                    help="forward passes only (on --devices K: the forward graph planned and partitioned)")
    add_init_args(sp)
    sp.add_argument("--checkpoint", default=None, help="--ctx mpi: directory to resume from and save to every step")
    sp.add_argument("--timeout", type=positive_float, default=None, help="--ctx mpi: seconds to wait for another rank")
    sp.set_defaults(fn=cmd_run)
