"""Which ONNX initializers are trainable weights and which are constants.

An ONNX file does not say what training updates: parameters, buffers (rotary tables, BatchNorm
statistics), mask fill values and lifted constants are all initializers. One rule decides, in
this order (docs/onnx.md, "Trainable weights and constants"):

1. ``trainable=`` given (names or ``fnmatch`` patterns, matched against the ONNX name): the
   float initializers it matches are the weights, every other initializer is a constant.
2. The exporter's mark: the dynamo exporter (``torch.onnx.export(..., dynamo=True)``) records
   ``pkg.torch.export.graph_signature.InputSpec.kind`` on each initializer; ``PARAMETER`` is a
   weight, ``BUFFER`` and ``CONSTANT_TENSOR`` are constants. An unmarked initializer named as
   torch.export names lifted constants (``_tensor_constant0``, ``c_lifted_tensor_0``) is one.
3. Otherwise a float initializer is a weight unless no differentiable path leads from it to
   an output, i.e. every use of it is a position no gradient is wanted at: shape and index arithmetic (Reshape's shape, Slice's bounds, Gather's
   indices, comparisons, Cast to an integer...), Clip's bounds, a Where's condition, a *fill
   value* (a Where branch or Pad's constant value whose elements are all equal:
   ``masked_fill``'s ``-inf``, a ``zeros`` tensor), reached directly or through data-movement
   ops (Cast, Reshape, Expand, Unsqueeze, Concat...) that lead only to such positions, or through
   any other op whose outputs lead only to such positions (labels scattered, differenced and
   compared, as Swin V2's window mask). Integer and boolean initializers are never trained.
"""
from __future__ import annotations

import fnmatch
import re
from typing import Dict, List, Optional, Set, Tuple

import numpy as np

from ..errors import Error

#: ONNX ops whose outputs carry no gradient to any input: they fold even on weights.
NO_GRADIENT = {"Shape", "Size", "Range", "ConstantOfShape", "EyeLike", "Equal", "Less", "LessOrEqual", "Greater",
               "GreaterOrEqual", "IsNaN", "IsInf", "Not", "And", "Or", "Xor", "Sign", "Floor", "Ceil", "Round",
               "ArgMax", "ArgMin", "NonZero", "OneHot"}

#: op type -> input positions that are shapes, bounds, axes or indices (no gradient wanted there;
#: Clip's min and max are ReLU6's 0 and 6)
_INDEX_INPUTS: Dict[str, Tuple[int, ...]] = {
    "Clip": (1, 2),
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "Slice": (1, 2, 3, 4), "Pad": (1, 3), "Resize": (1, 2, 3),
    "Upsample": (1,), "Squeeze": (1,), "Unsqueeze": (1,), "Split": (1,), "TopK": (1,), "Dropout": (1, 2),
    "CumSum": (1,), "Trilu": (1,), "Gather": (1,), "GatherElements": (1,), "GatherND": (1,), "ScatterND": (1,),
    "ScatterElements": (1,), "Where": (0,), "ReduceSum": (1,), "ReduceMean": (1,), "ReduceMax": (1,),
    "ReduceMin": (1,), "ReduceProd": (1,), "ReduceL1": (1,), "ReduceL2": (1,), "ReduceLogSumExp": (1,),
    "ReduceSumSquare": (1,), "ReduceLogSum": (1,), "CastLike": (1,),
}

#: op type -> input positions holding a fill value (no gradient wanted there when uniform)
_FILL_INPUTS: Dict[str, Tuple[int, ...]] = {"Where": (1, 2), "Pad": (2,)}

#: op type -> input positions whose value flows on unchanged in kind (a copy, a view, a part)
_PASS_THROUGH: Dict[str, Optional[Tuple[int, ...]]] = {
    "Identity": (0,), "Cast": (0,), "CastLike": (0,), "Reshape": (0,), "Expand": (0,), "Unsqueeze": (0,),
    "Squeeze": (0,), "Flatten": (0,), "Transpose": (0,), "Slice": (0,), "Tile": (0,), "Gather": (0,),
    "Concat": None,  # None: every input
}

#: what torch.export calls the inputs it lifts from module state, by kind
KIND_KEY = "pkg.torch.export.graph_signature.InputSpec.kind"
_CONSTANT_KINDS = {"BUFFER", "CONSTANT_TENSOR"}
#: names torch.export gives tensors it lifts out of the code (``torch.tensor(-inf)``, ``zeros``)
_LIFTED_NAME = re.compile(r"(^|[./])(_tensor_constant\d+|c?_?lifted_tensor_\d+)$")


def _patterns(trainable) -> Tuple[str, ...]:
    if isinstance(trainable, str):
        return (trainable,)
    try:
        items = tuple(trainable)
    except TypeError:
        raise Error(f"trainable= takes initializer names or glob patterns (a str or a list of them), "
                    f"got {type(trainable).__name__}") from None
    bad = [p for p in items if not isinstance(p, str)]
    if bad:
        raise Error(f"trainable= takes initializer names or glob patterns (str), got {bad[0]!r}")
    return items


def exporter_kinds(graph) -> Dict[str, str]:
    """ONNX tensor name -> the kind torch.export recorded (``PARAMETER``, ``BUFFER``...), from
    the initializers' and value infos' metadata_props."""
    kinds: Dict[str, str] = {}
    for item in list(graph.input) + list(graph.value_info) + list(graph.initializer):
        for prop in getattr(item, "metadata_props", ()):
            if prop.key == KIND_KEY:
                kinds[item.name] = prop.value
    return kinds


class _Uses:
    """Which tensors a gradient is wanted at: those with a differentiable path to an output.

    One pass over the nodes in reverse topological order gives each tensor two answers: with
    its values arbitrary, and with them all equal (``uniform``: then a fill position, such as
    a Where branch, wants no gradient, and a part of it moved by a pass-through op is uniform
    too). A use wants a gradient when it is not a shape, index, bound or comparison position
    and some output of the consuming node wants one; so constants that reach the output only
    through comparisons (Swin V2's window labels: ScatterND, Sub, Equal, a Where's condition)
    are not weights."""

    def __init__(self, graph):
        self.consumers: Dict[str, list] = {}
        for node in graph.node:
            for i, name in enumerate(node.input):
                if name:
                    self.consumers.setdefault(name, []).append((node, i))
        self.outputs = {o.name for o in graph.output}
        self.in_subgraphs = _subgraph_inputs(graph.node)  # read by If/Loop/Scan bodies: differentiable
        self._wanted: Dict[str, Tuple[bool, bool]] = {}
        order, cyclic = topological_indices(graph.node)
        for k in cyclic:  # an invalid graph's cycle: differentiable, to be safe
            for o in graph.node[k].output:
                self._wanted[o] = (True, True)
        for k in reversed(order):
            for o in graph.node[k].output:
                if o:
                    self._wanted[o] = self._decide(o)

    def only_constant_uses(self, name: str, uniform: bool) -> bool:
        """Whether every use of tensor `name` (whose elements are all equal when `uniform`)
        is a position that wants no gradient."""
        if name not in self._wanted:
            self._wanted[name] = self._decide(name)
        return bool(self.consumers.get(name)) and not self._wanted[name][1 if uniform else 0]

    def _decide(self, name: str) -> Tuple[bool, bool]:
        """(a gradient is wanted at `name`, ... when its elements are all equal)."""
        if name in self.outputs or name in self.in_subgraphs:
            return True, True
        anyway = if_uniform = False
        for node, i in self.consumers.get(name, []):
            op = node.op_type if node.domain in ("", "ai.onnx") else None
            if op is None:
                return True, True
            if op in NO_GRADIENT or i in _INDEX_INPUTS.get(op, ()):
                continue
            if op == "Cast" and _casts_to_non_float(node):
                continue
            outs = [self._wanted.get(o, (True, True)) for o in node.output if o]
            passes = _PASS_THROUGH.get(op, ())
            # a part of a uniform tensor is uniform; a Concat with other data is not
            keeps_uniform = op in _PASS_THROUGH and op != "Concat" and (passes is None or i in passes)
            anyway = anyway or any(w[0] for w in outs)
            if i not in _FILL_INPUTS.get(op, ()):
                if_uniform = if_uniform or any(w[1 if keeps_uniform else 0] for w in outs)
        return anyway, if_uniform


def topological_indices(nodes) -> Tuple[List[int], List[int]]:
    """(indices of `nodes` in an order where producers come first, lowest index first among the
    ready ones; the indices left on a cycle, in their order)."""
    producer = {o: k for k, n in enumerate(nodes) for o in n.output if o}
    waiting = [0] * len(nodes)
    readers: Dict[int, list] = {}
    for k, n in enumerate(nodes):
        for x in set(n.input):
            if x in producer:
                waiting[k] += 1
                readers.setdefault(producer[x], []).append(k)
    ready = [k for k in range(len(nodes)) if not waiting[k]][::-1]
    order = []
    while ready:
        k = ready.pop()
        order.append(k)
        for r in readers.get(k, ()):
            waiting[r] -= 1
            if not waiting[r]:
                ready.append(r)
    seen = set(order)
    return order, [k for k in range(len(nodes)) if k not in seen]


def _subgraph_inputs(nodes) -> Set[str]:
    """Every tensor name the subgraphs (If/Loop/Scan bodies, at any depth) of `nodes` read."""
    names: Set[str] = set()
    for node in nodes:
        for a in node.attribute:
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                names |= {x for n in g.node for x in n.input} | _subgraph_inputs(g.node)
    return names


def _casts_to_non_float(node) -> bool:
    from onnx import helper

    to = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "to"), None)
    try:
        return to is not None and np.dtype(helper.tensor_dtype_to_np_dtype(to)).kind != "f"
    except (KeyError, TypeError, ValueError):
        return False


def _uniform(value: np.ndarray) -> bool:
    flat = value.reshape(-1)
    return flat.size > 0 and bool(np.all((flat == flat[0]) | (np.isnan(flat) & np.isnan(flat[0]))))


def trainable_initializers(graph, initializers: Dict[str, np.ndarray], trainable=None) -> Set[str]:
    """The names of the initializers of `graph` that training updates (the module docstring
    gives the rule). `trainable`: None for the rule, or names / glob patterns of the weights."""
    floats = {n for n, v in initializers.items() if v.dtype.kind == "f"}
    if trainable is not None:
        patterns = _patterns(trainable)
        chosen: Set[str] = set()
        for p in patterns:
            hit = {n for n in initializers if fnmatch.fnmatchcase(n, p)}
            if not hit:
                shown = ", ".join(sorted(floats)[:12]) + (" ..." if len(floats) > 12 else "")
                raise Error(f"trainable= names '{p}', which matches no initializer of the model "
                            f"(float initializers: {shown or 'none'})")
            not_float = sorted(hit - floats)
            if not_float and p in initializers:  # a name, not a pattern: say why it cannot train
                raise Error(f"trainable= names '{p}', an initializer of dtype {initializers[p].dtype}: "
                            f"only float tensors are trained")
            chosen |= hit & floats
        return chosen
    kinds = exporter_kinds(graph)
    uses = _Uses(graph)
    result = set()
    for name in floats:
        kind = kinds.get(name)
        if kind == "PARAMETER":
            result.add(name)
        elif kind in _CONSTANT_KINDS or (kind is None and _LIFTED_NAME.search(name)):
            continue
        elif not uses.only_constant_uses(name, _uniform(initializers[name])):
            result.add(name)
    return result

