"""``autotile run MODEL``: training (or inference) steps on synthetic inputs, on CPU virtual
devices, GPUs or MPI ranks; prints the loss and time of each step."""
from __future__ import annotations

import time

from ..errors import Error
from .args import (HelpFormatter, Progress, add_dtype_arg, add_init_args, add_quiet_arg, model_args, positive_float,
                   positive_int, seed_arg)
from .models import load_model


def add_loss(sym, args):
    """(`sym` to train, the sentence ``objective:`` prints): --loss attached to the model's
    output (:func:`autotile.losses.attach_loss`, the mean over the batch), else the model's
    own loss, else a cross-entropy on a classifier's logits, else the sum of the outputs."""
    from ..autodiff.objective import has_loss, training_objective

    if args.loss is not None:
        from ..backend.run import with_loss

        sym = with_loss(sym, args.loss, args.label)
        kind, output, label = sym.loss
        return sym, (f"{kind.replace('_', '-')} on output '{output}' against '{label}', the mean over the batch "
                     f"(--loss {kind})")
    if args.label is not None:
        raise Error(f"--label {args.label} names the target of --loss: pass --loss cross_entropy or mse too")
    if has_loss(sym):
        return training_objective(sym)
    sym, objective = training_objective(sym)
    if not has_loss(sym):
        objective += "; pass --loss cross_entropy|mse (with --label NAME) to train a loss"
    return sym, objective


def loss_reader(sym, inputs):
    """A function of a step's outputs giving the loss that step trains: the attached loss
    (:func:`autotile.losses.loss_value`), a SoftmaxOutput's cross-entropy against its labels,
    another loss head's output mean, or, with no loss, the sum of the outputs."""
    import numpy as np

    from ..autodiff.objective import has_loss
    from ..training import softmax_loss

    attached = getattr(sym, "loss", None)
    if attached is not None:
        from ..losses import loss_value

        kind, _, label = attached
        return lambda outs: loss_value(kind, outs[0], inputs[label])
    head = sym.entries[0][0]
    label = head.inputs[1][0].name if head.op == "SoftmaxOutput" and len(head.inputs) > 1 else None
    if label in inputs:
        return lambda outs: softmax_loss(outs[0] if outs[0].ndim > 1 else outs[0].reshape(1, -1), inputs[label])[0]
    if has_loss(sym):
        return lambda outs: float(np.mean(outs[0]))
    return lambda outs: float(sum(np.sum(o, dtype=np.float64) for o in outs))


def step_line(sym, inputs, inference: bool):
    """A function of a step's outputs giving (what, value) for its line: the loss the step
    trains (:func:`loss_reader`), or, for a forward pass of a model without a loss, the mean
    of its first output."""
    import numpy as np

    from ..autodiff.objective import has_loss

    if inference and not has_loss(sym):
        return lambda outs: ("output mean", float(np.mean(outs[0])))
    read = loss_reader(sym, inputs)
    return lambda outs: ("loss", read(outs))


def read_plan(path: str):
    """The Plan in the JSON file `path` (``autotile plan --json``)."""
    from ..planner.plan import Plan

    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise Error(f"--plan: cannot read '{path}': {e.strerror or e}") from None
    return Plan.from_json(text)


def _plan(sym, args, inputs):
    """The plan every step runs with: --plan's file, or one searched under --mesh, --layout
    and --memory for --devices; None for one device without constraints."""
    from .plan import constraint_layout

    layout = constraint_layout(args)
    if args.plan is not None:
        if args.mesh is not None or layout or args.memory is not None:
            raise Error("--plan runs a saved plan as it is: plan with --mesh/--layout/--memory "
                        "(autotile plan ... --json FILE), or leave --plan out")
        plan = read_plan(args.plan)
        source = f"from {args.plan}"
    elif args.devices > 1 or args.mesh is not None or layout or args.memory is not None:
        from .. import planner

        with Progress("search (lowering included)"):
            plan = planner.plan(sym, devices=None if args.mesh is not None else args.devices,
                                shapes={k: v.shape for k, v in inputs.items()}, train=not args.inference,
                                mesh=args.mesh, layout=layout, device_memory=args.memory)
        source = f"search {plan.search_seconds * 1000:.1f} ms"
    else:
        return None
    args.devices = plan.devices
    print(f"plan: {plan.devices} devices, {plan.comm_bytes / 1e6:.1f} MB moved per step ({source})")
    return plan


def cmd_run(args) -> int:
    """Run ``args.steps`` steps of the model and print each step's loss and time."""
    import numpy as np

    from .. import backend
    from ..training import check_finite_loss, sgd_args
    from . import synthetic_inputs  # through the package: tests replace it there

    with Progress("lowering (loading the model)"):
        sym = load_model(args)
    if not args.inference:  # what the steps train, said in one line
        sym, objective = add_loss(sym, args)
        print(f"objective: {objective}")
    elif args.loss is not None:
        raise Error("--loss trains a loss: leave out --inference")
    values = synthetic_inputs(sym, args.seed, init=args.init)
    values.update({k: np.asarray(v) for k, v in sym.params.items() if k in values})  # the model's own weights
    from ..autodiff.graph import default_data_names

    data_names = set(default_data_names(sym))
    params = {k: v for k, v in values.items() if k not in data_names}
    inputs = {k: v for k, v in values.items() if k not in params}
    del values  # the first step's params are params'; each update replaces them (one copy, issue 13)
    batch = next((int(np.shape(v)[0]) for v in inputs.values() if np.ndim(v) > 0), 1)
    opt_args = sgd_args(args.lr, batch, sym) if not args.inference else None  # the mean over the batch
    read_step = step_line(sym, inputs, args.inference)
    if args.dtype != "float32":  # mixed precision: the casts go in once, planned and run as they are
        from ..backend.run import mixed_precision_symbol

        sym = mixed_precision_symbol(sym, args.dtype, args.ctx, {**params, **inputs})
    if args.inference and args.ctx == "mpi":
        raise Error("--inference runs on --ctx cpu or gpu (under mpirun, call at.backend.run(train=False))")
    if args.ctx == "mpi":  # under mpirun -np K: one device per rank, params stay sharded across steps
        from ..backend.mpi_runtime import run_cli

        plan = read_plan(args.plan) if args.plan is not None else None
        return run_cli(sym, inputs, params, devices=args.devices, steps=args.steps, seed=args.seed,
                       checkpoint=args.checkpoint, timeout=args.timeout, optimizer_args=opt_args, plan=plan,
                       loss_of=lambda value: read_step([value])[1])
    plan = _plan(sym, args, inputs)
    states = {}
    for step in range(args.steps):
        t0 = time.perf_counter()
        with Progress(f"step {step + 1} (transform and run)" if step == 0 and plan is not None else f"step {step + 1}"):
            res = backend.run(sym, devices=args.devices, inputs=inputs, params=params, train=not args.inference,
                              ctx=args.ctx, optimizer_args=opt_args, seed=args.seed + step, states=states,
                              **({"plan": plan} if plan is not None else {}))
        params.update(res.params)
        params.update(res.aux)  # BatchNorm statistics and optimizer state carry to the next step
        states = res.states
        what, loss = read_step(res.outputs)
        print(f"step {step + 1}/{args.steps}: {what} {loss:.6f}  time {time.perf_counter() - t0:.3f}s")
        del res  # its gradients would otherwise stay resident through the next step
        if not args.inference:  # stop as `autotile train` does: later steps would only compute NaN
            check_finite_loss(loss, f"step {step + 1}", args.lr)
    return 0


def add_loss_args(sp) -> None:
    """--loss and --label (run and train)."""
    from ..losses import LOSSES

    sp.add_argument("--loss", default=None, choices=LOSSES,
                    help="attach this loss to the model's output (an exported model without one), the mean over "
                         "the batch as torch's: cross_entropy on logits (N, ..., C) against class ids, mse against "
                         "a target of the output's shape")
    sp.add_argument("--label", default=None, metavar="NAME",
                    help="name of the loss's target input (default: label)")


def add_parser(sub) -> None:
    """The ``run`` subcommand."""
    from .plan import add_constraint_args

    sp = sub.add_parser("run", help="run training steps and print loss and timing", formatter_class=HelpFormatter,
                        description="Run training steps of MODEL on synthetic inputs (weights initialised as MXNet "
                                    "does) and print each step's loss and time; the gradient is that of the mean "
                                    "loss over the batch.")
    model_args(sp)
    sp.add_argument("--devices", type=positive_int, default=1, help="devices to partition each step across")
    sp.add_argument("--steps", type=positive_int, default=1, help="training (or inference) steps to run")
    sp.add_argument("--ctx", default="cpu", choices=["cpu", "gpu", "mpi"],
                    help="cpu: NumPy virtual devices; gpu: CuPy; mpi: one device per rank under mpirun")
    sp.add_argument("--seed", type=seed_arg, default=0, help="seed of the synthetic inputs and weights")
    add_dtype_arg(sp)
    sp.add_argument("--inference", action="store_true",
                    help="forward passes only (on --devices K: the forward graph planned and partitioned)")
    add_loss_args(sp)
    add_init_args(sp)
    sp.add_argument("--plan", default=None, metavar="FILE",
                    help="run this saved plan (autotile plan --json FILE) instead of searching one")
    add_constraint_args(sp)
    sp.add_argument("--checkpoint", default=None, help="--ctx mpi: directory to resume from and save to every step")
    sp.add_argument("--timeout", type=positive_float, default=None, help="--ctx mpi: seconds to wait for another rank")
    add_quiet_arg(sp)
    sp.set_defaults(fn=cmd_run)
