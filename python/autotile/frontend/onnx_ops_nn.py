"""ONNX converters of normalisations, softmax-like ops, reductions beyond sum/mean, and Einsum.

LayerNormalization over the last axis becomes autotile's ``LayerNorm`` (whose TDL lets the
search split batch and sequence); over several trailing axes it is spelled out in registered
element-wise and reduction ops, which split everywhere (statistics become partial sums).
Einsum's two-operand forms (what attention writes: ``bhid,bhjd->bhij``) become one
``batch_dot`` between transposes and reshapes.
"""
from __future__ import annotations

import string

import numpy as np

from ..ops import registry
from .onnx_registry import _axes_arg, _flatten_at, _norm_axis, _reshape, _reshape_to, converter


# ----------------------------------------------------------------------------- normalisation

def _param_over(ctx, i: int, rank: int, first_axis: int, tag: str):
    """Scale/bias input i (shape of the normalised trailing dims) with leading 1-dims to `rank`."""
    r = ctx.rank(i)
    if r is None or r == rank:
        return ctx.input(i)
    if ctx.is_const(i):
        c = np.asarray(ctx.const(i))
        return ctx.param(c.reshape((1,) * (rank - c.ndim) + c.shape), ctx.input_name(i), tag)
    x = ctx.input(i)
    for k in range(rank - r):
        x = ctx.op("expand_dims", x, axis=0, suffix=f"{tag}{k}")
    return x


@converter("LayerNormalization")
def layer_norm(ctx):
    stats = len([o for o in ctx.node.output if o]) > 1  # Mean / InvStdDev asked for too
    rank = ctx.need_rank(0, "to find the normalised axes")
    axis = _norm_axis(ctx, int(ctx.attr("axis", -1)), rank)
    eps = float(ctx.attr("epsilon", 1e-5))
    x = ctx.input(0)
    scale_1d = ctx.rank(1) == 1 and (not ctx.has_input(2) or ctx.rank(2) == 1)
    if axis == rank - 1 and scale_1d and not stats and registry.exists("LayerNorm"):
        beta = ctx.input(2) if ctx.has_input(2) else _zeros_like_param(ctx, 1, "beta")
        return [ctx.op("LayerNorm", x, ctx.input(1), beta, axis=-1, eps=eps)]
    axes = tuple(range(axis, rank))
    mean = ctx.op("mean", x, axis=axes, keepdims=True, suffix="mean")
    d = ctx.op("broadcast_sub", x, mean, suffix="centered")
    var = ctx.op("mean", ctx.op("square", d, suffix="sq"), axis=axes, keepdims=True, suffix="var")
    inv = ctx.op("reciprocal", ctx.op("sqrt", ctx.op("_plus_scalar", var, scalar=eps, suffix="var_eps"),
                                      suffix="std"), suffix="invstd")
    y = ctx.op("broadcast_mul", d, inv, suffix="normed")
    y = ctx.op("broadcast_mul", y, _param_over(ctx, 1, rank, axis, "scale_r"),
               suffix="scaled" if ctx.has_input(2) else "")
    if ctx.has_input(2):
        y = ctx.op("broadcast_add", y, _param_over(ctx, 2, rank, axis, "bias_r"))
    return [y, mean, inv]


def _zeros_like_param(ctx, i: int, tag: str):
    shape = ctx.need_shape(i, "to make a zero bias")
    return ctx.param(np.zeros(shape, np.float32), ctx.input_name(i), tag)


@converter("InstanceNormalization")
def instance_norm(ctx):
    return [ctx.op("InstanceNorm", ctx.input(0), ctx.input(1), ctx.input(2), eps=float(ctx.attr("epsilon", 1e-5)))]


@converter("GroupNormalization")
def group_norm(ctx):
    groups = int(ctx.attr("num_groups"))
    eps = float(ctx.attr("epsilon", 1e-5))
    channels = ctx.need_shape(0, "to lay out the group scale", slice(1, 2))[0]
    args = []
    for i, tag in ((1, "gamma"), (2, "beta")):
        if ctx.shape(i) == (groups,) and groups != channels:  # opset 18: one value per group
            value = np.repeat(np.asarray(ctx.const(i, tag)), channels // groups)
            args.append(ctx.param(value, ctx.input_name(i), f"{tag}_per_channel"))
        else:
            args.append(ctx.input(i))
    return [ctx.op("GroupNorm", ctx.input(0), *args, num_groups=groups, eps=eps)]


# ----------------------------------------------------------------------------- softmax family

def _softmax(op_name: str):
    def convert(ctx):
        x = ctx.input(0)
        if ctx.opset >= 13:
            return [ctx.op(op_name, x, axis=int(ctx.attr("axis", -1)))]
        # Before opset 13 the input is coerced to 2-D at `axis` and each row normalised.
        axis = int(ctx.attr("axis", 1))
        rank = ctx.rank(0)
        if rank is None:
            if axis == -1:
                return [ctx.op(op_name, x, axis=-1)]
            raise ctx.error(f"{ctx.op_type} (opset {ctx.opset}) at axis {axis} needs the input's rank")
        axis = _norm_axis(ctx, axis, rank)
        if axis == rank - 1:
            return [ctx.op(op_name, x, axis=-1)]
        dims = ctx.dims(0)
        y = ctx.op(op_name, _flatten_at(ctx, x, axis, dims, "flat"), axis=-1, suffix="rows")
        return [_reshape_to(ctx, y, dims, "")]

    return convert


converter("Softmax")(_softmax("softmax"))
converter("LogSoftmax")(_softmax("log_softmax"))


@converter("Softplus")
def softplus(ctx):
    return [ctx.op("Activation", ctx.input(0), act_type="softrelu")]


@converter("Softsign")
def softsign(ctx):
    return [ctx.op("Activation", ctx.input(0), act_type="softsign")]


@converter("CastLike")
def cast_like(ctx):
    to = ctx.imp.elem_type(ctx.input_name(1))
    if to is None:
        raise ctx.error(f"the element type of '{ctx.input_name(1)}' is unknown")
    if ctx.is_const(0):
        return [np.asarray(ctx.const(0)).astype(to)]
    if ctx.imp.elem_type(ctx.input_name(0)) == to:
        return [ctx.input(0)]
    return [ctx.op("Cast", ctx.input(0), dtype=str(np.dtype(to)))]


# ----------------------------------------------------------------------------- reductions

def _reduce_axes(ctx, since: int):
    """(axes tuple or None for all, keepdims) of a Reduce* node; None axes with noop -> 'noop'."""
    axes = _axes_arg(ctx, since=since)
    keep = bool(ctx.attr("keepdims", 1))
    rank = ctx.rank(0)
    if not axes:
        if ctx.attr("noop_with_empty_axes", 0):
            return "noop", keep
        if rank is None:
            return None, keep
        axes = list(range(rank))
    return tuple(sorted(_norm_axis(ctx, a, rank) for a in axes)), keep


def _reduce(op_name: str, pre=None, post=None, axes_since: int = 18):
    """Reduce* as ``op_name`` over the axes, with an element-wise op before and/or after; the
    axes are an attribute before opset `axes_since` and an input from it on."""

    def convert(ctx):
        axes, keep = _reduce_axes(ctx, axes_since)
        x = ctx.input(0)
        if pre is not None:
            x = ctx.op(pre, x, suffix=pre)
        if axes == "noop":
            return [x if post is None else ctx.op(post, x)]
        kwargs = {"keepdims": keep} if axes is None else {"axis": axes, "keepdims": keep}
        y = ctx.op(op_name, x, suffix="" if post is None else op_name, **kwargs)
        return [y if post is None else ctx.op(post, y)]

    return convert


converter("ReduceMean")(_reduce("mean"))
converter("ReduceSum")(_reduce("sum", axes_since=13))
converter("ReduceMax")(_reduce("max"))
converter("ReduceMin")(_reduce("min"))
converter("ReduceProd")(_reduce("prod"))
converter("ReduceL1")(_reduce("sum", pre="abs"))
converter("ReduceL2")(_reduce("sum", pre="square", post="sqrt"))
converter("ReduceSumSquare")(_reduce("sum", pre="square"))
converter("ReduceLogSumExp")(_reduce("sum", pre="exp", post="log"))
converter("ReduceLogSum")(_reduce("sum", post="log"))


# ----------------------------------------------------------------------------- einsum

def _einsum_terms(ctx, equation: str, ranks):
    """Input and output index strings with '...' replaced by fresh letters."""
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ctx.error(f"equation '{equation}' has {len(terms)} operands, the node {len(ranks)}")
    used = set(eq) - set(".,->")
    free = [c for c in string.ascii_letters if c not in used]
    ell = None
    for k, (t, r) in enumerate(zip(terms, ranks)):
        if "..." in t:
            n = r - (len(t) - 3)
            if ell is None or len(ell) < n:
                ell = "".join(free[:n])
            terms[k] = t.replace("...", ell[len(ell) - n:] if n else "")
    if not arrow:  # implicit output: letters seen once, sorted, after the ellipsis
        counts = {c: "".join(terms).count(c) for c in set("".join(terms))}
        out = (ell or "") + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in (ell or "")))
    elif "..." in out:
        out = out.replace("...", ell or "")
    for t, r in zip(terms, ranks):
        if len(t) != r or len(set(t)) != len(t):
            raise ctx.error(f"equation '{equation}': operand '{t}' does not fit rank {r} (or repeats a letter: "
                            f"diagonals are not supported)")
    return terms, out


def _permute(ctx, x, have: str, want: str, suffix: str):
    if have == want:
        return x
    return ctx.op("transpose", x, axes=tuple(have.index(c) for c in want), suffix=suffix)


def _sum_out(ctx, x, have: str, keep: set, suffix: str):
    """Sum over the letters of `have` not in `keep` (they appear in no other term)."""
    gone = [i for i, c in enumerate(have) if c not in keep]
    if not gone:
        return x, have
    return ctx.op("sum", x, axis=tuple(gone), suffix=suffix), "".join(c for c in have if c in keep)


@converter("Einsum")
def einsum(ctx):
    equation = ctx.attr("equation")
    n = len([i for i in range(ctx.num_inputs) if ctx.has_input(i)])
    ranks = [ctx.need_rank(i, "to read the equation") for i in range(n)]
    terms, out = _einsum_terms(ctx, equation, ranks)
    if n == 1:
        x, have = _sum_out(ctx, ctx.input(0), terms[0], set(out), "sum")
        return [_permute(ctx, x, have, out, "")]
    if n != 2:
        raise ctx.error(f"Einsum of {n} operands is not supported (one or two)")
    ta, tb = terms
    a, ta = _sum_out(ctx, ctx.input(0), ta, set(tb) | set(out), "a_sum")
    b, tb = _sum_out(ctx, ctx.input(1), tb, set(ta) | set(out), "b_sum")
    batch = [c for c in ta if c in tb and c in out]
    contract = [c for c in ta if c in tb and c not in out]
    fa = [c for c in ta if c not in tb]
    fb = [c for c in tb if c not in ta]
    sa = dict(zip(terms[0], ctx.need_shape(0, "to reshape for batch_dot")))
    sb = dict(zip(terms[1], ctx.need_shape(1, "to reshape for batch_dot")))
    size = {**sa, **sb}
    for c in batch + contract:
        if sa[c] != sb[c]:
            raise ctx.error(f"equation '{equation}': index '{c}' is {sa[c]} in one operand and {sb[c]} in the "
                            f"other (broadcasting is not supported)")
    prod = lambda letters: int(np.prod([size[c] for c in letters], dtype=np.int64))  # noqa: E731
    a = _permute(ctx, a, ta, "".join(batch + fa + contract), "a_perm")
    b = _permute(ctx, b, tb, "".join(batch + contract + fb), "b_perm")
    a = _reshape(ctx, a, (prod(batch), prod(fa), prod(contract)), "a3d")
    b = _reshape(ctx, b, (prod(batch), prod(contract), prod(fb)), "b3d")
    y = ctx.op("batch_dot", a, b, suffix="bdot")
    have = "".join(batch + fa + fb)
    y = _reshape(ctx, y, tuple(size[c] for c in have) or (1,), "unflat" if have != out else "")
    return [_permute(ctx, y, have, out, "")]
