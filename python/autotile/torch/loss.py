"""A PyTorch loss callable joined to its module for the export: ``loss(module(*inputs), target)``
as one ``nn.Module`` whose ONNX export is the graph the plan trains.

torch's fused losses export as ONNX ops the importer has no rule for
(``SoftmaxCrossEntropyLoss``, ``NegativeLogLikelihoodLoss``): while the joined module is
exported, :func:`exportable_losses` computes ``F.cross_entropy`` and ``F.nll_loss`` from
``log_softmax``, a gather and a mean (the same values and gradients, torch's default
``reduction="mean"`` over the labelled positions, ``ignore_index``, class weights,
``label_smoothing`` and class-probability targets honoured)."""
from __future__ import annotations

import contextlib
import warnings
from typing import Callable, Optional, Sequence

from ..errors import Error
from .names import flat_tensors


def _nll(logp, target, weight=None, ignore_index: int = -100, reduction: str = "mean"):
    """``F.nll_loss`` from a gather: class dim 1, any extra dims are positions."""
    import torch

    keep = target != ignore_index
    safe = torch.where(keep, target, torch.zeros_like(target))
    picked = -logp.gather(1, safe.unsqueeze(1)).squeeze(1)
    w = keep.to(logp.dtype)
    if weight is not None:
        w = w * weight[safe]
    if reduction == "none":
        return picked * w
    total = (picked * w).sum()
    return total if reduction == "sum" else total / w.sum()


def _smoothing(logp, target, weight, ignore_index: int, reduction: str):
    """The label-smoothing term of ``F.cross_entropy`` (class-index targets): the loss
    against a uniform target, weighted and averaged as torch does (``ignore_index`` positions
    out, the mean divided by the summed class weights of the labelled positions)."""
    import torch

    keep = target != ignore_index
    shape = [1] * logp.dim()
    shape[1] = logp.shape[1]
    smooth = -(logp if weight is None else logp * weight.reshape(shape)).sum(1)
    smooth = torch.where(keep, smooth, torch.zeros_like(smooth))
    if reduction == "none":
        return smooth
    total = smooth.sum()
    if reduction == "sum":
        return total
    safe = torch.where(keep, target, torch.zeros_like(target))
    w = keep.to(logp.dtype) if weight is None else torch.where(keep, weight[safe], torch.zeros_like(weight[safe]))
    return total / w.sum()


def _soft_targets(logp, target, weight, reduction: str, label_smoothing: float):
    """``F.cross_entropy`` with class probabilities as the target (a float tensor of the
    logits' shape): ``-sum(target x log_softmax)`` over the classes, the mean over the positions."""
    classes = logp.shape[1]
    if label_smoothing:
        target = target * (1 - label_smoothing) + label_smoothing / classes
    prod = logp * target
    if weight is not None:
        shape = [1] * logp.dim()
        shape[1] = classes
        prod = prod * weight.reshape(shape)
    if reduction == "none":
        return -prod.sum(1)
    total = -prod.sum()
    return total if reduction == "sum" else total / (logp.numel() // classes)


def _cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                   reduction="mean", label_smoothing=0.0):
    import torch

    if size_average is not None or reduce is not None or input.dim() < 2:
        return None  # not decomposed: the exporter takes it as it is
    logp = torch.log_softmax(input, dim=1)
    if torch.is_floating_point(target):
        return _soft_targets(logp, target, weight, reduction, label_smoothing)
    nll = _nll(logp, target, weight, ignore_index, reduction)
    if not label_smoothing:
        return nll
    smooth = _smoothing(logp, target, weight, ignore_index, reduction)
    return (1 - label_smoothing) * nll + smooth * (label_smoothing / logp.shape[1])


def _nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    if size_average is not None or reduce is not None:
        return None
    return _nll(input, target, weight, ignore_index, reduction)


@contextlib.contextmanager
def exportable_losses():
    """``F.cross_entropy`` and ``F.nll_loss`` (and the ``nn`` modules calling them) computed
    from ops the ONNX importer takes, inside the ``with`` block."""
    import torch
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode

    table = {F.cross_entropy: _cross_entropy, F.nll_loss: _nll_loss}

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            alt = table.get(func)
            if alt is not None:
                out = alt(*args, **kwargs)
                if out is not None:
                    return out
            return func(*args, **kwargs)

    with Mode(), torch.no_grad():
        yield


class WithLoss:
    """Builds the ``nn.Module`` ``forward(*inputs[, target]) = loss(module(*inputs)[, target])``;
    the module is its child ``module`` (its names carry that prefix in the export)."""

    PREFIX = "module"

    @staticmethod
    def build(module, loss: Callable, n_inputs: int, with_target: bool):
        import torch

        class Joined(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.add_module(WithLoss.PREFIX, module)
                object.__setattr__(self, "loss_fn", loss)  # not a child: a loss module's names stay out

            def forward(self, *args):
                out = getattr(self, WithLoss.PREFIX)(*args[:n_inputs])
                return self.loss_fn(out, args[n_inputs]) if with_target else self.loss_fn(out)

        return Joined()


def _shape(value) -> str:
    shapes = [tuple(t.shape) for t in flat_tensors(value)]
    return str(shapes[0]) if len(shapes) == 1 else str(shapes)


def check_loss(module, loss: Callable, target, output) -> None:
    """Run ``loss(output[, target])`` once (no gradient) and raise an Error unless it gives a
    scalar tensor; a loss that fails or warns of a target size naming the output and target
    shapes."""
    import torch

    name = getattr(loss, "__name__", type(loss).__name__)
    with_target = target is not None
    if with_target and isinstance(target, torch.Tensor) and target.dim() and output is not None:
        first = [t for t in flat_tensors(output) if t.dim()]
        if first and first[0].shape[0] != target.shape[0]:
            raise Error(f"target has shape {tuple(target.shape)} but the output of {type(module).__name__} has "
                        f"shape {_shape(output)}: their first (batch) dimensions differ")
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=".*target size.*")
            with torch.no_grad():
                value = loss(output, target) if with_target else loss(output)
    except Error:
        raise
    except Exception as e:  # the loss's own complaint, with the shapes it was given
        given = f"output of shape {_shape(output)}" + (f", target of shape {_shape(target)}" if with_target else "")
        raise Error(f"loss {name}({given}) failed: {type(e).__name__}: {e}") from None
    if not isinstance(value, torch.Tensor) or value.numel() != 1:
        got = f"a tensor of shape {tuple(value.shape)}" if isinstance(value, torch.Tensor) else type(value).__name__
        raise Error(f"loss {name} must return a scalar tensor (the mean over the batch, as torch's losses "
                    f"give by default); it returned {got} for an output of shape {_shape(output)}")


def strip_prefix(model, prefix: str) -> None:
    """Rename, in place, the ONNX export of a joined module so its tensors and nodes carry
    the inner module's own names: ``module.fc1.weight`` -> ``fc1.weight``, ``/module/fc1/Gemm``
    -> ``/fc1/Gemm``."""
    dotted, scoped = prefix + ".", "/" + prefix + "/"

    def rename(name: str) -> str:
        if name.startswith(dotted):
            return name[len(dotted):]
        if name.startswith(scoped):
            return name[len(scoped) - 1:]
        return name

    graph = model.graph
    for t in graph.initializer:
        t.name = rename(t.name)
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        vi.name = rename(vi.name)
    for node in graph.node:
        node.name = rename(node.name)
        for i, n in enumerate(node.input):
            node.input[i] = rename(n)
        for i, n in enumerate(node.output):
            node.output[i] = rename(n)


def target_name(input_names: Sequence[str], wanted: Optional[str] = None) -> str:
    """The plan input the target becomes: `wanted`, else ``target`` (``loss_target`` when
    forward has an argument of that name)."""
    if wanted is not None:
        if wanted in input_names:
            raise Error(f"label name '{wanted}' is an argument of forward{tuple(input_names)}: choose another")
        return wanted
    return "target" if "target" not in input_names else "loss_target"
