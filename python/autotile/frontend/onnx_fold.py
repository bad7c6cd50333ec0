"""Constant folding for the ONNX importer.

Exporters compute shapes and weights with small constant subgraphs (``Shape -> Gather ->
Unsqueeze -> Concat -> Reshape``, ``ConstantOfShape`` weights, ``Unsqueeze`` of a BatchNorm
scale). Whenever every input of such a node is known at import time, the importer runs the
node here, in NumPy, instead of emitting an operator: the result is a constant that later
becomes a shape attribute or a parameter.

A dimension unknown at import time (a symbolic batch size with no ``batch_size`` given) is
carried as a :class:`SymDim` inside a NumPy object array, so shape arithmetic that only moves
dimensions around (Gather, Concat, Slice, Unsqueeze...) still folds; arithmetic on a SymDim
raises :class:`NotFoldable` and the consumer reports the tensor at fault.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

import numpy as np

from .onnx_values import NotFoldable, SymDim  # noqa: F401  (re-exported: converters import them here)


def has_symbolic(value) -> bool:
    """Whether a folded value still holds an unknown dimension."""
    return isinstance(value, np.ndarray) and value.dtype == object and any(isinstance(v, SymDim) for v in value.flat)


def normalize(value: np.ndarray) -> np.ndarray:
    """Object arrays that turned out to hold only integers become int64 arrays."""
    if isinstance(value, np.ndarray) and value.dtype == object and not has_symbolic(value):
        return value.astype(np.int64)
    return value


def shape_value(shape) -> np.ndarray:
    """The 1-D int64 (or object, if some dims are SymDim) array ONNX's Shape op returns."""
    if any(isinstance(d, SymDim) for d in shape):
        return np.array(list(shape), dtype=object)
    return np.array(shape, dtype=np.int64)


def slice_range(start: int, end: int, step: int, dim: int) -> range:
    """The indices ONNX Slice takes along one axis of size `dim`. Negative bounds count from
    the end; then starts and ends are clamped to [0, dim] for a positive step and to
    [0, dim-1] (starts) and [-1, dim-1] (ends) for a negative one, so an end of -1 after
    clamping means "through index 0". (Python's ``slice.indices`` differs: it clamps a
    too-negative start of a negative step to -1, and its stop of -1 fed back into ``slice``
    means the last element.)"""
    if step == 0:
        raise ValueError("slice step is 0")
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        return range(min(max(start, 0), dim), min(max(end, 0), dim), step)
    return range(min(max(start, 0), dim - 1), min(max(end, -1), dim - 1), step)


def range_slice(r: range) -> slice:
    """A NumPy basic-indexing slice selecting exactly the indices of `r` (from :func:`slice_range`)."""
    return slice(r.start, None if r.stop < 0 else r.stop, r.step)


# ----------------------------------------------------------------------------- folders
# Each folder takes the node context (attributes, opset; see onnx_import.NodeContext) and the
# constant input values (None for an absent optional input) and returns the output values.

def _axes(ctx, values, index: int, since: int, name: str = "axes") -> Optional[List[int]]:
    """Axes from the attribute (opset < since) or the input (opset >= since)."""
    if ctx.opset >= since:
        v = values[index] if len(values) > index else None
        return None if v is None else [int(a) for a in np.asarray(v).ravel()]
    a = ctx.attr(name)
    return None if a is None else [int(x) for x in a]


def _norm_axis(axis: int, rank: int, ctx) -> int:
    if not -rank <= axis < rank:
        raise ctx.error(f"axis {axis} is out of range for rank {rank}")
    return axis % rank


def _constant(ctx, values):
    return [ctx.constant_attr_value()]


def _constant_of_shape(ctx, values):
    shape = normalize(np.asarray(values[0]))
    if shape.dtype == object:
        raise NotFoldable("its shape holds an unknown dimension")
    dims = [int(d) for d in shape.ravel()]
    if any(d < 0 for d in dims):
        raise ctx.error(f"negative dimension in shape {dims}")
    if int(np.prod(dims, dtype=object)) > MAX_FOLD_ELEMENTS:
        raise NotFoldable(f"a constant of shape {dims} is too large to fold")
    fill = ctx.attr("value")
    fill = np.zeros(1, np.float32) if fill is None else fill
    return [np.full(tuple(int(d) for d in shape.ravel()), fill.ravel()[0], dtype=fill.dtype)]


def _gather(ctx, values):
    data, idx = values
    axis = ctx.attr("axis", 0)
    axis = _norm_axis(axis, data.ndim, ctx)
    idx = np.asarray(idx).astype(np.int64)
    idx = np.where(idx < 0, idx + data.shape[axis], idx)
    return [normalize(np.take(data, idx, axis=axis))]


def _concat(ctx, values):
    parts = [np.asarray(v) for v in values if v is not None]
    axis = _norm_axis(ctx.attr("axis", 0), parts[0].ndim, ctx)
    if any(p.dtype == object for p in parts):
        parts = [p.astype(object) for p in parts]
    return [normalize(np.concatenate(parts, axis=axis))]


def _unsqueeze(ctx, values):
    data = np.asarray(values[0])
    axes = _axes(ctx, values, 1, 13)
    out_rank = data.ndim + len(axes)
    out = data
    for a in sorted(_norm_axis(a, out_rank, ctx) for a in axes):
        out = np.expand_dims(out, a)
    return [out]


def _squeeze(ctx, values):
    data = np.asarray(values[0])
    axes = _axes(ctx, values, 1, 13)
    if axes is None:
        return [np.squeeze(data)]
    return [np.squeeze(data, axis=tuple(_norm_axis(a, data.ndim, ctx) for a in axes))]


def _reshape(ctx, values):
    data = np.asarray(values[0])
    if ctx.opset >= 5:
        shape = normalize(np.asarray(values[1]))
    else:
        shape = np.asarray(ctx.attr("shape"))
    if shape.dtype == object:
        raise NotFoldable("the target shape holds an unknown dimension")
    shape = [int(d) for d in shape.ravel()]
    if not ctx.attr("allowzero", 0):
        shape = [data.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return [data.reshape(shape)]


def _flatten(ctx, values):
    data = np.asarray(values[0])
    axis = ctx.attr("axis", 1)
    axis = axis + data.ndim if axis < 0 else axis
    lead = int(np.prod(data.shape[:axis], dtype=np.int64))
    return [data.reshape(lead, int(np.prod(data.shape[axis:], dtype=np.int64)))]


def _transpose(ctx, values):
    perm = ctx.attr("perm")
    return [np.transpose(values[0], perm)]


def _gather_elements(ctx, values):
    """GatherElements in NumPy (onnx's reference evaluator mis-gathers along an axis of more
    than 64 entries, e.g. a (1, 512) token-type buffer indexed by position ids)."""
    data, idx = np.asarray(values[0]), np.asarray(values[1]).astype(np.int64)
    if data.ndim != idx.ndim:
        raise ctx.error(f"indices of rank {idx.ndim} for data of rank {data.ndim}; GatherElements needs equal ranks")
    axis = _norm_axis(ctx.attr("axis", 0), data.ndim, ctx)
    size = data.shape[axis]
    if idx.size and (idx.max() >= size or idx.min() < -size):
        raise ctx.error(f"index {int(idx.max() if idx.max() >= size else idx.min())} is out of range for axis "
                        f"{axis} of size {size}")
    for d, (n, m) in enumerate(zip(idx.shape, data.shape)):
        if d != axis and n > m:
            raise ctx.error(f"indices of shape {idx.shape} exceed data of shape {data.shape} on axis {d}")
    # Indices may be smaller than the data on the other axes: those take the leading entries.
    data = data[tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(idx.shape))]
    return [normalize(np.take_along_axis(data, np.where(idx < 0, idx + size, idx), axis=axis))]


def _slice(ctx, values):
    data = np.asarray(values[0])
    if ctx.opset >= 10:
        starts, ends = values[1], values[2]
        axes = values[3] if len(values) > 3 else None
        steps = values[4] if len(values) > 4 else None
        for v in (starts, ends, axes, steps):
            if v is not None and np.asarray(v).dtype == object:
                raise NotFoldable("its slice bounds hold an unknown dimension")
    else:
        starts, ends, axes, steps = ctx.attr("starts"), ctx.attr("ends"), ctx.attr("axes"), None
    starts = [int(s) for s in np.asarray(starts).ravel()]
    ends = [int(e) for e in np.asarray(ends).ravel()]
    axes = list(range(len(starts))) if axes is None else [int(a) for a in np.asarray(axes).ravel()]
    steps = [1] * len(starts) if steps is None else [int(s) for s in np.asarray(steps).ravel()]
    index = [slice(None)] * data.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        if st == 0:
            raise ctx.error(f"slice step of axis {a} is 0")
        a = _norm_axis(a, data.ndim, ctx)
        index[a] = range_slice(slice_range(s, e, st, data.shape[a]))
    return [normalize(data[tuple(index)])]


def _cast(ctx, values):
    from onnx import helper

    dtype = helper.tensor_dtype_to_np_dtype(ctx.attr("to"))
    value = np.asarray(values[0])
    if value.dtype == object:  # symbolic shape values stay integers
        if not np.issubdtype(dtype, np.integer):
            raise NotFoldable("cannot cast an unknown dimension to a non-integer type")
        return [value]
    return [value.astype(dtype)]


def _binary(fn: Callable) -> Callable:
    def fold(ctx, values):
        a, b = (np.asarray(v) for v in values)
        return [normalize(np.asarray(fn(a, b)))]

    return fold


def _div(a, b):
    if np.issubdtype(a.dtype, np.integer) and np.issubdtype(b.dtype, np.integer):
        q = np.abs(a) // np.abs(b)  # ONNX integer division truncates toward zero
        return (np.sign(a) * np.sign(b) * q).astype(np.result_type(a, b))
    return a / b


def _same_type(fn):
    def wrapped(a, b):
        out = fn(a, b)
        if a.dtype != object and b.dtype != object and a.dtype == b.dtype:
            out = np.asarray(out).astype(a.dtype)
        return out

    return wrapped


def _identity(ctx, values):
    return [values[0]]


#: ONNX op type -> folder(ctx, values) -> outputs; used when every present input is constant.
FOLDERS: Dict[str, Callable] = {
    "Constant": _constant,
    "ConstantOfShape": _constant_of_shape,
    "Gather": _gather,
    "GatherElements": _gather_elements,
    "Concat": _concat,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Reshape": _reshape,
    "Flatten": _flatten,
    "Transpose": _transpose,
    "Slice": _slice,
    "Cast": _cast,
    "Identity": _identity,
    "Add": _binary(_same_type(np.add)),
    "Sub": _binary(_same_type(np.subtract)),
    "Mul": _binary(_same_type(np.multiply)),
    "Div": _binary(_same_type(_div)),
}


#: Largest constant (elements) folding may produce; bigger results are left to run time, so a
#: small file cannot make the importer allocate what a ConstantOfShape or Expand asks for.
MAX_FOLD_ELEMENTS = 1 << 28

#: Ops never folded by the generic evaluator: random values must be drawn at run time, and
#: control flow / sequences are not tensors autotile carries.
_NO_GENERIC = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
               "Bernoulli", "If", "Loop", "Scan", "SequenceConstruct", "SequenceAt", "SplitToSequence",
               "ConcatFromSequence", "Dropout"}


def _too_big(ctx) -> bool:
    """Whether ONNX shape inference says an output exceeds :data:`MAX_FOLD_ELEMENTS`."""
    for i in range(len(ctx.node.output)):
        dims = ctx.out_dims(i)
        if dims is not None and all(isinstance(d, int) for d in dims):
            if int(np.prod([max(d, 0) for d in dims], dtype=object)) > MAX_FOLD_ELEMENTS:
                return True
    return False


def _reference(ctx, values) -> list:
    """Evaluate one node with onnx's reference implementation (every standard op, exactly as
    the spec defines it), for constant inputs no hand-written folder covers."""
    import onnx
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    node = ctx.node
    inputs, feeds = [], {}
    for name, v in zip(node.input, values):
        if not name:
            continue
        v = np.asarray(v)
        if v.dtype == object:
            raise NotFoldable("an input holds an unknown dimension")
        inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)))
        feeds[name] = v
    outputs = [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in node.output if o]
    graph = helper.make_graph([node], "fold", inputs, outputs)
    model = helper.make_model(graph, opset_imports=list(ctx.imp.model.opset_import))
    try:
        results = ReferenceEvaluator(model).run(None, feeds)
    except Exception as e:  # the spec's own evaluator refused the values: name the node
        raise ctx.error(f"cannot evaluate this constant node at import time: {type(e).__name__}: {e}") from None
    it = iter(results)
    return [next(it) if o else None for o in node.output]


def fold(ctx, values, generic: bool = False) -> Optional[list]:
    """The node's outputs computed in NumPy, or None when it cannot be folded. With `generic`,
    ops without a hand-written folder are evaluated by onnx's reference implementation."""
    folder = FOLDERS.get(ctx.op_type)
    if folder is None and (not generic or ctx.op_type in _NO_GENERIC):
        return None
    if _too_big(ctx):
        return None
    from .onnx_fold_size import fold_elements

    try:
        # The size from the folded values themselves, before NumPy builds anything: shape
        # inference does not see a Range limit or an Expand shape computed by a Div of constants.
        elements = fold_elements(ctx, values)
    except NotFoldable:
        return None
    if elements is None or elements > MAX_FOLD_ELEMENTS:
        ctx.fold_refused = ("its result's size cannot be bounded before it is computed" if elements is None else
                            f"its result would hold {elements} elements, more than the {MAX_FOLD_ELEMENTS} "
                            f"the importer materialises")
        return None
    try:
        outs = folder(ctx, values) if folder is not None else _reference(ctx, values)
    except NotFoldable:
        return None
    except (ValueError, IndexError, KeyError, TypeError, MemoryError) as e:
        raise ctx.error(f"cannot fold this constant node: {type(e).__name__}: {e}") from None
    return [None if o is None else normalize(np.asarray(o)) for o in outs]  # NumPy scalars become 0-d arrays
