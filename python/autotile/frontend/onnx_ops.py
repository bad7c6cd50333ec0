"""Per-op converters of the ONNX importer for constants, dense layers, activations, convolution
and pooling and the shape ops: one small function per ONNX op type, registered in
:data:`~autotile.frontend.onnx_registry.CONVERTERS`.

Each returns one value per ONNX output: a single-output Symbol built from registered
(MXNet-named) autotile ops, a NumPy array (a constant, e.g. the value of Shape) or None (an
output autotile does not compute, such as Dropout's mask). Slice, Split and Concat are in
onnx_ops_slice. Attributes that moved to inputs in later opsets (Squeeze/Unsqueeze/Reduce axes,
Reshape's shape, Dropout's ratio) are read from where
the model's opset puts them and must be constants.
"""
from __future__ import annotations

import math

import numpy as np

from .onnx_fold import SymDim, has_symbolic
from .onnx_registry import (_axes_arg, _expand_to_rank, _flatten_at, _ints, _norm_axis, _ranked, _reshape,
                            _reshape_to, _slice_axis, check_index_range, converter)


# ----------------------------------------------------------------------------- constants and shapes

@converter("Constant")
def constant(ctx):
    return [ctx.constant_attr_value()]


@converter("Shape")
def shape(ctx):
    dims = ctx.dims(0)
    if dims is None:
        raise ctx.error(f"the rank of '{ctx.input_name(0)}' is unknown, so its shape cannot be computed "
                        f"at import time")
    start, end = ctx.attr("start", 0), ctx.attr("end", None)
    dims = list(dims)[slice(start, end)] if ctx.opset >= 15 else list(dims)
    if any(isinstance(d, SymDim) for d in dims):
        return [np.array(dims, dtype=object)]
    return [np.array(dims, dtype=np.int64)]


@converter("ConstantOfShape")
def constant_of_shape(ctx):
    shape = ctx.const(0, "shape")  # a folded shape would have produced a constant already
    if not has_symbolic(shape):
        from .onnx_fold import MAX_FOLD_ELEMENTS

        raise ctx.error(f"a constant of shape {tuple(int(d) for d in shape.ravel())} is larger than the "
                        f"{MAX_FOLD_ELEMENTS} elements the importer materialises")
    raise ctx.error(f"shape '{ctx.input_name(0)}' depends on an unknown dimension; " + ctx.imp.unbound_hint())


@converter("Cast")
def cast(ctx):
    from onnx import helper

    try:
        to = np.dtype(helper.tensor_dtype_to_np_dtype(ctx.attr("to")))
    except (KeyError, TypeError, ValueError):
        raise ctx.error(f"cast to unknown element type {ctx.attr('to')!r}") from None
    elem = ctx.imp.elem_type(ctx.input_name(0))
    x = ctx.input(0)
    if elem is not None and np.dtype(elem) == to:
        return [x]
    return [ctx.op("Cast", x, dtype=str(to))]


@converter("Identity")
def identity(ctx):
    # A weight's other name is the same weight (Importer.alias_weight): the TorchScript
    # exporter writes Identity for parameters of equal values (two LayerNorms' ones) and for a
    # shared layer's later uses (ALBERT); each is trained once with the gradients of all its
    # uses, not as a constant copy left untrained.
    if ctx.is_const(0):
        if ctx.is_weight(0):
            ctx.imp.alias_weight(ctx.node.output[0], ctx.node.input[0])
        return [ctx.const(0)]
    return [ctx.input(0)]


# ----------------------------------------------------------------------------- dense

@converter("Gemm")
def gemm(ctx):
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    trans_a, trans_b = bool(ctx.attr("transA", 0)), bool(ctx.attr("transB", 0))
    has_c = ctx.has_input(2) and beta != 0.0
    a = ctx.input(0)
    if trans_a:
        a = ctx.op("transpose", a, axes=(1, 0), suffix="transA")
    if ctx.is_const(1):
        # FullyConnected computes data . weight^T: fold transB and alpha into the weight.
        b = np.asarray(ctx.const(1))
        if b.ndim != 2:
            raise ctx.error(f"B must be 2-D, got shape {b.shape}")
        weight = b if trans_b else b.T
        tag = "" if trans_b else "T"
        if alpha != 1.0:
            weight, tag = (weight * alpha).astype(b.dtype), tag + "scaled"
        w = ctx.input(1) if not tag else ctx.param(np.ascontiguousarray(weight), ctx.input_name(1), tag)
        n = weight.shape[0]
        bias = None
        if has_c and ctx.is_const(2):
            c = np.asarray(ctx.const(2)) * beta
            if c.size in (1, n) and (c.ndim <= 1 or (c.ndim == 2 and c.shape[0] == 1)):
                bias = np.broadcast_to(c.reshape(-1), (n,)).astype(b.dtype)
        if bias is not None:
            same = beta == 1.0 and ctx.const(2).shape == (n,)
            bsym = ctx.input(2) if same else ctx.param(np.ascontiguousarray(bias), ctx.input_name(2), "bias")
            return [ctx.op("FullyConnected", a, w, bsym, num_hidden=n, no_bias=False, flatten=True)]
        y = ctx.op("FullyConnected", a, w, num_hidden=n, no_bias=True, flatten=True, suffix="" if not has_c else "fc")
    else:
        y = ctx.op("dot", a, ctx.input(1), transpose_b=trans_b, suffix="" if not has_c and alpha == 1.0 else "dot")
        if alpha != 1.0:
            y = ctx.op("_mul_scalar", y, scalar=alpha, suffix="" if not has_c else "alpha")
    if not has_c:
        return [y]
    if ctx.is_const(2):
        c = np.asarray(ctx.const(2)) * beta
        c = c.reshape((1,) * (2 - c.ndim) + c.shape).astype(ctx.const(2).dtype)
        csym = ctx.param(np.ascontiguousarray(c), ctx.input_name(2), "beta" if beta != 1.0 else "2d")
    else:
        csym = ctx.input(2)
        if beta != 1.0:
            csym = ctx.op("_mul_scalar", csym, scalar=beta, suffix="beta")
        r = ctx.rank(2)
        if r is not None and r < 2:
            csym = _expand_to_rank(ctx, csym, r, 2, "c_dims")
    return [ctx.op("broadcast_add", y, csym)]


@converter("MatMul")
def matmul(ctx):
    ra, rb = ctx.rank(0), ctx.rank(1)
    if ra is None or rb is None:
        raise ctx.error("MatMul needs the ranks of both inputs, which are unknown")
    if ra == 1 and rb == 1:
        raise ctx.error("MatMul of two 1-D tensors yields a 0-d scalar, which autotile does not represent")
    if rb == 2 and ctx.is_const(1) and not ctx.is_const(0):
        # x . B with a constant B is a FullyConnected layer without bias (weight = B^T).
        b = np.asarray(ctx.const(1))
        w = ctx.param(np.ascontiguousarray(b.T), ctx.input_name(1), "T")
        return [ctx.op("FullyConnected", ctx.input(0), w, num_hidden=b.shape[1], no_bias=True, flatten=False)]
    a, b = ctx.input(0), ctx.input(1)
    if rb <= 2 or ra == 1:
        if ra == 1 and rb > 2:
            raise ctx.error(f"MatMul of a 1-D and a {rb}-D tensor is not supported")
        return [ctx.op("dot", a, b)]
    if ra == rb == 3 and ctx.shape(0) is not None and ctx.shape(0)[:1] == ctx.shape(1)[:1]:
        return [ctx.op("batch_dot", a, b)]
    sa, sb = ctx.need_shape(0, "to fold batch dims"), ctx.need_shape(1, "to fold batch dims")
    if sa[:-2] != sb[:-2]:  # NumPy broadcasting of the batch dims: align ranks, then expand
        try:
            batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
        except ValueError:
            raise ctx.error(f"MatMul batch dims of {sa} and {sb} do not broadcast") from None
        a, b = _ranked(ctx, 0, ra, rb), _ranked(ctx, 1, rb, ra)
        if tuple(sa[:-2]) != batch:
            a = ctx.op("broadcast_to", a, shape=batch + tuple(sa[-2:]), suffix="a_bcast")
        if tuple(sb[:-2]) != batch:
            b = ctx.op("broadcast_to", b, shape=batch + tuple(sb[-2:]), suffix="b_bcast")
        sa, sb = batch + tuple(sa[-2:]), batch + tuple(sb[-2:])
    a3 = _reshape(ctx, a, (-1,) + sa[-2:], "a3d")
    b3 = _reshape(ctx, b, (-1,) + sb[-2:], "b3d")
    y = ctx.op("batch_dot", a3, b3, suffix="bdot")
    return [_reshape(ctx, y, (-1,) + sa[1:-1] + (sb[-1],))]


# ----------------------------------------------------------------------------- activations

def _activation(kind):
    def convert(ctx):
        return [ctx.op("Activation", ctx.input(0), act_type=kind)]

    return convert


converter("Relu")(_activation("relu"))
converter("Tanh")(_activation("tanh"))
converter("Sigmoid")(_activation("sigmoid"))


@converter("LeakyRelu")
def leaky_relu(ctx):
    return [ctx.op("LeakyReLU", ctx.input(0), act_type="leaky", slope=float(ctx.attr("alpha", 0.01)))]


# ----------------------------------------------------------------------------- conv and pooling

def _spatial_pads(ctx, nsp: int, kernel, strides, dilations):
    """(begin, end) pads per spatial dim from `pads` or `auto_pad`."""
    auto = ctx.attr("auto_pad", "NOTSET") or "NOTSET"
    if auto == "NOTSET":
        pads = ctx.attr("pads") or [0] * (2 * nsp)
        if len(pads) != 2 * nsp:
            raise ctx.error(f"pads {pads} should have {2 * nsp} values for {nsp} spatial dims")
        return list(pads[:nsp]), list(pads[nsp:])
    if auto == "VALID":
        return [0] * nsp, [0] * nsp
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise ctx.error(f"unknown auto_pad '{auto}'")
    spatial = ctx.need_shape(0, f"for auto_pad={auto}", slice(2, None))
    begin, end = [], []
    for n, k, s, d in zip(spatial, kernel, strides, dilations):
        total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
        small, large = total // 2, total - total // 2
        begin.append(small if auto == "SAME_UPPER" else large)
        end.append(large if auto == "SAME_UPPER" else small)
    return begin, end


def _pad_explicit(ctx, x, extra_begin, extra_end, mode: str, tag: str):
    """Pad spatial dims (2...) of x by concatenating zero (mode 'zero') or edge-replicated
    (mode 'edge') slices; used for the asymmetric part of ONNX pads."""
    for i, (b, e) in enumerate(zip(extra_begin, extra_end)):
        if not b and not e:
            continue
        axis = 2 + i
        parts = []
        for count, begin in ((b, 0), (e, -1)):
            if not count:
                parts.append([])
                continue
            edge = _slice_axis(ctx, x, axis, begin, None if begin == -1 else 1, f"{tag}edge{axis}")
            if mode == "zero":
                edge = ctx.op("zeros_like", edge, suffix=f"{tag}zero{axis}")
            parts.append([edge] * count)
        pieces = parts[0] + [x] + parts[1]
        x = ctx.op("Concat", *pieces, dim=axis, num_args=len(pieces), suffix=f"{tag}pad{axis}")
    return x


def _kernel_attrs(ctx, nsp: int, kernel):
    strides = ctx.attr("strides") or [1] * nsp
    dilations = ctx.attr("dilations") or [1] * nsp
    if len(kernel) != nsp or len(strides) != nsp or len(dilations) != nsp:
        raise ctx.error(f"kernel_shape {kernel}, strides {strides} and dilations {dilations} must each have "
                        f"{nsp} values")
    return list(strides), list(dilations)


@converter("Conv")
def conv(ctx):
    wshape = ctx.need_shape(1, "for the number of filters")
    nsp = len(wshape) - 2
    kernel = list(ctx.attr("kernel_shape") or wshape[2:])
    strides, dilations = _kernel_attrs(ctx, nsp, kernel)
    begin, end = _spatial_pads(ctx, nsp, kernel, strides, dilations)
    sym_pad = [min(b, e) for b, e in zip(begin, end)]
    x = _pad_explicit(ctx, ctx.input(0), [b - p for b, p in zip(begin, sym_pad)],
                      [e - p for e, p in zip(end, sym_pad)], "zero", "")
    inputs = [x, ctx.input(1)] + ([ctx.input(2)] if ctx.has_input(2) else [])
    return [ctx.op("Convolution", *inputs, kernel=tuple(kernel), stride=tuple(strides), dilate=tuple(dilations),
                   pad=tuple(sym_pad), num_filter=int(wshape[0]), num_group=int(ctx.attr("group", 1)),
                   no_bias=not ctx.has_input(2))]


def _onnx_pool_len(n, k, s, b, e, ceil):
    span = n + b + e - k
    if not ceil:
        return span // s + 1
    out = -(-span // s) + 1
    if (out - 1) * s >= n + b:  # the last window may not start in the end padding
        out -= 1
    return out


def _pool_convention(ctx, kernel, strides, begin, end, ceil: bool) -> str:
    """MXNet's pooling_convention giving ONNX's output size ('valid' = floor, 'full' = ceil)."""
    if not ceil:
        return "valid"
    shape = ctx.shape(0)
    spatial = None if shape is None else shape[2:]
    if spatial is None or any(d is None for d in spatial):
        return "full"
    fits = {"valid", "full"}
    for n, k, s, b, e in zip(spatial, kernel, strides, begin, end):
        want = _onnx_pool_len(n, k, s, b, e, True)
        span = n + b + e - k
        if want != span // s + 1:
            fits.discard("valid")
        if want != -(-span // s) + 1:
            fits.discard("full")
    if not fits:
        raise ctx.error(f"ceil_mode output size of input {shape} (kernel {kernel}, strides {strides}, pads "
                        f"{begin + end}) matches neither floor nor ceil in every spatial dim")
    return "full" if "full" in fits else "valid"


def _pool(ctx, pool_type: str):
    kernel = ctx.attr("kernel_shape")
    if not kernel:
        raise ctx.error("attribute 'kernel_shape' is required")
    nsp = len(kernel)
    strides, dilations = _kernel_attrs(ctx, nsp, kernel)
    if any(d != 1 for d in dilations):
        raise ctx.error(f"pooling with dilations {dilations} is not supported (autotile's Pooling has none)")
    begin, end = _spatial_pads(ctx, nsp, kernel, strides, dilations)
    if any(p >= k for p, k in zip(begin + end, kernel + kernel)):
        # onnxruntime refuses it: a window could lie wholly in the padding
        raise ctx.error(f"pads {begin + end} must each be smaller than kernel_shape {list(kernel)}")
    ceil = bool(ctx.attr("ceil_mode", 0))
    convention = _pool_convention(ctx, kernel, strides, begin, end, ceil)
    include = bool(ctx.attr("count_include_pad", 0)) if pool_type == "avg" else False
    sym_pad = [min(b, e) for b, e in zip(begin, end)]
    extra_b = [b - p for b, p in zip(begin, sym_pad)]
    extra_e = [e - p for e, p in zip(end, sym_pad)]
    common = dict(kernel=tuple(kernel), stride=tuple(strides), pad=tuple(sym_pad), pool_type=pool_type,
                  pooling_convention=convention)
    if pool_type == "avg":
        common["count_include_pad"] = include
    x = ctx.input(0)
    if not any(extra_b) and not any(extra_e):
        return [ctx.op("Pooling", x, **common)]
    if pool_type == "max":  # replicated edges never change a window's max
        return [ctx.op("Pooling", _pad_explicit(ctx, x, extra_b, extra_e, "edge", ""), **common)]
    common["count_include_pad"] = True
    padded = _pad_explicit(ctx, x, extra_b, extra_e, "zero", "")
    if include:
        return [ctx.op("Pooling", padded, **common)]
    # Exclude the padding: average of x over the window divided by the share of real cells.
    total = ctx.op("Pooling", padded, suffix="sum", **common)
    ones = ctx.op("ones_like", x, suffix="ones")
    share = ctx.op("Pooling", _pad_explicit(ctx, ones, extra_b, extra_e, "zero", "ones"), suffix="share", **common)
    return [ctx.op("elemwise_div", total, share)]


@converter("MaxPool")
def max_pool(ctx):
    return _pool(ctx, "max")  # the Indices output is left unavailable


@converter("AveragePool")
def average_pool(ctx):
    return _pool(ctx, "avg")


def _global_pool(pool_type):
    def convert(ctx):
        rank = ctx.rank(0)
        nsp = 2 if rank is None else rank - 2
        if nsp < 1:
            raise ctx.error(f"global pooling needs an input of rank >= 3, got rank {rank}")
        return [ctx.op("Pooling", ctx.input(0), kernel=(1,) * nsp, global_pool=True, pool_type=pool_type)]

    return convert


converter("GlobalAveragePool")(_global_pool("avg"))
converter("GlobalMaxPool")(_global_pool("max"))


@converter("LRN")
def lrn(ctx):
    size = ctx.attr("size")
    if size is None:
        raise ctx.error("attribute 'size' is required")
    if size % 2 != 1:
        raise ctx.error(f"size={size}: only odd window sizes are supported (ONNX centres even windows "
                        f"asymmetrically, autotile's LRN symmetrically)")
    return [ctx.op("LRN", ctx.input(0), nsize=int(size), alpha=float(ctx.attr("alpha", 1e-4)),
                   beta=float(ctx.attr("beta", 0.75)), knorm=float(ctx.attr("bias", 1.0)))]


@converter("BatchNormalization")
def batch_norm(ctx):
    if ctx.opset < 9 and ctx.attr("spatial", 1) != 1:
        raise ctx.error("spatial=0 (per-activation statistics) is not supported")
    if ctx.attr("training_mode", 0):
        raise ctx.error("training_mode=1 (normalise with batch statistics at inference) is not supported")
    return [ctx.op("BatchNorm", data=ctx.input(0), gamma=ctx.input(1), beta=ctx.input(2),
                   moving_mean=ctx.input(3), moving_var=ctx.input(4), eps=float(ctx.attr("epsilon", 1e-5)),
                   momentum=float(ctx.attr("momentum", 0.9)), fix_gamma=False, use_global_stats=True, axis=1)]


@converter("Dropout")
def dropout(ctx):
    if ctx.opset >= 12:
        ratio = float(np.asarray(ctx.const(1, "ratio")).ravel()[0]) if ctx.has_input(1) else 0.5
        training = bool(np.asarray(ctx.const(2, "training_mode")).ravel()[0]) if ctx.has_input(2) else False
    else:
        ratio, training = float(ctx.attr("ratio", 0.5)), False
    mode = "always" if training else "training"
    x = ctx.input(0)
    y = ctx.op("Dropout", x, p=ratio, mode=mode)
    if training and ratio > 0 or len(ctx.node.output) < 2 or not ctx.node.output[1]:
        return [y]  # a random mask cannot be reproduced: it stays unavailable
    # Inference (or ratio 0) keeps every element: the mask is all true.
    return [y, ctx.op("Cast", ctx.op("ones_like", x, suffix="keep"), dtype="bool", suffix="mask")]


# ----------------------------------------------------------------------------- shape ops

@converter("Flatten")
def flatten(ctx):
    dims = ctx.dims(0)
    axis = int(ctx.attr("axis", 1))
    if axis < 0:
        axis = _norm_axis(ctx, axis, None if dims is None else len(dims))
    elif dims is not None and axis > len(dims):  # axis == rank is valid: (prod(dims), 1)
        raise ctx.error(f"axis {axis} is out of range for rank {len(dims)} (valid: [-{len(dims)}, {len(dims)}])")
    return [_flatten_at(ctx, ctx.input(0), axis, dims)]


@converter("Reshape")
def reshape(ctx):
    if ctx.opset >= 5:
        target = list(np.asarray(ctx.const(1, "shape")).ravel())
    else:
        target = list(ctx.attr("shape"))
    allowzero = bool(ctx.attr("allowzero", 0))
    dims = ctx.dims(0) or ()
    out = []
    for i, t in enumerate(target):
        if isinstance(t, SymDim):
            out.append(0 if i < len(dims) and dims[i] == t else t)
        elif int(t) == 0 and allowzero:
            raise ctx.error("allowzero=1 with a 0 in the target shape makes an empty tensor, which is not supported")
        else:
            out.append(int(t))
    if out and isinstance(out[0], int) and out[0] > 0 and dims and out[0] in _batch_values(ctx, dims[0]):
        out[0] = 0  # keep the batch dimension a copy, so the symbol works for other batch sizes
    unknown = [i for i, t in enumerate(out) if isinstance(t, SymDim)]
    if len(unknown) == 1 and -1 not in out:
        out[unknown[0]] = -1
    elif unknown:
        raise ctx.error(f"target shape {target} has unknown dimensions; " + ctx.imp.unbound_hint())
    _check_reshape_size(ctx, dims, out)
    return [_reshape(ctx, ctx.input(0), out)]


def _check_reshape_size(ctx, dims, target):
    """Refuse a reshape whose element count cannot match, naming the node."""
    if not dims or not all(isinstance(d, int) for d in dims):
        return
    known = [int(t) if int(t) != 0 else (dims[i] if i < len(dims) else 0) for i, t in enumerate(target)
             if not isinstance(t, SymDim)]
    size, rest = int(np.prod(dims, dtype=np.int64)), [t for t in known if t != -1]
    fixed = int(np.prod(rest, dtype=np.int64)) if rest else 1
    if len(rest) == len(target) and fixed != size or fixed == 0 or size % max(fixed, 1):
        raise ctx.error(f"cannot reshape '{ctx.input_name(0)}' of shape {tuple(dims)} ({size} elements) "
                        f"to {tuple(int(t) if not isinstance(t, SymDim) else t for t in target)}")


def _batch_values(ctx, lead) -> set:
    """Values a target shape may use for the reshape input's leading (batch) dim: the dim
    itself and, with a batch_size override, the model's original batch baked into constants."""
    if not isinstance(lead, int):
        return set()
    values = {lead}
    imp = ctx.imp
    if imp.batch_size is not None and lead == imp.batch_size:
        values |= {b for b in imp.orig_batch.values() if isinstance(b, int)}
    return values


@converter("Transpose")
def transpose(ctx):
    perm = ctx.attr("perm")
    if perm is None:
        return [ctx.op("transpose", ctx.input(0))]
    return [ctx.op("transpose", ctx.input(0), axes=tuple(int(p) for p in perm))]


@converter("Squeeze")
def squeeze(ctx):
    axes = _axes_arg(ctx, since=13)
    if axes is None:
        return [ctx.op("squeeze", ctx.input(0))]
    rank = ctx.rank(0)
    axes = tuple(sorted(_norm_axis(ctx, a, rank) for a in axes))
    return [ctx.op("squeeze", ctx.input(0), axis=axes)]


@converter("Unsqueeze")
def unsqueeze(ctx):
    axes = _axes_arg(ctx, since=13)
    if not axes:
        raise ctx.error("axes are required")
    rank = ctx.rank(0)
    out_rank = None if rank is None else rank + len(axes)
    x = ctx.input(0)
    norm = sorted(_norm_axis(ctx, a, out_rank) for a in axes)
    if len(set(norm)) != len(norm):
        raise ctx.error(f"axes {axes} name an output axis more than once")
    for k, a in enumerate(norm):  # ascending positions stay valid as dims are inserted
        x = ctx.op("expand_dims", x, axis=a, suffix="" if len(norm) == 1 else f"ax{a}")
    return [x]


@converter("Gather")
def gather(ctx):
    axis = int(ctx.attr("axis", 0))
    rank = ctx.rank(0)
    axis = _norm_axis(ctx, axis, rank)
    if ctx.is_const(0) and not ctx.is_const(1) and axis == 0 and rank == 2:
        w = ctx.const(0)  # a lookup table: Embedding
        # ONNX semantics: negative ids count from the end, out-of-range ids are an Error
        return [ctx.op("Embedding", ctx.input(1), ctx.input(0), input_dim=int(w.shape[0]),
                       output_dim=int(w.shape[1]), mode="raise")]
    if not ctx.is_const(1):  # run-time indices (position ids, token ids into a computed table)
        return [ctx.op("take", ctx.input(0), ctx.input(1), axis=axis, mode="raise")]
    idx = np.asarray(ctx.const(1)).astype(np.int64)
    size = ctx.shape(0)[axis] if ctx.shape(0) is not None else None
    check_index_range(ctx, idx, size, axis)
    if (idx < 0).any():
        if size is None:
            raise ctx.error("negative indices need the size of the gathered axis, which is unknown")
        idx = np.where(idx < 0, idx + size, idx)
    x = ctx.input(0)
    if idx.ndim == 0:
        part = _slice_axis(ctx, x, axis, int(idx), int(idx) + 1, "take")
        return [ctx.op("squeeze", part, axis=(axis,))]
    if idx.ndim == 1 and idx.size and (np.diff(idx) == 1).all():
        return [_slice_axis(ctx, x, axis, int(idx[0]), int(idx[-1]) + 1)]
    from ..ops import registry

    if registry.exists("take") or idx.size > 64:
        return [ctx.op("take", x, ctx.param(idx, ctx.input_name(1), "idx"), axis=axis)]
    # No take op: gather the few indexed slices and concatenate them (then unflatten indices).
    parts = [_slice_axis(ctx, x, axis, int(i), int(i) + 1, f"at{k}") for k, i in enumerate(idx.ravel())]
    y = parts[0] if len(parts) == 1 else ctx.op("Concat", *parts, dim=axis, num_args=len(parts),
                                                  suffix="" if idx.ndim == 1 else "rows")
    if idx.ndim == 1:
        return [y]
    dims = list(ctx.dims(0))
    return [_reshape_to(ctx, y, dims[:axis] + list(idx.shape) + dims[axis + 1:], "")]


# ----------------------------------------------------------------------------- element-wise

_SCALAR = {"add": ("_plus_scalar", "_plus_scalar"), "sub": ("_minus_scalar", "_rminus_scalar"),
           "mul": ("_mul_scalar", "_mul_scalar"), "div": ("_div_scalar", "_rdiv_scalar")}


def _binary(ctx, kind: str, i: int = 0, j: int = 1, suffix: str = ""):
    """kind(input i, input j) with NumPy broadcasting."""
    ra, rb = ctx.rank(i), ctx.rank(j)
    for const, other, r_other, which in ((j, i, ra, 0), (i, j, rb, 1)):
        if ctx.is_const(const) and not ctx.is_const(other):
            c = np.asarray(ctx.const(const))
            if c.size == 1 and r_other is not None and c.ndim <= r_other:
                return ctx.op(_SCALAR[kind][which], ctx.input(other), scalar=float(c.ravel()[0]), suffix=suffix)
    a_dims, b_dims = ctx.shape(i), ctx.shape(j)
    a, b = _ranked(ctx, i, ra, rb), _ranked(ctx, j, rb, ra)
    if a_dims is not None and b_dims is not None and a_dims == b_dims and None not in a_dims:
        return ctx.op(f"elemwise_{kind}", a, b, suffix=suffix)
    return ctx.op(f"broadcast_{kind}", a, b, suffix=suffix)


def _arith(kind):
    def convert(ctx):
        return [_binary(ctx, kind)]

    return convert


converter("Add")(_arith("add"))
converter("Sub")(_arith("sub"))
converter("Mul")(_arith("mul"))
converter("Div")(_arith("div"))


@converter("Sum")
def sum_(ctx):
    present = [i for i in range(ctx.num_inputs) if ctx.has_input(i)]
    if len(present) == 1:
        return [ctx.input(present[0])]
    shapes = [ctx.shape(i) for i in present]
    if all(s is not None and None not in s for s in shapes) and len(set(shapes)) == 1:
        return [ctx.op("add_n", *[ctx.input(i) for i in present], num_args=len(present))]
    if len(present) == 2:
        return [_binary(ctx, "add", present[0], present[1])]
    ranks = [ctx.rank(i) for i in present]
    if None in ranks:
        raise ctx.error(f"Sum of {len(present)} inputs of unknown rank is not supported")
    top = max(ranks)  # NumPy broadcasting: align every input to the largest rank, then add pairwise
    total = None
    for k, i in enumerate(present):
        term = _ranked(ctx, i, ranks[k], top)
        total = term if total is None else ctx.op("broadcast_add", total, term, suffix=f"acc{k}")
    return [total]

