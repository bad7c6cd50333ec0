"""``autotile.torch.plan(module, example_inputs, loss=...)``: an ``nn.Module`` in, a plan of
its training step out, with the module's parameter names and the loss kept.

The module is exported inside (the TorchScript ONNX exporter, which keeps every parameter's
name and the module call scopes; the dynamo exporter, which needs ``onnxscript``, when the
TorchScript one cannot take the module), imported, given its loss and planned with
``at.plan``. The returned :class:`~autotile.planner.plan.Plan` carries what
``autotile.torch.parallelize(module, plan)`` needs: ``plan.torch_model`` (the planned
Symbol, with ``torch_map``), ``plan.torch_params`` (every module parameter name -> plan
tensor; tied parameters map to one tensor) and ``plan.torch_loss``.

Gradient convention: the plan trains the loss as given, and the planned step's gradients
are ``loss(module(*inputs), target).backward()``'s. torch's losses default to the mean over
the batch (``reduction="mean"``), and so do the string forms: ``"cross_entropy"`` (logits
(N, C) or (N, ..., C), class indices (N,) or (N, ...), the mean over every position) and
``"mse"`` (a target of the output's shape, the mean over every element); see
:mod:`autotile.losses`."""
from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
from typing import Callable, Dict, Optional, Tuple, Union

from ..errors import Error, install_hint
from .loss import WithLoss, check_loss, exportable_losses, strip_prefix, target_name
from .names import flat_tensors, forward_arg_names, import_export, in_eval_mode, onnx_export, record_calls_restoring

EXPORTERS = ("auto", "torchscript", "dynamo")


def _as_inputs(module, example_inputs) -> tuple:
    import torch

    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    if isinstance(example_inputs, (tuple, list)) and example_inputs and \
            all(isinstance(t, torch.Tensor) for t in example_inputs):
        return tuple(example_inputs)
    raise Error(f"example_inputs must be a tensor or a tuple of tensors, one per argument of "
                f"{type(module).__name__}.forward{tuple(forward_arg_names(module))}; got "
                f"{type(example_inputs).__name__}")


def _failing_op(message: str) -> Optional[str]:
    found = re.search(r"aten[:.]{1,2}(\w+)", message)
    return found.group(1) if found else None


def _locate(module, args, message: str) -> Tuple[Optional[str], Optional[str]]:
    """(op, qualified module name) of the exporter's failure: the op its message names, and
    the innermost module that called a torch function of that name when `module` runs on
    `args` (forward hooks keep the module stack, a TorchFunctionMode sees each call)."""
    import torch
    from torch.overrides import TorchFunctionMode

    op = _failing_op(message)
    if op is None:
        return None, None
    names = {id(m): q for q, m in module.named_modules()}
    stack, found = [], []

    def wanted(func) -> bool:
        name = getattr(func, "__name__", "") or ""
        return name.strip("_") == op.strip("_") or name == op.split(".")[0]

    class Spy(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if not found and wanted(func):
                found.append(stack[-1] if stack else "")
            return func(*args, **(kwargs or {}))

    def push(mod, _args):
        stack.append(names[id(mod)])

    def pop(_mod, _args, _out):
        stack.pop()  # returns None: a hook's value would replace the output

    handles = []
    for m in module.modules():
        if m is not module:
            handles.append(m.register_forward_pre_hook(push))
            handles.append(m.register_forward_hook(pop))
    try:
        with Spy(), torch.no_grad():
            module(*args)
    except Exception:  # the op itself fails to run: the module stack at that point
        found.append(stack[-1] if stack else "")
    finally:
        for h in handles:
            h.remove()
    return op, (found[0] if found else None)


def _dynamo_export(module, args, input_names):
    import torch

    try:
        import onnxscript  # noqa: F401
    except ImportError:
        raise Error(f"the dynamo ONNX exporter needs onnxscript: {install_hint('torch')}") from None
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # optimize=False: the exporter's optimizer folds parameters into constants and merges
        # initializers of equal values (LayerNorm weights), losing the parameters' names
        program = torch.onnx.export(module, tuple(args), dynamo=True, input_names=list(input_names),
                                    verbose=False, optimize=False)
        return _optimize_keeping(program.model, {n for n, _ in module.named_parameters(remove_duplicate=False)})


def _optimize_keeping(model, names):
    """The onnxscript optimizer's folding (``SplitToSequence``/``SequenceAt`` to ``Split``,
    constants) on an exported ``ir.Model`` without touching the initializers in `names`:
    they are graph inputs while it runs, initializers again after. Returns a ModelProto."""
    import onnxscript.optimizer
    from onnxscript import ir

    graph = model.graph
    kept = [v for name, v in list(graph.initializers.items()) if name in names]
    for v in kept:
        graph.initializers.pop(v.name)
        tensor, v.const_value = v.const_value, None
        v.meta["autotile_tensor"] = tensor
        graph.inputs.append(v)
    onnxscript.optimizer.optimize(model)
    for v in kept:
        graph.inputs.remove(v)
        v.const_value = v.meta.pop("autotile_tensor")
        graph.register_initializer(v)
    return ir.serde.serialize_model(model)


def _flush_python_stdout() -> None:
    try:
        sys.stdout.flush()
    except (AttributeError, OSError, ValueError):
        pass


def _flush_c_stdio() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):  # no C library to reach: nothing buffered there to flush
        pass


@contextlib.contextmanager
def _quiet_failure_dump():
    """The TorchScript exporter, failing, writes its whole IR graph to the process's stdout
    from C++ ("Torch IR graph at exception: ..."), even when the dynamo exporter then takes
    the module. Inside the block, file descriptor 1 goes to a temporary file; what was written
    there is passed on to stdout when the block ends normally and dropped when it raises (the
    exporter's error, which the caller reports, says what went wrong; so is what another
    thread printed meanwhile)."""
    fd = 1  # the C++ side writes to the descriptor, whatever sys.stdout is (pytest's, a notebook's)
    try:
        saved = os.dup(fd)
    except OSError:  # no descriptor 1: nothing to capture
        yield
        return
    _flush_python_stdout()
    _flush_c_stdio()
    with tempfile.TemporaryFile() as spool:
        os.dup2(spool.fileno(), fd)
        failed = True
        try:
            yield
            failed = False
        finally:
            _flush_python_stdout()
            _flush_c_stdio()  # the C++ writes sit in C's stdout buffer until flushed
            os.dup2(saved, fd)
            os.close(saved)
            if not failed:
                spool.seek(0)
                text = spool.read()
                _flush_python_stdout()
                while text:
                    text = text[os.write(fd, text):]


def export_model(module, args, input_names, exporter: str = "auto", locate=None):
    """The ONNX export of `module` on `args` by `exporter`: ``"torchscript"``, ``"dynamo"``, or
    ``"auto"`` (TorchScript, then dynamo when TorchScript fails). Failing, an Error with the
    exporter's message, the op and the module path that produced it (`locate`: ``(module,
    args)``, the module whose submodule names the path uses and its inputs; default `module`
    and `args`)."""
    if exporter not in EXPORTERS:
        raise Error(f"exporter must be one of {', '.join(EXPORTERS)}, got {exporter!r}")
    errors = []
    order = ["torchscript", "dynamo"] if exporter == "auto" else [exporter]
    for which in order:
        try:
            with exportable_losses():
                if which == "torchscript":
                    with _quiet_failure_dump():
                        return onnx_export(module, args, input_names)
                model = _dynamo_export(module, args, input_names)
            if errors:  # the fallback worked: say why it was needed
                logging.getLogger("autotile").warning(
                    "the TorchScript ONNX exporter refused %s (%s); exported with torch's dynamo exporter",
                    type((locate or (module,))[0]).__name__, errors[0][1].strip().splitlines()[0][:200])
            return model
        except Error as e:
            errors.append((which, str(e)))
        except Exception as e:  # the exporter's own error
            errors.append((which, f"{type(e).__name__}: {e}"))
    # the message that names an op (TorchScript's usually does), with the module it ran in
    which, message = next(((w, m) for w, m in errors if _failing_op(m)), errors[0])
    target, target_args = locate or (module, args)
    op, path = _locate(target, target_args, message)
    where = ""
    if op:
        place = f"module '{path}'" if path else f"{type(target).__name__}.forward itself" if path == "" else None
        where = f" at op aten::{op}" + (f" in {place}" if place else " (no module called it on the example inputs)")
    first = message.strip().splitlines()[0] if message.strip() else message
    tried = "; ".join(f"{w}: {m.strip().splitlines()[0][:300]}" for w, m in errors if w != which)
    raise Error(f"{type(target).__name__} cannot be exported to ONNX{where}: {which} exporter: {first}"
                + (f" (also tried {tried})" if tried else ""))


def _param_names(module, sym) -> Dict[str, str]:
    """Every parameter name of `module` (tied ones included) -> its plan tensor: the tensor
    the export made of whichever of its names it kept (TorchScript: the first, dynamo: any)."""
    onnx_names = getattr(sym, "onnx_names", {}) or {}
    args = set(sym.list_inputs())
    owners: Dict[int, list] = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        owners.setdefault(id(p), []).append(name)
    out: Dict[str, str] = {}
    for names in owners.values():
        tensor = next((onnx_names.get(n, n) for n in names if onnx_names.get(n, n) in args), None)
        if tensor is not None:
            out.update({n: tensor for n in names})
    return out


def plan(module, example_inputs, loss: Union[None, str, Callable] = None, target=None, *,
         devices: Optional[int] = None, mesh=None, layout=None, device_memory=None, algorithm: str = "tofu",
         exporter: str = "auto", label: Optional[str] = None, dtensor_check: bool = True, **plan_kwargs):
    """Plan the training step of `module` (an ``nn.Module``) on `example_inputs` (a tensor or
    a tuple, one per argument of ``forward``; their shapes are the planned ones).

    `loss`: a callable ``loss(output, target)`` (``loss(output)`` with no `target`) returning
    a scalar tensor, e.g. ``torch.nn.functional.cross_entropy`` or ``nn.MSELoss()``; or
    ``"cross_entropy"`` (logits (N, C) or (N, ..., C), class indices `target` (N,) or
    (N, ...)) or ``"mse"`` (`target` of the output's shape) on the module's (first) output;
    None: the sum of the outputs, as a model without a loss trains. The planned step's
    gradients are ``loss(module(*inputs), target).backward()``'s: with torch's default
    ``reduction="mean"``, and with the string forms, the mean over the batch (and positions).
    `target`: an example target tensor (its shape is planned; ``label`` names the plan input,
    default ``target``). `devices` or `mesh`, `layout`, `device_memory`, `algorithm` and
    `plan_kwargs` go to ``at.plan``. `exporter`: ``"auto"`` (TorchScript, then dynamo),
    ``"torchscript"`` or ``"dynamo"``. The module runs and is exported in eval mode (dropout
    off, BatchNorm normalising by its running statistics), its modes and buffers restored after.
    `dtensor_check` (on more than one device): the plan's step is tried at once under
    DTensor on a fake process group (:func:`autotile.torch.runnable.make_runnable`, seconds),
    and a module call DTensor cannot run as planned is planned again *whole* (its parameters
    and tensors replicated, a layout constraint of the search; ``plan.torch_whole`` lists
    them), or refused here naming the module and the op; off, the plan is the search's alone.

    Returns the Plan, with ``plan.torch_model``, ``plan.torch_params`` (module parameter name
    -> plan tensor, tied names to one tensor) and ``plan.torch_loss``; run it with
    ``autotile.torch.parallelize(module, plan)``. Raises :class:`autotile.Error` before
    anything runs distributed: a module the exporter cannot take (its message, the op and the
    module path), a loss that does not return a scalar, a target of the wrong shape."""
    import torch

    from .. import planner
    from ..losses import LOSSES, attach_loss, check_label

    if not isinstance(module, torch.nn.Module):
        raise Error(f"autotile.torch.plan takes an nn.Module, got {type(module).__name__}")
    args = _as_inputs(module, example_inputs)
    input_names = forward_arg_names(module, len(args))
    if isinstance(loss, str) and loss not in LOSSES:
        raise Error(f"loss must be a callable or one of {', '.join(repr(k) for k in LOSSES)}, got {loss!r}")
    if loss is not None and not isinstance(loss, str) and not callable(loss):
        raise Error(f"loss must be a callable or one of {', '.join(repr(k) for k in LOSSES)}, got "
                    f"{type(loss).__name__}")
    if isinstance(loss, str) and target is None:
        raise Error(f"loss={loss!r} needs target= (an example target tensor: class indices for 'cross_entropy', "
                    f"the output's shape for 'mse')")
    if target is not None and not isinstance(target, torch.Tensor):
        raise Error(f"target must be a tensor, got {type(target).__name__}")
    if target is not None and loss is None:
        raise Error("target= is given but no loss=: pass the loss the target is for")
    tname = target_name(input_names, label)
    calls = record_calls_restoring(module, args)
    with torch.no_grad():  # as the exporter runs it: eval mode, buffers (BatchNorm statistics) kept
        output = in_eval_mode(module, lambda: module(*args))
    outputs = flat_tensors(output)
    if isinstance(loss, str):
        if not outputs:
            raise Error(f"{type(module).__name__} returns no tensor: loss={loss!r} has nothing to act on")
        name = "output" if len(outputs) == 1 else "output_0"
        check_label(loss, name, tuple(outputs[0].shape), tname, tuple(target.shape))
    elif loss is not None:
        check_loss(module, loss, target, output)
    if callable(loss) and not isinstance(loss, str):
        joined = WithLoss.build(module, loss, len(args), target is not None)
        full_args = args + ((target,) if target is not None else ())
        model = export_model(joined, full_args, input_names + ([tname] if target is not None else []),
                             exporter, locate=(module, args))
        strip_prefix(model, WithLoss.PREFIX)
    else:
        model = export_model(module, args, input_names, exporter, locate=(module, args))
    sym = import_export(module, model, calls, input_names)
    if isinstance(loss, str):
        torch_map = sym.torch_map
        sym = attach_loss(sym, loss, output=0, label=tname)
        sym.torch_map = torch_map
    p = planner.plan(sym, devices=devices, mesh=mesh, layout=layout, device_memory=device_memory,
                     algorithm=algorithm, **plan_kwargs)
    p.torch_model = sym
    p.torch_params = _param_names(module, sym)
    p.torch_loss = loss if isinstance(loss, str) or loss is None else getattr(loss, "__name__", type(loss).__name__)
    if dtensor_check and p.devices > 1:
        from .runnable import make_runnable

        p = make_runnable(module, args, p, devices=devices, mesh=mesh, layout=layout, algorithm=algorithm,
                          plan_kwargs={**plan_kwargs, "device_memory": device_memory})
    return p
