"""Re-importing a fixed-shape ONNX export at another batch size (issue 31, section 5).

An export traced at batch 2 bakes the batch into constants: the target shape of a Reshape
(``(2, 4, 8, 16)`` to split heads, ``(8, 5, 16)`` for batch x heads), an Expand's shape, a
ConstantOfShape's. ``batch_size=`` then breaks the graph where such a constant meets data of
the new batch, and the error used to name a downstream symptom ("MatMul needs the ranks of
both inputs") instead of the constant.

:func:`rebatch` rewrites what it can show: ONNX shape inference runs with the data inputs'
batch set to a sentinel prime; a Reshape whose data leads with a multiple of it (the batch,
or batch x heads) and whose literal target shape starts with the old batch times the dims
merged into it (``2``, ``2 x 4``) gets a copy of the constant starting with the new batch
times the same dims; an Expand whose target restates a batch-carrying data dim (old x a where
the data has batch x a: grouped-query attention's key repeat) gets new x a there. That
makes the batch flow on, so inference runs again until no Reshape is left to rewrite.
Constants it cannot rewrite (an Expand from 1 to the old batch, a ConstantOfShape) are listed as
*pins*: an import that then fails names them (:func:`pin_hint`).
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..errors import Error
from .onnx_trainable import topological_indices

#: the batch shape inference runs at: a prime no model has as a size, so a dimension that is a
#: multiple of it carries the batch (alone, or merged with other dims as B x heads)
SENTINEL = 7919
#: ops whose constant input fixes an output shape, and which input that is
_SHAPE_INPUT = {"Reshape": 1, "Expand": 1, "Tile": 1, "ConstantOfShape": 0}
_MAX_ROUNDS = 256


class Rebatch:
    """What :func:`rebatch` did: the rewritten constants and the pins left."""

    def __init__(self, old: int, new: int):
        self.old, self.new = old, new
        self.rewritten: List[Tuple[str, str, tuple, tuple]] = []  # (node, constant, old value, new value)
        #: (node label, node output, constant, its value or shape, "shape" or "data")
        self.pins: List[Tuple[str, str, str, tuple, str]] = []


def _literals(graph, onnx) -> Dict[str, np.ndarray]:
    """Small integer constants by name: initializers and Constant nodes' values."""
    from onnx import numpy_helper

    out: Dict[str, np.ndarray] = {}
    for t in graph.initializer:
        if t.data_type == onnx.TensorProto.INT64 and math.prod(t.dims) <= 16:
            out[t.name] = numpy_helper.to_array(t)
    for n in graph.node:
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and len(n.output) == 1:
            for a in n.attribute:
                if a.name == "value" and a.t.data_type == onnx.TensorProto.INT64 and math.prod(a.t.dims) <= 16:
                    out[n.output[0]] = numpy_helper.to_array(a.t)
                elif a.name == "value_ints":
                    out[n.output[0]] = np.array(list(a.ints), np.int64)
    return out


def _sentinel_dims(model, onnx, fixed_inputs, overrides) -> Dict[str, tuple]:
    """Every tensor's inferred dims with the data inputs' batch set to SENTINEL and the
    rewritten constants (`overrides`, name -> value) written for that batch."""
    from onnx import numpy_helper

    m = onnx.ModelProto()
    m.ir_version = max(model.ir_version, 4)
    m.opset_import.extend(model.opset_import)
    g = m.graph
    g.node.extend(model.graph.node)
    inits = {t.name for t in model.graph.initializer}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        new = g.input.add()
        new.CopyFrom(vi)
        if vi.name in fixed_inputs:
            new.type.tensor_type.shape.dim[0].dim_value = SENTINEL
    for t in model.graph.initializer:
        if t.name in overrides:
            g.initializer.append(numpy_helper.from_array(overrides[t.name], t.name))
        elif math.prod(t.dims) <= 64:
            g.initializer.add().CopyFrom(t)
        else:
            g.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    for f in model.functions:
        m.functions.add().CopyFrom(f)
    try:
        inferred = onnx.shape_inference.infer_shapes(m, check_type=False, strict_mode=False, data_prop=True)
    except Exception:  # inference is a help: without it nothing is rewritten
        return {}
    dims: Dict[str, tuple] = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output) + list(inferred.graph.input):
        tt = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tt.HasField("shape"):
            dims[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim)
    return dims


def _carries_batch(d) -> bool:
    return isinstance(d, int) and d > 0 and d % SENTINEL == 0


def _label(node, index: int) -> str:
    return f"'{node.name or (node.output[0] if node.output else index)}' ({node.op_type})"


def rebatch(model, new_batch: int, own: bool):
    """(the model with its batch-pinning Reshape constants rewritten for `new_batch`, a
    :class:`Rebatch` report); the model unchanged and None when no input has a fixed batch
    other than `new_batch`. `own`: the model may be changed in place (else it is copied)."""
    import onnx

    inits = {t.name for t in model.graph.initializer}
    fixed = {}
    for vi in model.graph.input:
        if vi.name in inits or not vi.type.HasField("tensor_type"):
            continue
        dims = vi.type.tensor_type.shape.dim
        if len(dims) and dims[0].HasField("dim_value") and dims[0].dim_value > 0:
            fixed[vi.name] = int(dims[0].dim_value)
    olds = set(fixed.values()) - {new_batch}
    if len(olds) != 1:  # none fixed, already the batch, or inputs of different batches: no rewrite
        return model, None
    old = olds.pop()
    report = Rebatch(old, new_batch)
    if not own:
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        model = copy
    graph = model.graph
    literals = _literals(graph, onnx)
    done, overrides = set(), {}
    order, cyclic = topological_indices(graph.node)
    order += cyclic  # (an invalid graph's cycle at the end, as it is)
    for _ in range(_MAX_ROUNDS):
        dims = _sentinel_dims(model, onnx, fixed, overrides)
        changed = False
        # Shapes downstream of a constant rewritten in this round are stale, and a Reshape that
        # keeps a literal leading dim can drop the batch into another dim (its -1): rewrite
        # nothing below either until inference has run again.
        stale: set = set()
        for index in order:
            node = graph.node[index]
            outs = [o for o in node.output if o]
            if any(x in stale for x in node.input):
                stale.update(outs)
                continue
            if node.op_type not in ("Reshape", "Expand") or node.domain not in ("", "ai.onnx") or len(node.input) < 2:
                continue
            name = node.input[1]
            data = dims.get(node.input[0])
            if name not in literals or index in done or not data:
                continue
            value = literals[name].reshape(-1)
            rule = _reshape_target if node.op_type == "Reshape" else _expand_target
            targets = rule(value, data, old, new_batch)
            if targets is None:
                if node.op_type == "Reshape" and any(_carries_batch(d) for d in data) and value.size and \
                        int(value[0]) not in (0, -1):
                    stale.update(outs)
                continue
            new_value, probe = targets
            new_name = f"{name}__batch{new_batch}_{index}"
            graph.initializer.append(onnx.numpy_helper.from_array(new_value, new_name))
            literals[new_name], overrides[new_name] = new_value, probe
            node.input[1] = new_name
            done.add(index)
            report.rewritten.append((_label(node, index), name, tuple(int(v) for v in value),
                                     tuple(int(v) for v in new_value)))
            stale.update(outs)
            changed = True
        if not changed:
            break
    report.pins = _pins(graph, literals, old, done) + _data_pins(graph, dims, old)
    return model, report


def _reshape_target(value, data, old: int, new: int):
    """(the Reshape target for the new batch, the same for the sentinel batch), or None when the
    target does not start with the data's leading batch (see :func:`_batch_factor`)."""
    if not value.size or not _carries_batch(data[0]) or any(d is None for d in data[1:]):
        return None
    m = _batch_factor(int(value[0]), old, data[0] // SENTINEL, data[1:])
    if m is None:
        return None
    new_value, probe = value.copy(), value.copy()
    new_value[0], probe[0] = new * m, SENTINEL * m
    return new_value, probe


def _expand_target(value, data, old: int, new: int):
    """An Expand target restating the data's batch: where the (right-aligned) data dim is
    batch x a and the target says old x a, Expand keeps that dim, so the target must say
    new x a. None when no entry is such."""
    shift = value.size - len(data)
    new_value, probe, hit = value.copy(), value.copy(), False
    for i, d in enumerate(data):
        k = i + shift
        if 0 <= k < value.size and _carries_batch(d) and int(value[k]) == old * (d // SENTINEL):
            new_value[k], probe[k], hit = new * (d // SENTINEL), d, True
    return (new_value, probe) if hit else None


def _batch_factor(first: int, old: int, merged: int, rest) -> Optional[int]:
    """m when a Reshape's target starting with `first` keeps the data's batch in front: the data
    leads with batch x `merged` then `rest`; `first` is old x m where m merges the next dims
    (merged x rest[0] x ... x rest[j-1], j >= 0) or splits the merged ones off (m divides
    `merged`, as (B*heads, ...) -> (B, heads, ...)). None otherwise."""
    if first <= 0 or first % old:
        return None
    m = first // old
    if merged % m == 0:
        return m
    k = merged
    for d in rest:
        k *= int(d)
        if k == m:
            return m
        if k > m:
            return None
    return None


def _pins(graph, literals, old: int, done) -> list:
    """The literal shape constants left that hold the old batch: (node label, its output,
    constant, value, "shape")."""
    pins = []
    for index, node in enumerate(graph.node):
        pos = _SHAPE_INPUT.get(node.op_type)
        if pos is None or index in done or len(node.input) <= pos or node.input[pos] not in literals:
            continue
        value = literals[node.input[pos]].reshape(-1)
        batch_major = value.size and value[0] != old and value[0] % old == 0 and node.op_type == "Reshape"
        if old in value.tolist() or batch_major:
            pins.append((_label(node, index), node.output[0] if node.output else "", node.input[pos],
                         tuple(int(v) for v in value), "shape"))
    return pins


def _const_shapes(graph) -> Dict[str, tuple]:
    """The shapes of the initializers and Constant nodes' tensors, by name."""
    shapes = {t.name: tuple(int(d) for d in t.dims) for t in graph.initializer}
    for n in graph.node:
        if n.op_type == "Constant" and n.output:
            for a in n.attribute:
                if a.name == "value":
                    shapes[n.output[0]] = tuple(int(d) for d in a.t.dims)
    return shapes


def _data_pins(graph, dims, old: int) -> list:
    """Constant tensors traced at the old batch (a class token expanded to (2, 1, 32) and
    stored) that meet data carrying the batch in one node: (node label, output, constant, shape,
    "data")."""
    shapes = _const_shapes(graph)
    pins = []
    for index, node in enumerate(graph.node):
        if not any(_carries_batch((dims.get(x) or (None,))[0]) for x in node.input if x):
            continue
        for x in node.input:
            shape = shapes.get(x)
            if shape and len(shape) >= 2 and shape[0] == old:
                pins.append((_label(node, index), node.output[0] if node.output else "", x, shape, "data"))
    return pins


def pin_hint(report: Optional[Rebatch], graph, failed_output: Optional[str]) -> str:
    """A sentence naming the constants that pin the old batch, those upstream of the tensor
    `failed_output` first; '' when there are none."""
    if report is None:
        return ""
    producer = {o: n for n in graph.node for o in n.output if o}
    pins = list(report.pins)
    failed = producer.get(failed_output)
    if failed is not None:  # a constant of the failing node itself with a dim of the old batch
        shapes = _const_shapes(graph)
        index = next(k for k, n in enumerate(graph.node) if n.output and n.output[0] == failed.output[0])
        pins = [(_label(failed, index), failed_output, x, shapes[x], "data") for x in failed.input
                if len(shapes.get(x, ())) >= 2 and report.old in shapes[x]
                and not any(p[2] == x for p in pins)] + pins
    if not pins:
        return (f"the model was exported at a fixed batch of {report.old}: a constant traced at that batch "
                f"may hold it. Export it with a dynamic batch (torch.onnx.export dynamic_axes / "
                f"dynamic_shapes) or import it at batch {report.old}")
    upstream, stack = set(), [failed_output] if failed_output else []
    while stack:
        t = stack.pop()
        if t in upstream or t not in producer:
            continue
        upstream.add(t)
        stack.extend(x for x in producer[t].input if x)
    pins = [p for p in pins if p[1] in upstream] or pins
    shown = "; ".join(f"constant '{c}' = {v}, the shape of node {label}" if kind == "shape" else
                      f"constant '{c}' of shape {v}, an input of node {label}" for label, _, c, v, kind in pins[:4])
    more = f" (and {len(pins) - 4} more)" if len(pins) > 4 else ""
    return (f"the model was exported at a fixed batch of {report.old}, and constants hold that batch, so it "
            f"cannot be imported at batch {report.new}: {shown}{more}. Export it with a dynamic batch "
            f"(torch.onnx.export dynamic_axes / dynamic_shapes) or import it at batch {report.old}")


def check_outputs(importer, report: Rebatch) -> None:
    """An output the export declared at its batch must come out at the new one: a constant
    that pins the batch can also import without an error (ConvNeXt's dynamo export gathers
    its pooled features with indices traced at batch 2) and compute the wrong rows."""
    for o in importer.graph.output:
        declared = importer._type_dims(o.type)
        got = _computed_dims(importer.values.get(o.name))
        if declared and declared[0] == report.old and got and isinstance(got[0], int) and got[0] != report.new:
            importer.current_output = o.name
            raise Error(f"ONNX output '{o.name}' comes out with {got[0]} rows (shape {tuple(got)}) at "
                        f"batch_size={report.new}")


def _computed_dims(value) -> Optional[tuple]:
    """The shape autotile's own inference gives an imported output (ONNX's inference, run with
    the old constants, can disagree with what the graph computes)."""
    if isinstance(value, np.ndarray):
        return value.shape
    if value is None:
        return None
    try:
        _, out, _ = value.infer_shape_partial()
    except Error:
        raise  # shapes that disagree at the new batch (a Concat of a stored (2, 1, 32) token)
    except Exception:  # no shape known: nothing to check
        return None
    return tuple(int(d) for d in out[0]) if out and out[0] is not None and all(int(d) > 0 for d in out[0]) else None
