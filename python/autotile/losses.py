"""Attach a standard loss to a model's output: ``attach_loss(sym, "cross_entropy" | "mse")``.

The gradient convention is PyTorch's default (``reduction="mean"``), the same for every
front end that uses this module (``autotile.torch.plan``, ``autotile train/run --loss``,
``backend.run(loss=)``):

- ``"cross_entropy"``: softmax cross-entropy of logits of shape (N, C) or (N, ..., C) (a
  language model's (batch, positions, vocabulary)) against class indices of shape (N,) or
  (N, ...) (integers, given as numbers of any dtype). The loss is the mean over every
  labelled position, ``torch.nn.functional.cross_entropy(logits.reshape(-1, C),
  label.reshape(-1))``; its gradient is ``(softmax(logits) - onehot(label)) / (N * ...)``.
  Built on MXNet's ``SoftmaxOutput`` (``preserve_shape=True, normalization="batch"``): the
  head's output is the softmax, :func:`loss_value` turns it into the loss.
- ``"mse"``: mean squared error against a target of the output's shape, the mean over all
  elements, ``torch.nn.functional.mse_loss(output, target)``; gradient ``2 (output - target)
  / numel``. Built on ``LinearRegressionOutput`` with ``grad_scale = 2 / N`` (that op divides
  by the elements per example).

The returned Symbol's only output is the loss head (the model's other outputs are dropped:
their head gradients of ones would add the sum of those outputs to the loss); its new input
is the label, ``label`` unless named, a data input whatever its name (never trained).
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

import numpy as np

from .autodiff.graph import DATA_ATTR
from .errors import Error
from .symbol.infer import infer_entry_shapes
from .symbol.ops_api import create
from .symbol.symbol import Symbol, Variable

#: the loss names :func:`attach_loss` takes
LOSSES = ("cross_entropy", "mse")

#: the op each loss is built on
LOSS_OP = {"cross_entropy": "SoftmaxOutput", "mse": "LinearRegressionOutput"}


def _check_kind(loss) -> str:
    if not isinstance(loss, str) or loss not in LOSSES:
        raise Error(f"loss must be one of {', '.join(repr(k) for k in LOSSES)}, got {loss!r}")
    return loss


def label_shape(loss: str, output_shape: Sequence[int], output: str = "output") -> tuple:
    """The label shape `loss` needs for an output of `output_shape` (an Error naming `output`
    when that output cannot take the loss)."""
    loss = _check_kind(loss)
    shape = tuple(int(d) for d in output_shape)
    if loss == "mse":
        if not shape:
            raise Error(f"loss 'mse' on output '{output}' of shape (): the output needs a batch dimension")
        return shape
    if len(shape) < 2:
        raise Error(f"loss 'cross_entropy' needs logits of shape (N, C) or (N, ..., C); output '{output}' has "
                    f"shape {shape}")
    return shape[:-1]


def check_label(loss: str, output: str, output_shape: Sequence[int], label: str, given: Sequence[int]) -> None:
    """Raise an Error naming the label, the output and both shapes when `given` is not the
    label shape `loss` needs for `output`."""
    want = label_shape(loss, output_shape, output)
    given = tuple(int(d) for d in given)
    if given != want:
        what = "class indices" if loss == "cross_entropy" else "a target"
        raise Error(f"loss {loss!r}: label '{label}' has shape {given}, but output '{output}' of shape "
                    f"{tuple(output_shape)} needs {what} of shape {want}")


def _pick_output(sym: Symbol, output: Union[None, str, int]) -> int:
    outputs = sym.list_outputs()
    if output is None:
        if len(outputs) != 1:
            raise Error(f"the model has {len(outputs)} outputs {outputs}: say which one the loss is on "
                        f"(output=NAME or output=INDEX)")
        return 0
    if isinstance(output, (int, np.integer)) and not isinstance(output, bool):
        if not -len(outputs) <= output < len(outputs):
            raise Error(f"output={output} is out of range: the model has {len(outputs)} outputs {outputs}")
        return int(output) % len(outputs)
    onnx = getattr(sym, "onnx_names", None) or {}
    for i, name in enumerate(outputs):
        if output == name or onnx.get(output) == name or name == f"{output}_output":
            return i
    raise Error(f"output {output!r} is not an output of the model (outputs: {outputs})")


def attach_loss(sym: Symbol, loss: str, *, output: Union[None, str, int] = None, label: Optional[str] = None,
                shapes: Optional[dict] = None) -> Symbol:
    """`sym` with `loss` (``"cross_entropy"`` or ``"mse"``, module docstring) on one output:
    `output` (name, ONNX name or index; needed when `sym` has several), label input `label`
    (default ``"label"``). `shapes`: input shapes, when the variables do not declare them,
    for the label's shape and the checks. The result keeps ``sym.params`` and
    ``sym.onnx_names``; ``result.loss`` is ``(loss, output name, label name)``."""
    kind = _check_kind(loss)
    label = "label" if label is None else label
    if not isinstance(label, str) or not label:
        raise Error(f"label must be a non-empty input name, got {label!r}")
    from .autodiff.objective import has_loss
    if has_loss(sym):
        raise Error(f"the model already ends in a loss head ({sym.list_outputs()}): attach_loss adds one to a "
                    f"model without a loss")
    taken = {n.name for n in sym.topo_nodes()}
    if label in taken:
        raise Error(f"label name '{label}' is already a node of the model: pass label=ANOTHER_NAME")
    index = _pick_output(sym, output)
    name = sym.list_outputs()[index]
    node, slot = sym.entries[index]
    known = infer_entry_shapes(sym, dict(shapes or {}), partial=True)
    out_shape = known.get((id(node), slot))
    lab_shape = None if out_shape is None else label_shape(kind, out_shape, name)
    head = Symbol([(node, slot)])
    # data whatever its name (only names ending in "label" are data by default): never a weight
    lab = Variable(label, shape=lab_shape, attr={DATA_ATTR: "1"})
    loss_name = next(n for n in (f"{kind}_loss", f"autotile_{kind}_loss", f"autotile_{kind}_loss_{len(taken)}")
                     if n not in taken)
    if kind == "cross_entropy":
        out = create("SoftmaxOutput", head, lab, name=loss_name, preserve_shape=True, normalization="batch")
    else:
        if out_shape is None:
            raise Error(f"loss 'mse' needs the shape of output '{name}' (its batch size sets the gradient's "
                        f"scale): pass shapes= for the model's inputs")
        out = create("LinearRegressionOutput", head, lab, name=loss_name, grad_scale=2.0 / out_shape[0])
    result = Symbol(out.entries, sym.params)
    for attr in ("onnx_names",):
        if hasattr(sym, attr):
            setattr(result, attr, getattr(sym, attr))
    result.loss = (kind, name, label)
    return result


def loss_value(loss: str, head_output, label) -> float:
    """The loss (module docstring's convention) from the loss head's output (the softmax for
    ``"cross_entropy"``, the model's output for ``"mse"``) and the label."""
    kind = _check_kind(loss)
    out = np.asarray(head_output, dtype=np.float64)
    lab = np.asarray(label)
    if kind == "mse":
        return float(np.mean((out - lab.reshape(out.shape)) ** 2))
    idx = lab.reshape(-1).astype(np.int64)
    probs = out.reshape(-1, out.shape[-1])
    picked = probs[np.arange(idx.size), idx]
    return float(-np.mean(np.log(np.maximum(picked, np.finfo(np.float64).tiny))))
