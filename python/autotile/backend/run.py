"""``autotile.backend.run``: one inference or training step of a model."""
from __future__ import annotations

import logging
import time
from typing import Dict, Optional

import numpy as np

from ..arguments import cast_inputs, check_arrays, check_plan, check_seed
from ..errors import Error
from ..model_input import as_symbol
from ..symbol.infer import infer_entry_shapes
from .reference import execute
from .result import Result
from .training_step import training_step

_LOG = logging.getLogger("autotile")


def _check_inputs(sym, values: Dict[str, np.ndarray]):
    names = set(sym.list_inputs())
    unknown = sorted(set(values) - names)
    if unknown:
        raise Error(f"inputs {unknown} are not inputs of the model (inputs: {sorted(names)[:30]})")
    missing = [n for n in sym.list_inputs() if n not in values]
    if missing:
        raise Error(f"missing inputs {missing}: pass them in inputs= or params=")
    shapes = {k: tuple(np.shape(v)) for k, v in values.items()}
    infer_entry_shapes(sym, shapes)  # raises Error naming the node on a mismatch


def _head_grad_values(sym, head_grads, train: bool) -> Dict[str, np.ndarray]:
    """Head gradients as the training step's ``{output}_head_grad`` inputs."""
    if not train:
        raise Error("head_grads are only used with train=True")
    outputs = sym.list_outputs()
    if isinstance(head_grads, dict):
        unknown = sorted(set(head_grads) - set(outputs))
        if unknown:
            raise Error(f"head_grads for {unknown}, which are not outputs of the model (outputs: {outputs})")
        items = list(head_grads.items())
    else:
        head_grads = list(head_grads)
        if len(head_grads) != len(outputs):
            raise Error(f"head_grads has {len(head_grads)} arrays for {len(outputs)} outputs {outputs}")
        items = list(zip(outputs, head_grads))
    return {f"{name}_head_grad": np.asarray(g) for name, g in items if g is not None}


def _state_values(sym, optimizer: str, states, train: bool) -> Dict[str, np.ndarray]:
    """Optimizer states to start a training step from, checked against the optimizer's
    state names (``{param}_{suffix}``)."""
    if not states:
        return {}
    if not train:
        raise Error("states= are optimizer states: they are only used with train=True")
    from ..autodiff.optimizers import optimizer_spec

    suffixes = optimizer_spec(optimizer).states
    known = {f"{a}_{suffix}" for a in sym.list_arguments() for suffix in suffixes}
    unknown = sorted(set(states) - known)
    if unknown:
        raise Error(f"states {unknown[:10]} are not optimizer states of '{optimizer}' for this model "
                    f"(its states are named {{param}}_{{{','.join(suffixes) or 'none'}}})")
    return {k: np.asarray(v) for k, v in states.items()}


def mixed_precision_symbol(sym, dtype: str, ctx: str = "cpu", values: Optional[Dict[str, np.ndarray]] = None,
                           shapes: Optional[Dict[str, tuple]] = None, loss_scale: float = 1.0):
    """`sym` with the casts of mixed precision in `dtype` (:func:`autotile.autodiff.autocast`;
    `sym` itself for float32), after checking the dtype and that the runtime `ctx` runs it.
    values (or shapes): the step's inputs, for the shapes of the weights the casts read;
    loss_scale: multiplies the loss heads' gradients (see :func:`run`)."""
    from ..dtype_flags import LOW_PRECISION

    if dtype in (None, "float32"):
        return sym
    if dtype not in LOW_PRECISION:
        raise Error(f"dtype='{dtype}' is not supported: use one of {', '.join(('float32',) + LOW_PRECISION)}")
    if ctx not in ("cpu", "mpi"):
        raise Error(f"dtype='{dtype}' runs on the host and MPI runtimes (ctx='cpu' or 'mpi') so far, not "
                    f"ctx='{ctx}' (docs/mixed-precision.md)")
    from ..autodiff.mixed_precision import autocast

    values = values or {}
    return autocast(sym, dtype, {k: v.dtype.name for k, v in values.items() if v.dtype.kind in "iub"},
                    {**{k: tuple(v.shape) for k, v in values.items()}, **(shapes or {})}, loss_scale)


#: Static loss scale of ``dtype="float16"`` training (a power of two: scaling is exact).
FLOAT16_LOSS_SCALE = 1024.0


def run(model, devices: int = 1, inputs: Optional[Dict[str, np.ndarray]] = None,
        params: Optional[Dict[str, np.ndarray]] = None, aux: Optional[Dict[str, np.ndarray]] = None,
        train: bool = False, optimizer: str = "sgd", optimizer_args: Optional[dict] = None,
        batch: Optional[int] = None, seed: int = 0, ctx: str = "cpu", head_grads=None,
        states: Optional[Dict[str, np.ndarray]] = None, trainable=None, dtype: str = "float32",
        loss_scale: Optional[float] = None, loss: Optional[str] = None, label: Optional[str] = None,
        **kwargs) -> Result:
    """Run one step of `model` (Symbol, model path or zoo name).

    loss: ``"cross_entropy"`` or ``"mse"`` attaches that loss to the model's output
    (:func:`autotile.losses.attach_loss`; a model with several outputs takes the first), with
    the target as the new input `label` (default ``"label"``; its values in `inputs`, or
    synthetic when inputs are left out). Gradient convention (the one of ``autotile run`` and
    ``autotile train`` too): the step trains the **mean** of the loss over the batch, as
    torch's losses do by default (``reduction="mean"``): cross-entropy averaged over every
    labelled position (a language model's batch x positions), mse over every element, so
    ``res.grads`` are the gradients of that mean and the update is ``lr * res.grads``. A model
    that brings its own MXNet loss head keeps that head's meaning in ``res.grads``:
    ``SoftmaxOutput(normalization="batch")`` is a mean, MXNet's default ``"null"`` and the
    regression outputs sum over the batch; for those, pass
    ``optimizer_args=at.training.sgd_args(lr, batch, sym)`` (rescale_grad = 1/batch, as MXNet's
    Module and the CLI do) for the update of the mean. A model with no loss head at all trains
    the sum of its outputs (head gradients of ones).

    inputs: data (and label) arrays by name; params: weights by name (defaults to the model's
    own ``sym.params``; an MXNet checkpoint dict with ``arg:``/``aux:`` names is split); aux:
    auxiliary states (BatchNorm statistics).
    Left out, both are made as ``autotile run --seed`` makes them (the same arrays for the same
    `seed`), so ``run(at.models.get("mlp-digits"), devices=8)`` runs as it is: with no params, the
    weights and states missing from ``sym.params`` are initialised as MXNet does (Xavier uniform,
    factor 'avg', magnitude 3 weights; biases, BatchNorm beta and mean 0, gamma and variance 1;
    :mod:`autotile.training_init`); with no inputs, the data are synthetic, of the shapes the
    model declares (``batch`` replaces the first dim): standard normal, labels class ids
    below the output's width. ``res.stats["initialized"]`` and ``res.stats["synthetic_inputs"]``
    give what was made ({name: shape}) and one warning on the ``autotile`` logger says so; an
    input whose shape cannot be inferred is an Error naming it. A params= or inputs= that is
    given is taken as complete: a name missing from it is an Error, not made up.
    With ``train=True`` the step runs forward, backward and the optimizer update and returns
    gradients, updated params, the new optimizer states (``res.states``) and auxiliary
    states (``res.aux``); feed them to the next step as ``params=res.params``, ``states=res.states``, ``aux=res.aux`` (optimizer
    states start at zero when not given). ``optimizer_args`` (``lr``, ``momentum``, ``wd``...)
    set the update. ``head_grads``
    (training only; a list in ``list_outputs()`` order or a dict by output name) are the
    gradients of non-loss outputs, as MXNet's ``backward(out_grads)``; they default to ones.
    ``devices`` > 1 runs the partitioned execution graph: of the training step, or with
    ``train=False`` of the forward graph alone (partitioned inference, planned as such).
    ``ctx`` is "cpu" (NumPy) or "gpu" (CuPy; workers placed on the visible GPUs, docs/gpu.md)
    or "mpi" (one device per MPI rank under ``mpirun -np devices``, docs/mpi.md). ``trainable``
    (an ``.onnx`` path only) names the initializers to train, as :func:`autotile.onnx.load`.
    ``dtype="bfloat16"`` runs the step in mixed precision (docs/mixed-precision.md): compute
    in bfloat16 (:func:`autotile.autodiff.autocast` inserts the casts), float32 master weights,
    optimizer states, loss and BatchNorm statistics, partial sums reduced in float32; params,
    gradients and states come back float32. Host runtime (ctx="cpu") only so far.
    ``dtype="float16"`` the same in float16 with static loss scaling: the loss gradient is
    multiplied by ``loss_scale`` (default :data:`FLOAT16_LOSS_SCALE`; 1 for bfloat16, whose
    range is float32's) and the float32 weight gradients divided by it before the update
    (``res.grads`` are unscaled); a gradient that overflowed float16 is an Error naming the
    parameter and the scale, never a silent update."""
    if ctx not in ("cpu", "gpu", "mpi"):
        raise Error(f"ctx='{ctx}' is not available: the runtime runs on ctx='cpu', 'gpu' or 'mpi'")
    sym = as_symbol(model, batch=batch, trainable=trainable)
    if loss is not None:
        sym = with_loss(sym, loss, label, inputs)
    elif label is not None:
        raise Error(f"label={label!r} names the target of a loss: pass loss='cross_entropy' or 'mse' too")
    if not isinstance(devices, int) or isinstance(devices, bool) or devices < 1:
        raise Error(f"devices must be a positive integer, got {devices!r}")
    seed = check_seed(seed)
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or batch < 1):
        raise Error(f"batch must be a positive integer, got {batch!r}")
    inputs, aux, states = (check_arrays(inputs, "inputs"), check_arrays(aux, "aux"), check_arrays(states, "states"))
    if kwargs.get("plan") is not None:
        check_plan_graph(check_plan(kwargs["plan"]), sym)
    params_given = params
    given = {**(check_arrays(params, "params") or {}), **(aux or {}), **(inputs or {})}
    params = dict(sym.params if params is None else params)
    if any(isinstance(k, str) and k.startswith(("arg:", "aux:")) for k in params):
        from ..ndarray import split_params  # an MXNet checkpoint dict (at.nd.load)

        params, ckpt_aux = split_params(params)
        aux = {**ckpt_aux, **(aux or {})}
    values = {**{k: np.asarray(v) for k, v in params.items()}, **{k: np.asarray(v) for k, v in (aux or {}).items()},
              **{k: np.asarray(v) for k, v in (inputs or {}).items()}}
    known = set(sym.list_inputs())
    # An imported model's own tensor names work too: mapped to the Symbol's names, and graph
    # inputs the computation does not use (e.g. an RNN's R for one step from a zero state) ignored.
    onnx_names = getattr(sym, "onnx_names", None) or {}
    values = {onnx_names.get(k, k) if k not in known else k: v for k, v in values.items()}
    given = {k: v for k, v in given.items() if k not in onnx_names or k in known}
    # a misspelled name would otherwise be dropped silently and the model's own value used
    unknown = sorted(k for k in given if k not in known and not k.startswith(("arg:", "aux:")))
    if unknown:
        raise Error(f"params/aux/inputs name {unknown[:10]}, which are not inputs of the model "
                    f"(its inputs: {sorted(known)[:30]})")
    values = {k: v for k, v in values.items() if k in known}
    made, initialized = {}, []
    if params_given is None or inputs is None:  # the CLI's starting point: see _made_inputs
        made, initialized = _made_inputs(sym, values, params_given is None, inputs is None, batch, seed)
        values.update(made)
        params.update({k: made[k] for k in initialized})  # weights made here are weights to train
    values = cast_inputs(sym, values)
    state_values = _state_values(sym, optimizer, states, train)
    head_values = _head_grad_values(sym, head_grads, train) if head_grads is not None else {}
    scale = _loss_scale(dtype, loss_scale, train)
    sym = mixed_precision_symbol(sym, dtype, ctx, values, loss_scale=scale)
    if scale != 1.0:  # the update reads the scaled gradient: it unscales it in float32
        optimizer_args = {**(optimizer_args or {}),
                          "rescale_grad": float((optimizer_args or {}).get("rescale_grad", 1.0)) / scale}
    res = _run_step(sym, devices, values, head_values, state_values, params, train, optimizer, optimizer_args,
                    seed, ctx, kwargs)
    if made:
        res.stats["initialized"] = {k: tuple(made[k].shape) for k in initialized}
        res.stats["synthetic_inputs"] = {k: tuple(v.shape) for k, v in made.items() if k not in set(initialized)}
    return _unscale(res, scale) if scale != 1.0 else res


def check_plan_graph(plan, sym) -> None:
    """Error when `plan` was made for another graph: it trains parameters that are not inputs
    of `sym`, or `sym` has inputs it does not tile (checked before the training graph is
    built, whose shape errors would name a node, not the plan)."""
    arguments = sym.list_arguments()
    model = f" ({plan.model})" if getattr(plan, "model", None) else ""
    extra = [n for n in plan.param_names if n not in set(arguments)]
    if extra:
        raise Error(f"plan was made for another graph{model}: it tiles tensors {extra[:5]}, which this graph "
                    f"does not have")
    missing = [n for n in arguments if n not in plan.tensor_tilings]
    if missing:
        raise Error(f"plan was made for another graph{model}: this graph's inputs {missing[:5]} are not in it")


def with_loss(sym, loss: str, label: Optional[str], inputs=None):
    """`sym` with `loss` attached to its first output (:func:`autotile.losses.attach_loss`),
    the target input named `label` (default ``"label"``); `inputs` (arrays by name, the
    model's own ONNX names too) size the model when its variables do not declare shapes."""
    from ..losses import attach_loss

    onnx_names = getattr(sym, "onnx_names", None) or {}
    shapes = {onnx_names.get(k, k): tuple(np.shape(v)) for k, v in (inputs or {}).items()}
    label = "label" if label is None else label
    shapes.pop(label, None)  # the target is checked against the output's shape after the attach
    # attach_loss marks the target as data whatever its name (never a weight to train)
    return attach_loss(sym, loss, output=0 if len(sym.entries) > 1 else None, label=label, shapes=shapes)


def _with_declared_shapes(sym, shapes: Dict[str, tuple]):
    """A copy of `sym`'s graph whose variables declare `shapes` (``__shape__``); the same
    nodes in the same order, so the CLI's generator walks it exactly as it walks `sym`."""
    from ..ops.registry import format_value
    from ..symbol.symbol import Node, Symbol

    copies = {}
    for n in sym.topo_nodes():
        attrs = dict(n.attrs)
        if n.is_variable and n.name in shapes:
            attrs["__shape__"] = format_value(tuple(shapes[n.name]))
        copies[id(n)] = Node(n.op, n.name, attrs, [(copies[id(src)], i) for src, i in n.inputs])
    return Symbol([(copies[id(src)], i) for src, i in sym.entries])


def _made_inputs(sym, values: Dict[str, np.ndarray], make_params: bool, make_data: bool, batch, seed: int):
    """The inputs `run` makes when params= or inputs= is left out, as ``autotile run`` makes
    them (:func:`autotile.cli.synthetic_inputs`, the one generator, so the same `seed` gives
    the same arrays): weights and auxiliary states by MXNet's initializers
    (:mod:`autotile.training_init`: Xavier uniform weights, zero biases, BatchNorm gamma and
    variance one), data standard normal, labels class ids below the output's width, ids below
    their table's size. Returns ({name: array}, names of the weights/states among them)."""
    from ..autodiff.graph import default_data_names
    from ..cli.inputs import synthetic_inputs
    from ..symbol.infer import _declared_shape, infer_entry_shapes

    data = set(default_data_names(sym))
    make = [n for n in sym.list_inputs() if n not in values and (make_data if n in data else make_params)]
    if not make:
        return {}, []
    variables = {n.name: n for n in sym.topo_nodes() if n.is_variable}
    shapes = {k: tuple(np.shape(v)) for k, v in values.items()}
    for name in make:  # a data input takes its declared shape, with batch= as its first dim
        declared = _declared_shape(variables[name])
        if name in data and declared is not None:
            shapes[name] = (int(batch), *declared[1:]) if batch is not None else declared
    known = infer_entry_shapes(sym, shapes, partial=True)
    unknown = [n for n in make if known.get((id(variables[n]), 0)) is None]
    if unknown:  # name a data input first: the weights' shapes follow from it
        name = min(unknown, key=lambda n: n not in data)
        raise Error(f"cannot make input '{name}' (params= or inputs= left out): its shape is unknown; "
                    f"declare it in the model{', pass batch= to size it' if batch is None else ''}, or pass it in inputs=")
    declared = {n: known[(id(v), 0)] for n, v in variables.items() if (id(v), 0) in known}
    made = synthetic_inputs(_with_declared_shapes(sym, declared), seed)
    made = {k: made[k] for k in make}
    initialized = [k for k in make if k not in data]
    synthetic = [k for k in make if k in data]
    # one line, as Hugging Face's "newly initialized" weights warning: a step on made-up values
    # is easy to mistake for one on the user's own (shown unless logging is configured off)
    _LOG.warning("autotile.backend.run: %s (seed %d, as `autotile run`); pass params=/inputs= to use your own",
                 "; ".join(part for part in (
                     f"initialised {len(initialized)} parameters ({', '.join(initialized[:6])}"
                     f"{', ...' if len(initialized) > 6 else ''}) as MXNet does (Xavier)" if initialized else "",
                     "synthetic " + ", ".join(f"{k} {made[k].shape}" for k in synthetic) if synthetic else "")
                     if part), seed)
    return made, initialized


def _loss_scale(dtype, loss_scale, train: bool) -> float:
    if loss_scale is None:
        return FLOAT16_LOSS_SCALE if dtype == "float16" and train else 1.0
    if dtype in (None, "float32"):
        raise Error("loss_scale is for mixed precision: pass dtype='float16' (or 'bfloat16') too")
    if not train:
        raise Error("loss_scale scales gradients: it is only used with train=True")
    try:
        scale = float(loss_scale)
    except (TypeError, ValueError):
        raise Error(f"loss_scale must be a positive number, got {loss_scale!r}") from None
    if not np.isfinite(scale) or scale <= 0:
        raise Error(f"loss_scale must be a positive finite number, got {loss_scale!r}")
    return scale


def _unscale(res: Result, scale: float) -> Result:
    """The step's gradients divided by the loss scale (float32); an overflow is an Error."""
    for name, g in res.grads.items():
        if not np.all(np.isfinite(g)):
            raise Error(f"the gradient of '{name}' overflowed float16 at loss_scale={scale:g} (inf or nan): "
                        f"lower loss_scale; this step's update is not valid")
        res.grads[name] = (np.asarray(g, np.float32) / np.float32(scale)).astype(g.dtype)
    res.stats["loss_scale"] = scale
    return res


def _run_step(sym, devices, values, head_values, state_values, params, train, optimizer, optimizer_args, seed,
              ctx, kwargs) -> Result:
    if ctx in ("gpu", "mpi") or devices > 1 or kwargs.get("plan") is not None:
        # partitioned: every device count on the GPUs (docs/gpu.md), one device per MPI rank
        # (every rank calls run(), docs/mpi.md), or the host runtime (a plan with swapping
        # runs partitioned even on one device; its shapes are checked against the plan's)
        if kwargs.get("plan") is None or ctx != "cpu":
            _check_inputs(sym, values)
        if ctx == "gpu":
            from .gpu_runtime import run_gpu as run_partitioned
        elif ctx == "mpi":
            from .mpi_runtime import run_mpi as run_partitioned
        else:
            from .multi_device import run_multi_device as run_partitioned
        return run_partitioned(sym, devices, {**values, **head_values, **state_values}, train=train,
                               optimizer=optimizer, optimizer_args=optimizer_args, seed=seed, **kwargs)
    if kwargs:
        raise Error(f"unexpected arguments for a single-device run: {sorted(kwargs)}")
    _check_inputs(sym, values)
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    if not train:
        outputs, new_aux, _ = execute(sym, values, is_train=False, rng=rng, seed=seed)
        return Result(outputs=outputs, aux=new_aux, stats={"forward_seconds": time.perf_counter() - t0})
    return training_step(sym, {**values, **head_values, **state_values}, list(params), optimizer=optimizer,
                         optimizer_args=optimizer_args, rng=rng, seed=seed)
