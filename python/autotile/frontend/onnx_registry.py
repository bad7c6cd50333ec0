"""The converter registry of the ONNX importer and the helpers every converter family shares.

Each family module (onnx_ops: constants, dense, conv/pool, shapes; onnx_ops_index; onnx_ops_math;
onnx_ops_nn; onnx_ops_rnn; onnx_ops_slice: Slice, Split, Concat; onnx_ops_moe: OneHot,
ScatterElements, TopK) registers its converters here with :func:`converter` and imports the
shared helpers from here; this module imports none of them, so the families form no import
circle. onnx_converters imports every family once, which fills :data:`CONVERTERS`.

A converter takes a :class:`~autotile.frontend.onnx_import.NodeContext` and returns one value
per ONNX output: a single-output Symbol, a NumPy array (a constant) or None (an output autotile
does not compute).
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

#: ONNX op type -> converter(ctx) -> one value per ONNX output
CONVERTERS: Dict[str, Callable] = {}


def converter(*op_types: str):
    """Register the decorated function as the converter of `op_types`."""

    def wrap(fn):
        for op in op_types:
            CONVERTERS[op] = fn
        return fn

    return wrap


def _ints(values) -> List[int]:
    return [int(v) for v in np.asarray(values).ravel()]


def _norm_axis(ctx, axis: int, rank: Optional[int], what: str = "axis") -> int:
    if axis >= 0:
        if rank is not None and axis >= rank:
            raise ctx.error(f"{what} {axis} is out of range for rank {rank}")
        return axis
    if rank is None:
        raise ctx.error(f"negative {what} {axis} needs the input's rank, which is unknown")
    if axis < -rank:
        raise ctx.error(f"{what} {axis} is out of range for rank {rank}")
    return axis + rank


def _axes_arg(ctx, since: int, index: int = 1, name: str = "axes") -> Optional[List[int]]:
    """Axes from the attribute (opset < since) or the constant input (opset >= since)."""
    if ctx.opset >= since:
        if not ctx.has_input(index):
            return None
        return _ints(ctx.const(index, name))
    a = ctx.attr(name)
    return None if a is None else [int(x) for x in a]


# ----------------------------------------------------------------------------- reshaping helpers

def _reshape(ctx, x, shape: Sequence[int], suffix: str = ""):
    return ctx.op("Reshape", x, shape=tuple(int(d) for d in shape), suffix=suffix)


def _reshape_to(ctx, x, dims: Sequence, suffix: str = "reshape"):
    """Reshape `x` to `dims` (ints; one unknown allowed, written as -1). The leading (batch)
    dim is written as -1 when the others are known, so the symbol works for any batch."""
    if len(dims) > 1 and all(isinstance(d, int) for d in dims[1:]):
        dims = [-1] + list(dims[1:])
    unknown = [i for i, d in enumerate(dims) if not isinstance(d, int)]
    if len(unknown) > 1:
        raise ctx.error(f"cannot restore shape {tuple(dims)} with more than one unknown dimension")
    return _reshape(ctx, x, [-1 if not isinstance(d, int) else d for d in dims], suffix)


def _flatten_at(ctx, x, axis: int, dims: Optional[tuple], suffix: str = ""):
    """ONNX Flatten: (prod(d[:axis]), prod(d[axis:])) as autotile Flatten or Reshape."""
    if axis == 1 and dims is not None and len(dims) >= 2:
        return ctx.op("Flatten", x, suffix=suffix)
    if axis == 0:
        return _reshape(ctx, x, (1, -1), suffix)
    if dims is None:
        raise ctx.error(f"Flatten at axis {axis} needs the input's shape, which is unknown")
    tail, head = dims[axis:], dims[:axis]
    if all(isinstance(d, int) for d in tail):
        return _reshape(ctx, x, (-1, int(np.prod(tail, dtype=np.int64))), suffix)
    if all(isinstance(d, int) for d in head):
        return _reshape(ctx, x, (int(np.prod(head, dtype=np.int64)), -1), suffix)
    raise ctx.error(f"Flatten at axis {axis} of shape {dims}: too many unknown dimensions")


def _slice_axis(ctx, x, axis: int, begin: int, end: Optional[int], suffix: str = ""):
    """x[begin:end] along `axis`; end None means to the end (MXNet writes it as 'None')."""
    if end is None:
        return ctx.op("slice_axis", x, axis=axis, begin=begin, attr={"end": "None"}, suffix=suffix)
    return ctx.op("slice_axis", x, axis=axis, begin=begin, end=end, suffix=suffix)


def _expand_to_rank(ctx, x, rank: int, target: int, suffix: str):
    for k in range(target - rank):
        x = ctx.op("expand_dims", x, axis=0, suffix=f"{suffix}{k}")
    return x


def _ranked(ctx, i: int, rank: Optional[int], other: Optional[int]):
    """Input i with leading 1-dims added up to the other operand's rank (NumPy alignment)."""
    if rank is None or other is None or rank >= other:
        return ctx.input(i)
    if ctx.is_const(i) and not ctx.is_weight(i):
        c = np.asarray(ctx.const(i))
        return ctx.param(c.reshape((1,) * (other - rank) + c.shape), ctx.input_name(i), f"r{other}")
    # any 0-d ONNX tensor (a weight, Exp of a 0-d weight: CLIP's logit scale) is a (1,) autotile
    # tensor (autotile tensors have rank >= 1): aligned from rank 1, not expanded to other + 1
    rank = max(rank, 1)
    return _expand_to_rank(ctx, ctx.input(i), rank, other, f"in{i}_dims")


# ----------------------------------------------------------------------------- constant indices

def check_index_range(ctx, idx, size, axis: int, i: int = 1):
    """Error naming the node unless every constant index of input i lies in [-size, size) of
    `axis` (onnxruntime refuses the model; caught at import, not when a step runs)."""
    idx = np.asarray(idx)
    if size is None or not idx.size:
        return
    bad = idx[(idx >= size) | (idx < -size)]
    if bad.size:
        raise ctx.error(f"index {int(bad.ravel()[0])} in '{ctx.input_name(i)}' is out of range for axis {axis} of "
                        f"size {size} (valid: [{-size}, {size}))")


def check_index_tuples(ctx, idx, shape, i: int = 1):
    """As :func:`check_index_range` for GatherND / ScatterND index tuples, which lie on the last
    axis of `idx` and index the leading axes of the data of shape `shape`."""
    idx = np.asarray(idx)
    if shape is None or not idx.size or idx.ndim < 1 or idx.shape[-1] > len(shape):
        return
    for axis in range(idx.shape[-1]):
        check_index_range(ctx, idx[..., axis], shape[axis], axis, i)
