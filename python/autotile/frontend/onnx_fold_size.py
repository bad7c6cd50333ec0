"""How many elements a constant fold would produce, computed before NumPy builds it.

ONNX shape inference only sees sizes it can propagate; a ``Range`` whose limit is a ``Div`` of
constants, or an ``Expand`` to such a shape, is invisible to it, and a file of a few hundred
bytes could make the folder allocate gigabytes (issue 31). :func:`fold_elements` gives the
element count of a node's outputs from the folded input values themselves: an exact rule for
every op that can make its output larger than its inputs, the inputs' own size for ops that
cannot, and for the rest ONNX shape inference on the one node with its constant inputs
given. A count it cannot bound is ``None``: the node is not folded.
"""
from __future__ import annotations

import math
from typing import Callable, Dict, List, Optional

import numpy as np

from .onnx_values import NotFoldable, SymDim

#: ops none of whose outputs holds more elements than their largest input (unary math,
#: normalisations, reductions, shape movement, slicing, gathers along existing indices...)
NO_GROWTH = set("""
Abs Acos Acosh Asin Asinh Atan Atanh BitwiseNot Cast CastLike Ceil Celu Clip Cos Cosh Elu Erf Exp Floor
Gelu HardSigmoid HardSwish Hardmax Identity IsInf IsNaN LeakyRelu Log LogSoftmax Mish Neg Not Reciprocal Relu
Round Selu Shrink Sigmoid Sign Sin Sinh Softmax Softplus Softsign Sqrt Tan Tanh ThresholdedRelu
BatchNormalization InstanceNormalization LayerNormalization GroupNormalization LpNormalization
MeanVarianceNormalization CumSum Trilu ReverseSequence DepthToSpace SpaceToDepth
Reshape Flatten Squeeze Unsqueeze Transpose Slice Split Shape Size Compress Unique TopK
ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp
ReduceSumSquare ArgMax ArgMin GatherElements ScatterElements ScatterND Scatter LRN
""".split())

#: ops whose output is the NumPy broadcast of all their inputs
BROADCAST = set("""
Add Sub Mul Div Pow Mod BitShift And Or Xor Equal Less LessOrEqual Greater GreaterOrEqual Where Max Min
Sum Mean PRelu BitwiseAnd BitwiseOr BitwiseXor
""".split())


def _ints(value) -> List[int]:
    value = np.asarray(value)
    if value.dtype == object:
        if any(isinstance(v, SymDim) for v in value.flat):
            raise NotFoldable("a size holds an unknown dimension")
        value = value.astype(np.int64)
    return [int(v) for v in value.ravel()]


def _prod(dims) -> int:
    return math.prod(max(int(d), 0) for d in dims)


def _broadcast(shapes) -> List[int]:
    """The broadcast shape of `shapes`, each dim the largest size (an upper bound when they
    do not broadcast: the evaluator then refuses them)."""
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        for k, d in enumerate(s):
            i = rank - len(s) + k
            out[i] = 0 if (d == 0 and out[i] in (0, 1)) else max(out[i], int(d))
    return out


def _present(values):
    return [np.asarray(v) for v in values if v is not None]


def _value(values, i):
    return values[i] if i < len(values) and values[i] is not None else None


def _range(ctx, values):
    start, limit, delta = (np.asarray(v).ravel() for v in values[:3])
    start, limit, delta = (float(v[0]) if v.size else 0.0 for v in (start, limit, delta))
    if not all(math.isfinite(v) for v in (start, limit, delta)):
        raise ctx.error(f"Range bounds start={start}, limit={limit}, delta={delta} are not all finite")
    if delta == 0:
        raise ctx.error("Range delta is 0")
    return [max(math.ceil((limit - start) / delta), 0)]


def _constant_of_shape(ctx, values):
    return [_prod(_ints(values[0]))]


def _expand(ctx, values):
    return [_prod(_broadcast([np.asarray(values[0]).shape, [abs(d) for d in _ints(values[1])]]))]


def _tile(ctx, values):
    data, reps = np.asarray(values[0]), _ints(values[1])
    return [_prod(d * r for d, r in zip(data.shape, reps))]


def _pad(ctx, values):
    data = np.asarray(values[0])
    rank = data.ndim
    if ctx.opset >= 11:
        pads = _ints(values[1])
        axes = _ints(values[3]) if _value(values, 3) is not None else list(range(rank))
    else:
        pads, axes = [int(p) for p in ctx.attr("pads", [])], list(range(rank))
    dims = list(data.shape)
    for k, a in enumerate(axes):
        if len(pads) == 2 * len(axes) and -rank <= a < rank:
            dims[a % rank] += pads[k] + pads[k + len(axes)]
    return [_prod(dims)]


def _resize(ctx, values):
    data = np.asarray(values[0])
    sizes = _value(values, 3) if ctx.op_type == "Resize" else None
    if sizes is not None and np.asarray(sizes).size:
        sizes = _ints(sizes)
        if ctx.opset >= 18 and ctx.attr("axes") is not None:
            dims = list(data.shape)
            for a, s in zip(ctx.attr("axes"), sizes):
                dims[a % max(data.ndim, 1)] = s
            return [_prod(dims)]
        return [_prod(sizes)]
    scales = _value(values, 2 if ctx.op_type == "Resize" and ctx.opset >= 11 else 1)
    if scales is None:
        scales = ctx.attr("scales")
    scales = np.asarray(scales, dtype=np.float64).ravel() if scales is not None else np.ones(data.ndim)
    if not np.all(np.isfinite(scales)):
        raise ctx.error(f"scales {scales.tolist()} are not finite")
    if ctx.opset >= 18 and ctx.attr("axes") is not None:
        full = np.ones(data.ndim)
        for a, s in zip(ctx.attr("axes"), scales):
            full[a % max(data.ndim, 1)] = s
        scales = full
    return [_prod(math.ceil(d * s) + 1 for d, s in zip(data.shape, scales))]


def _concat(ctx, values):
    return [sum(v.size for v in _present(values))]


def _gather(ctx, values):
    data, idx = np.asarray(values[0]), np.asarray(values[1])
    axis = ctx.attr("axis", 0)
    along = data.shape[axis] if -data.ndim <= axis < data.ndim else 1
    return [data.size // max(along, 1) * idx.size]


def _gather_nd(ctx, values):
    data, idx = np.asarray(values[0]), np.asarray(values[1])
    rows = idx.size // max(idx.shape[-1], 1) if idx.ndim else 1
    return [rows * data.size]


def _one_hot(ctx, values):
    return [np.asarray(values[0]).size * max(_ints(values[1])[:1] + [0])]


def _non_zero(ctx, values):
    data = np.asarray(values[0])
    return [max(data.ndim, 1) * data.size]


def _matmul(ctx, values):
    a, b = np.asarray(values[0]).shape, np.asarray(values[1]).shape
    if len(a) < 1 or len(b) < 1:
        return [0]
    m = a[-2] if len(a) >= 2 else 1
    n = b[-1] if len(b) >= 2 else 1
    return [_prod(_broadcast([a[:-2], b[:-2]])) * m * n]


def _gemm(ctx, values):
    a, b = np.asarray(values[0]), np.asarray(values[1])
    m = a.shape[1] if ctx.attr("transA", 0) and a.ndim == 2 else (a.shape[0] if a.ndim else 1)
    n = b.shape[0] if ctx.attr("transB", 0) and b.ndim == 2 else (b.shape[-1] if b.ndim else 1)
    return [m * n]


def _einsum(ctx, values):
    """At most the product of every index letter's size (the output's letters are a subset)."""
    eq = str(ctx.attr("equation", "")).replace(" ", "")
    terms = eq.split("->")[0].split(",")
    sizes: Dict[str, int] = {}
    for term, v in zip(terms, _present(values)):
        letters = term.replace("...", "")
        dims = v.shape[len(v.shape) - len(letters):] if letters else ()
        for ch, d in zip(letters, dims):
            sizes[ch] = max(sizes.get(ch, 1), int(d))
        if "..." in term:
            sizes["..."] = max(sizes.get("...", 1), _prod(v.shape[:len(v.shape) - len(letters)]))
    return [_prod(sizes.values())]


def _broadcast_rule(ctx, values):
    return [_prod(_broadcast([v.shape for v in _present(values)]))]


def _largest_input(ctx, values):
    sizes = [v.size for v in _present(values)]
    return [max(sizes, default=1)] * max(len(ctx.node.output), 1)


#: op type -> rule(ctx, values) -> element counts of the outputs
RULES: Dict[str, Callable] = {
    "Range": _range, "ConstantOfShape": _constant_of_shape, "Expand": _expand, "Tile": _tile, "Pad": _pad,
    "Resize": _resize, "Upsample": _resize, "Concat": _concat, "Gather": _gather, "GatherND": _gather_nd,
    "OneHot": _one_hot, "NonZero": _non_zero, "MatMul": _matmul, "MatMulInteger": _matmul, "Gemm": _gemm,
    "Einsum": _einsum, "EyeLike": _largest_input,
}


def _inferred(ctx, values) -> Optional[List[int]]:
    """Output element counts from ONNX shape inference on the node alone, its constant inputs
    given as initializers (so Range, ConstantOfShape... see their values); None if unknown."""
    import onnx
    from onnx import helper, numpy_helper

    node = ctx.node
    inputs, inits = [], []
    for name, v in zip(node.input, values):
        if not name or v is None:
            continue
        v = np.asarray(v)
        if v.dtype == object:
            raise NotFoldable("an input holds an unknown dimension")
        if v.size <= 4096:  # small inputs are the ones that can carry sizes
            inits.append(numpy_helper.from_array(v, name))
        else:
            inputs.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(v.dtype),
                                                        list(v.shape)))
    outputs = [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in node.output if o]
    graph = helper.make_graph([node], "size", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=list(ctx.imp.model.opset_import))
    try:
        inferred = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    except Exception:  # inference refused the node: the size stays unknown
        return None
    found = {}
    for vi in inferred.graph.output:
        tt = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tt.HasField("shape") and all(
                d.HasField("dim_value") for d in tt.shape.dim):
            found[vi.name] = _prod(d.dim_value for d in tt.shape.dim)
    counts = [found.get(o) for o in node.output if o]
    return None if any(c is None for c in counts) else counts


def fold_elements(ctx, values) -> Optional[int]:
    """The largest element count among the node's folded outputs, or None when it cannot be
    bounded before the node is evaluated (the node is then not folded)."""
    op = ctx.op_type
    try:
        if op in RULES:
            counts = RULES[op](ctx, values)
        elif op in NO_GROWTH or op in ("Constant", "Dropout"):
            counts = [max((v.size for v in _present(values)), default=0)]
            if op == "Constant":
                counts = [0]  # its value is already in the file
        elif op in BROADCAST:
            counts = _broadcast_rule(ctx, values)
        else:
            counts = _inferred(ctx, values)
    except (ValueError, TypeError, IndexError, OverflowError):
        return None  # malformed sizes: leave the node to its converter, which names the fault
    return None if counts is None else max(counts, default=0)
