"""ONNX converters that cut a tensor into parts or join parts: Slice, Split and Concat, with the
checks the ONNX spec makes (Split's sizes sum to the axis, each Slice axis named once, starts,
ends, axes and steps of one length) and statically empty tensors.

Empty tensors: a Slice or Split part that holds no element (Phi-3's ``q[..., rotary_dim:]``
when the rotary factor is 1, concatenated back) is carried as an empty NumPy constant when
every node that reads it is a Concat, which drops it. Any other reader (or a graph output)
would compute on an empty tensor, which autotile does not do: that is an Error naming the node,
the tensor and its reader.
"""
from __future__ import annotations

import numpy as np

from .onnx_fold import SymDim, range_slice, slice_range
from .onnx_registry import _ints, _norm_axis, _slice_axis, converter


# ----------------------------------------------------------------------------- empty tensors

def _is_empty_const(ctx, i: int) -> bool:
    return ctx.is_const(i) and np.asarray(ctx.const(i)).size == 0


def empty_output(ctx, k: int, dims, axis: int, why: str) -> np.ndarray:
    """Output k of the node, which holds no element (``why`` says how): an empty constant of
    shape `dims` with `axis` at 0 when only Concat nodes read it (or Shape / Size, when `dims`
    are all known), else an Error naming the node, the tensor and the reader that would
    compute on it."""
    name = ctx.node.output[k]
    if any(o.name == name for o in ctx.imp.graph.output):
        raise ctx.error(f"{why}: the empty tensor '{name}' is a graph output; autotile does not compute empty "
                        f"tensors (empty tensors are not supported except as Concat inputs, which are dropped)")
    static = dims is not None and all(isinstance(d, int) and not isinstance(d, SymDim) for d in dims)
    # Concat drops it; Shape and Size read only its (static) shape
    allowed = ("Concat", "Shape", "Size") if static else ("Concat",)
    for reader in ctx.imp.graph.node:
        if name in reader.input and (reader.op_type not in allowed or reader.domain not in ("", "ai.onnx")):
            raise ctx.error(f"{why}: the empty tensor '{name}' is read by node "
                            f"'{reader.name or reader.output[0]}' ({reader.op_type}), which would compute on it; "
                            f"empty tensors are not supported except as Concat inputs, which are dropped")
    if dims is None:
        raise ctx.error(f"{why}: carrying the empty tensor '{name}' to its Concat needs the input's rank, which "
                        f"is unknown; {ctx.imp.unbound_hint()}")
    # Unknown dims are written as 0: only Concat reads this value, and it drops it unseen.
    shape = [d if isinstance(d, int) and not isinstance(d, SymDim) else 0 for d in dims]
    shape[axis] = 0
    return np.zeros(shape, dtype=ctx.imp.elem_type(ctx.node.input[0]) or np.float32)


@converter("Concat")
def concat(ctx):
    present = [i for i in range(ctx.num_inputs) if ctx.has_input(i)]
    rank = next((ctx.rank(i) for i in present if ctx.rank(i) is not None), None)
    axis = _norm_axis(ctx, int(ctx.attr("axis", 1 if ctx.opset < 4 else 0)), rank)
    kept = [i for i in present if not _is_empty_const(ctx, i)]  # an empty part adds nothing
    if not kept:  # every input empty: so is the result
        return [np.concatenate([np.asarray(ctx.const(i)) for i in present], axis=axis)]
    inputs = [ctx.input(i) for i in kept]
    if len(inputs) == 1:
        return inputs
    return [ctx.op("Concat", *inputs, dim=axis, num_args=len(inputs))]


# ----------------------------------------------------------------------------- Split

def _split_sizes(ctx, n: int, axis: int, size):
    """Split's part sizes (None: equal parts of an axis of unknown size), checked as the ONNX
    spec states them: sizes >= 0 that sum to the axis; before opset 18 no sizes means equal
    parts of an axis that divides evenly; from opset 18 exactly one of 'split' and
    'num_outputs', which is the node's number of outputs (the last chunk may be smaller)."""
    if ctx.opset >= 13:
        parts = _ints(ctx.const(1, "split")) if ctx.has_input(1) else None
    else:
        parts = ctx.attr("split")
        parts = None if not parts else [int(p) for p in parts]
    if ctx.opset >= 18:
        if ctx.has_attr("num_outputs") == (parts is not None):
            raise ctx.error("exactly one of the input 'split' and the attribute 'num_outputs' must be given "
                            f"(opset {ctx.opset})")
        if parts is None:
            k = int(ctx.attr("num_outputs"))
            if k != n:
                raise ctx.error(f"num_outputs={k} but the node has {n} outputs")
            if size is None:
                return None
            chunk = -(-size // n)  # ceil: the last chunk is smaller
            last = size - chunk * (n - 1)
            if last < 0:
                raise ctx.error(f"num_outputs={n} cannot split axis {axis} of size {size}: chunks of {chunk} leave "
                                f"nothing for the last outputs")
            return [chunk] * (n - 1) + [last]
    if parts is None:
        if size is None:
            return None
        if size % n:
            raise ctx.error(f"axis {axis} of size {size} does not split evenly into {n} outputs (without 'split', "
                            f"ONNX Split makes equal parts before opset 18)")
        return [size // n] * n
    if len(parts) != n:
        raise ctx.error(f"split {tuple(parts)} has {len(parts)} sizes for {n} outputs")
    if any(p < 0 for p in parts):
        raise ctx.error(f"split {tuple(parts)} has a negative size; the ONNX spec requires sizes >= 0")
    if size is not None and sum(parts) != size:
        raise ctx.error(f"split {tuple(parts)} sums to {sum(parts)}, but axis {axis} of '{ctx.input_name(0)}' has "
                        f"size {size}; the ONNX spec requires them equal")
    return parts


@converter("Split")
def split(ctx):
    n = len(ctx.node.output)
    dims = ctx.dims(0)
    axis = _norm_axis(ctx, int(ctx.attr("axis", 0)), None if dims is None else len(dims))
    size = dims[axis] if dims is not None and isinstance(dims[axis], int) else None
    parts = _split_sizes(ctx, n, axis, size)
    x = ctx.input(0)
    if parts is None or (len(set(parts)) == 1 and parts[0] > 0):
        out = ctx.op("SliceChannel", x, num_outputs=n, axis=axis)
        return [out[i] for i in range(n)]
    outs, begin = [], 0
    for i, p in enumerate(parts):
        if p == 0:
            outs.append(empty_output(ctx, i, dims, axis, f"part {i} of split {tuple(parts)} is empty"))
        else:
            outs.append(_slice_axis(ctx, x, axis, begin, begin + p, f"part{i}"))
        begin += p
    return outs


# ----------------------------------------------------------------------------- Slice

def _sliced_dims(dims, starts, ends, axes, steps):
    """The dims of Slice's output (an empty one's shape, which a Shape reader sees): each sliced
    axis of known size as long as its slice, of unknown size None (not static)."""
    out = list(dims)
    for s, e, a, st in zip(starts, ends, axes, steps):
        known = isinstance(dims[a], int) and not isinstance(dims[a], SymDim)
        out[a] = len(slice_range(s, e, st, dims[a])) if known else None
    return out


def _strided_slice(ctx, x, dims, starts, ends, axes, steps):
    """Slice with steps (negative ones too) as one MXNet ``slice`` over the leading axes."""
    if dims is None or not all(isinstance(d, int) for d in dims):
        raise ctx.error(f"Slice with steps {steps} needs the input's static shape; " + ctx.imp.unbound_hint())
    last = max(axes) + 1
    begin, end, step = [None] * last, [None] * last, [1] * last
    for a, st in zip(axes, steps):
        if st == 0:
            raise ctx.error(f"slice step of axis {a} is 0")
    for s, e, a, st in zip(starts, ends, axes, steps):
        r = range_slice(slice_range(s, e, st, dims[a]))
        if len(range(dims[a])[r]) == 0:
            return empty_output(ctx, 0, _sliced_dims(dims, starts, ends, axes, steps), a,
                                f"slice [{s}:{e}:{st}] of axis {a} (size {dims[a]}) is empty")
        begin[a], end[a], step[a] = r.start, r.stop, r.step
    return ctx.op("slice", x, begin=tuple(begin), end=tuple(end), step=tuple(step))


@converter("Slice")
def slice_(ctx):
    dims = ctx.dims(0)
    if ctx.opset >= 10:
        starts, ends = _ints(ctx.const(1, "starts")), _ints(ctx.const(2, "ends"))
        axes = _ints(ctx.const(3, "axes")) if ctx.has_input(3) else list(range(len(starts)))
        steps = _ints(ctx.const(4, "steps")) if ctx.has_input(4) else [1] * len(starts)
    else:
        starts, ends = list(ctx.attr("starts")), list(ctx.attr("ends"))
        axes, steps = list(ctx.attr("axes") or range(len(starts))), [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ctx.error(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} must have one value per "
                        f"sliced axis each")
    rank = None if dims is None else len(dims)
    axes = [_norm_axis(ctx, a, rank) for a in axes]
    if len(set(axes)) != len(axes):
        raise ctx.error(f"axes {axes} name an axis more than once")
    x = ctx.input(0)
    if any(s != 1 for s in steps):
        return [_strided_slice(ctx, x, dims, starts, ends, axes, steps)]
    for s, e, a in zip(starts, ends, axes):
        size = dims[a] if dims is not None and isinstance(dims[a], int) else None
        if size is not None:
            r = slice_range(s, e, 1, size)
            if r.start >= r.stop:
                return [empty_output(ctx, 0, _sliced_dims(dims, starts, ends, axes, steps), a,
                                     f"slice [{s}:{e}] of axis {a} (size {size}) is empty")]
            s, e = r.start, r.stop
        elif s < 0 or e < 0:
            raise ctx.error(f"negative slice bounds on axis {a} need its size, which is unknown")
        x = _slice_axis(ctx, x, a, s, None if e >= 2 ** 31 - 1 else e, f"ax{a}")
    return [x]
