"""What a training step optimises when the model does not say.

A model with a loss head (SoftmaxOutput, the regression outputs, MakeLoss) trains that loss.
An exported classifier (an ONNX file from PyTorch) usually ends in its logits or a softmax of
them and carries no loss: :func:`training_objective` then attaches a softmax cross-entropy
(MXNet's SoftmaxOutput, ``normalization="batch"``: the gradient of the mean over the batch,
as torch's cross_entropy) to the logits, with integer class labels ``softmax_label`` of shape
(batch,) taken from the logits' shape. Any other loss-free model back-propagates head
gradients of ones, i.e. it minimises the sum of its outputs, and says so.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

from ..symbol.infer import infer_entry_shapes
from ..symbol.ops_api import create
from ..symbol.symbol import Symbol, Variable

#: ops that are a loss (their gradient ignores the head gradient, MXNet semantics)
LOSS_OPS = ("SoftmaxOutput", "LinearRegressionOutput", "LogisticRegressionOutput", "MAERegressionOutput",
            "MakeLoss")

#: ops whose input is a classifier's logits when they end the model
_PROBABILITIES = ("softmax", "SoftmaxActivation", "log_softmax")

LABEL = "softmax_label"


def has_loss(sym: Symbol) -> bool:
    """True when some output of `sym` is a loss head."""
    return any(not node.is_variable and node.opdef().name in LOSS_OPS for node, _ in sym.entries)


def _last_axis(node) -> bool:
    attrs = node.parsed_attrs()
    axis = attrs.get("axis", -1)
    mode = attrs.get("mode", "instance")
    return axis in (-1, 1) and mode in ("instance", "channel")


def training_objective(sym: Symbol, shapes: Optional[Dict[str, tuple]] = None) -> Tuple[Symbol, str]:
    """(the Symbol to train, a sentence saying what it optimises). `shapes`: input shapes
    when the variables do not declare them. A single 2-D output (batch, classes) without a
    loss (logits, or a softmax of logits) gets a softmax cross-entropy on the logits with a
    new label input ``softmax_label`` (batch,); the returned Symbol keeps `sym`'s params and
    ONNX names."""
    if has_loss(sym):
        ops = sorted({node.opdef().name for node, _ in sym.entries if not node.is_variable
                      and node.opdef().name in LOSS_OPS})
        return sym, f"the model's own loss ({', '.join(ops)})"
    fallback = (sym, "the sum of the model's outputs (it has no loss: every output's head gradient is one)")
    if len(sym.entries) != 1:
        return fallback
    node, index = sym.entries[0]
    known = infer_entry_shapes(sym, dict(shapes or {}), partial=True)
    shape = known.get((id(node), index))
    if shape is None or len(shape) != 2 or shape[1] < 2 or LABEL in sym.list_inputs():
        return fallback
    logits = Symbol([(node, index)])
    what = "its output"
    if not node.is_variable and node.opdef().name in _PROBABILITIES and _last_axis(node):
        logits = Symbol([node.inputs[0]])  # train the logits, as a cross-entropy on the softmax would
        what = f"the input of its {node.op}"
    name = logits.list_outputs()[0]
    label = Variable(LABEL, shape=(shape[0],))
    taken = {n.name for n in sym.topo_nodes()}
    loss_name = next(n for n in ("softmax", "softmax_loss", "autotile_softmax_loss") if n not in taken)
    loss = create("SoftmaxOutput", logits, label, name=loss_name, normalization="batch")  # the mean, as torch
    trained = Symbol(loss.entries, sym.params)
    for attr in ("onnx_names",):  # the importer's name map, for inputs= by the model's own names
        if hasattr(sym, attr):
            setattr(trained, attr, getattr(sym, attr))
    return trained, (f"softmax cross-entropy on the logits '{name}' ({what}, {shape[0]} x {shape[1]}) against "
                     f"labels '{LABEL}' of shape ({shape[0]},) (the model has no loss)")
