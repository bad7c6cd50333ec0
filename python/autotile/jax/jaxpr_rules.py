"""Rules of the jaxpr reader (:mod:`autotile.jax.jaxpr_import`): one function per JAX primitive,
``rule(reader, eqn, inputs) -> value`` (a list for multiple-result primitives), building ops of
autotile's registry. Inputs are :class:`~autotile.jax.jaxpr_import.T` (traced) or NumPy arrays
(constants: literals and values folded at trace time); at least one is traced.

Elementwise binaries with a one-element constant use the registry's scalar ops
(``_mul_scalar``...), otherwise the ``broadcast_*`` ops (a jaxpr broadcasts only size-1 dims
and 0-d values). ``dot_general`` becomes ``dot`` (no batch dims) or ``batch_dot`` after the
transposes and reshapes that put its dims in order; the softmax of ``jax.nn.softmax`` (max,
subtract, exp, sum, divide) becomes one ``softmax``. Gathers and convolutions are in
:mod:`autotile.jax.jaxpr_rules_nn`.
"""
from __future__ import annotations

from typing import Callable, Dict

import numpy as np

from .jaxpr_import import T

RULES: Dict[str, Callable] = {}


def rule(*names: str):
    """Register the decorated function as the rule of the JAX primitives `names`."""

    def wrap(fn):
        for n in names:
            RULES[n] = fn
        return fn

    return wrap


def out_aval(eqn, i: int = 0):
    """(shape, dtype) JAX gives output i of `eqn`."""
    aval = eqn.outvars[i].aval
    return tuple(aval.shape), np.dtype(aval.dtype)


def traced(r, eqn, sym, i: int = 0, ins=()) -> T:
    """The value of output i of `eqn` computed by `sym`."""
    shape, dtype = out_aval(eqn, i)
    return r.value(sym, shape, dtype, (eqn.primitive.name, tuple(ins), dict(eqn.params)))


def reshape(r, x: T, shape, suffix="reshape"):
    """`x` (its Symbol) reshaped to JAX shape `shape` (none if it already has it)."""
    shape = tuple(int(d) for d in shape)
    if tuple(x.at_shape) == (shape or (1,)):
        return x.sym
    return r.op("Reshape", x.sym, shape=shape or (1,), suffix=suffix)


def transpose(r, x: T, perm, suffix="transpose"):
    """`x` (its Symbol) with its dims permuted by `perm` (none if it is the identity)."""
    perm = tuple(int(p) for p in perm)
    if perm == tuple(range(len(perm))):
        return x.sym
    return r.op("transpose", x.sym, axes=perm, suffix=suffix)


# ----------------------------------------------------------------------------- elementwise


UNARY = {"exp": "exp", "log": "log", "tanh": "tanh", "logistic": "sigmoid", "sqrt": "sqrt", "neg": "negative",
         "abs": "abs", "sin": "sin", "cos": "cos", "erf": "erf", "square": "square", "sign": "sign", "floor": "floor",
         "ceil": "ceil", "stop_gradient": "stop_gradient", "not": "logical_not", "round": None}


@rule(*[k for k, v in UNARY.items() if v])
def unary(r, eqn, ins):
    """An elementwise function of one input: the registry op of the same meaning."""
    return traced(r, eqn, r.op(UNARY[eqn.primitive.name], ins[0].sym), ins=ins)


@rule("copy", "copy_p", "reduce_precision", "optimization_barrier")
def identity(r, eqn, ins):
    return ins if eqn.primitive.multiple_results else ins[0]


@rule("rsqrt")
def rsqrt(r, eqn, ins):
    return traced(r, eqn, r.op("reciprocal", r.op("sqrt", ins[0].sym, suffix="sqrt")), ins=ins)


@rule("log1p")
def log1p(r, eqn, ins):
    return traced(r, eqn, r.op("log", r.op("_plus_scalar", ins[0].sym, scalar=1.0, suffix="1p")), ins=ins)


@rule("expm1")
def expm1(r, eqn, ins):
    return traced(r, eqn, r.op("_minus_scalar", r.op("exp", ins[0].sym, suffix="exp"), scalar=1.0), ins=ins)


@rule("integer_pow")
def integer_pow(r, eqn, ins):
    y = int(eqn.params["y"])
    if y == 1:
        return ins[0]
    sym = r.op("square", ins[0].sym) if y == 2 else r.op("_power_scalar", ins[0].sym, scalar=float(y))
    return traced(r, eqn, sym, ins=ins)


@rule("is_finite")
def is_finite(r, eqn, ins):
    x = ins[0].sym  # x - x is NaN exactly where x is infinite or NaN
    diff = r.op("elemwise_sub", x, x, suffix="self_diff")
    return traced(r, eqn, r.op("logical_not", r.op("isnan", diff, suffix="nan")), ins=ins)


@rule("convert_element_type")
def convert(r, eqn, ins):
    x = ins[0]
    want = np.dtype(eqn.params["new_dtype"])
    if want == x.dtype or (want.kind == "f" and x.dtype.kind == "f" and want.itemsize == x.dtype.itemsize):
        return r.value(x.sym, x.shape, want, x.origin)
    return traced(r, eqn, r.op("Cast", x.sym, dtype=str(want)), ins=ins)


#: binary primitive -> (op on equal shapes, broadcasting op, scalar op x.c, scalar op c.x)
BINARY = {"add": ("elemwise_add", "broadcast_add", "_plus_scalar", "_plus_scalar"),
          "sub": ("elemwise_sub", "broadcast_sub", "_minus_scalar", "_rminus_scalar"),
          "mul": ("elemwise_mul", "broadcast_mul", "_mul_scalar", "_mul_scalar"),
          "div": ("elemwise_div", "broadcast_div", "_div_scalar", "_rdiv_scalar"),
          "max": ("broadcast_maximum", "broadcast_maximum", "_maximum_scalar", "_maximum_scalar"),
          "min": ("broadcast_minimum", "broadcast_minimum", "_minimum_scalar", "_minimum_scalar"),
          "pow": ("broadcast_power", "broadcast_power", "_power_scalar", "_rpower_scalar"),
          "rem": ("broadcast_mod", "broadcast_mod", None, None),
          "lt": ("broadcast_lesser", "broadcast_lesser", None, None),
          "le": ("broadcast_lesser_equal", "broadcast_lesser_equal", None, None),
          "gt": ("broadcast_greater", "broadcast_greater", None, None),
          "ge": ("broadcast_greater_equal", "broadcast_greater_equal", None, None),
          "eq": ("broadcast_equal", "broadcast_equal", None, None),
          "ne": ("broadcast_not_equal", "broadcast_not_equal", None, None),
          "and": ("broadcast_logical_and", "broadcast_logical_and", None, None),
          "or": ("broadcast_logical_or", "broadcast_logical_or", None, None),
          "xor": ("broadcast_logical_xor", "broadcast_logical_xor", None, None)}


def _rank_to(r, v, shape, rank):
    """Symbol of `v` (traced or constant) with rank `rank` (a 0-d value as ones)."""
    if not isinstance(v, T):
        v = np.asarray(v)
        return r.const(v.reshape((1,) * (rank - v.ndim) + v.shape))
    target = (1,) * (rank - len(v.shape)) + tuple(v.shape)
    if tuple(v.at_shape) == target:
        return v.sym
    return r.op("Reshape", v.sym, shape=target, suffix="rank")


@rule(*BINARY)
def binary(r, eqn, ins):
    """An elementwise function of two inputs (see the module's text); a division may be the
    end of a softmax."""
    name = eqn.primitive.name
    same, bcast, scalar, rscalar = BINARY[name]
    a, b = ins
    if name == "div":
        soft = softmax_pattern(r, a, b)
        if soft is not None:
            return traced(r, eqn, soft, ins=ins)
    for x, c, op in ((a, b, scalar), (b, a, rscalar)):
        if isinstance(x, T) and not isinstance(c, T) and np.size(c) == 1 and op:
            value = float(np.asarray(c).ravel()[0])
            if name == "max" and value == 0.0 and x.dtype.kind == "f":
                return traced(r, eqn, r.op("relu", x.sym), ins=ins)
            if name in ("max", "min") and np.isinf(value) and (value < 0) == (name == "max"):
                return x  # max(x, -inf), min(x, inf)
            attrs = {"is_int": False} if op in ("_power_scalar", "_rpower_scalar") else {}
            return traced(r, eqn, r.op(op, x.sym, scalar=value, **attrs), ins=ins)
    shape, _ = out_aval(eqn)
    rank = max(len(shape), 1)
    sa, sb = _rank_to(r, a, shape, rank), _rank_to(r, b, shape, rank)
    shapes = [tuple(v.shape) if isinstance(v, T) else np.shape(v) for v in ins]
    equal = all(s == tuple(shape) for s in shapes) and all(isinstance(v, T) for v in ins)
    return traced(r, eqn, r.op(same if equal else bcast, sa, sb), ins=ins)


@rule("select_n")
def select_n(r, eqn, ins):
    """``select_n(pred, a, b)``: `b` where pred holds, else `a` (``where(pred, b, a)``)."""
    pred, *cases = ins
    if len(cases) != 2:
        raise r.error(f"select_n with {len(cases)} cases (autotile's where takes two)")
    kept = index_normalisation(pred, cases)
    if kept is not None:
        return kept
    if not isinstance(pred, T):
        p = np.asarray(pred)
        if p.size == 1:
            return cases[int(bool(p.ravel()[0]))]
    shape, _ = out_aval(eqn)
    full = [v.sym if isinstance(v, T) and tuple(v.shape) == tuple(shape) else
            r.op("broadcast_to", _rank_to(r, v, shape, max(len(shape), 1)), shape=tuple(shape) or (1,),
                 suffix=f"case{i}") if isinstance(v, T) else r.const(v, shape)
            for i, v in enumerate([pred, cases[1], cases[0]])]
    return traced(r, eqn, r.op("where", *full), ins=ins)


def index_normalisation(pred, cases):
    """``select_n(i < 0, i, i + n)`` (negative indices counted from the end, as jnp.take and
    take_along_axis write them) is `i` itself: the training step checks on the host that
    every index lies in [0, n)."""
    i, shifted = cases
    if not (isinstance(pred, T) and isinstance(i, T) and isinstance(shifted, T) and pred.origin and shifted.origin):
        return None
    p_name, p_in, _ = pred.origin
    s_name, s_in, _ = shifted.origin
    if p_name == "lt" and p_in[0] is i and not isinstance(p_in[1], T) and np.all(np.asarray(p_in[1]) == 0) \
            and s_name == "add" and s_in[0] is i and not isinstance(s_in[1], T) and i.dtype.kind in "iu":
        return i
    return None


# ----------------------------------------------------------------------------- reductions, shapes

REDUCE = {"reduce_sum": "sum", "reduce_max": "max", "reduce_min": "min", "reduce_prod": "prod"}


@rule(*REDUCE)
def reduce(r, eqn, ins):
    """A reduction over `axes` (the reduced dims dropped)."""
    axes = tuple(int(a) for a in eqn.params["axes"])
    x = ins[0]
    if not axes:
        return x
    return traced(r, eqn, r.op(REDUCE[eqn.primitive.name], x.sym, axis=axes, keepdims=False), ins=ins)


@rule("reshape")
def reshape_rule(r, eqn, ins):
    shape, _ = out_aval(eqn)
    if eqn.params.get("dimensions") is not None:
        raise r.error("reshape with a dimension order (dimensions=...) is not supported")
    return traced(r, eqn, reshape(r, ins[0], shape), ins=ins)


@rule("squeeze", "expand_dims")
def squeeze(r, eqn, ins):
    """Size-1 dims removed or added: a reshape to the output's shape."""
    shape, _ = out_aval(eqn)
    return traced(r, eqn, reshape(r, ins[0], shape), ins=ins)


@rule("broadcast_in_dim")
def broadcast_in_dim(r, eqn, ins):
    """Dims added at the positions not in broadcast_dimensions, then broadcast to the shape."""
    x = ins[0]
    shape, _ = out_aval(eqn)
    dims = tuple(int(d) for d in eqn.params["broadcast_dimensions"])
    kept = [1] * len(shape)
    for src, d in enumerate(dims):
        kept[d] = x.shape[src]
    sym = reshape(r, x, tuple(kept), "dims")
    if tuple(kept) != tuple(shape):
        sym = r.op("broadcast_to", sym, shape=tuple(shape))
    return traced(r, eqn, sym, ins=ins)


@rule("transpose")
def transpose_rule(r, eqn, ins):
    return traced(r, eqn, transpose(r, ins[0], eqn.params["permutation"]), ins=ins)


@rule("concatenate")
def concatenate(r, eqn, ins):
    shape, _ = out_aval(eqn)
    syms = [v.sym if isinstance(v, T) else r.const(v) for v in ins]
    return traced(r, eqn, r.op("Concat", *syms, dim=int(eqn.params["dimension"])), ins=ins)


@rule("slice")
def slice_rule(r, eqn, ins):
    strides = eqn.params.get("strides")
    if strides is not None and any(int(s) != 1 for s in strides):
        raise r.error(f"a strided slice (strides {tuple(strides)}) is not supported")
    begin = tuple(int(b) for b in eqn.params["start_indices"])
    end = tuple(int(e) for e in eqn.params["limit_indices"])
    return traced(r, eqn, r.op("slice", ins[0].sym, begin=begin, end=end), ins=ins)


@rule("split")
def split(r, eqn, ins):
    axis, sizes = int(eqn.params["axis"]), [int(s) for s in eqn.params["sizes"]]
    outs, start = [], 0
    for i, size in enumerate(sizes):
        sym = r.op("slice_axis", ins[0].sym, axis=axis, begin=start, end=start + size, suffix=f"part{i}")
        outs.append(traced(r, eqn, sym, i, ins))
        start += size
    return outs


# ----------------------------------------------------------------------------- contractions


@rule("dot_general")
def dot_general(r, eqn, ins):
    """``dot_general`` as ``dot`` (no batch dims: lhs's free dims then contracted ones, rhs's
    contracted then free, several contracted dims merged by a reshape) or ``batch_dot``
    (batch, free and contracted dims each merged to one, the result reshaped back)."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lc, rc, lb, rb = (tuple(int(d) for d in s) for s in (lc, rc, lb, rb))
    a, b = (v if isinstance(v, T) else r.value(r.const(v), np.shape(v), np.asarray(v).dtype) for v in ins)
    lf = tuple(d for d in range(len(a.shape)) if d not in lc and d not in lb)
    rf = tuple(d for d in range(len(b.shape)) if d not in rc and d not in rb)
    la, lr = a.shape, b.shape
    size = lambda s, ds: int(np.prod([s[d] for d in ds], dtype=np.int64))  # noqa: E731
    k = size(la, lc)
    out_shape, _ = out_aval(eqn)
    if not lb:
        x = r.value(transpose(r, a, lf + lc, "lhs_order"), [la[d] for d in lf + lc], a.dtype)
        x_sym = reshape(r, x, [la[d] for d in lf] + [k], "lhs_merge") if len(lc) != 1 or not lf else x.sym
        if rf and rc == (len(lr) - 1,) and rf == tuple(range(len(lr) - 1)):
            y_sym, tb = b.sym, True  # rhs (free..., k): dot's transpose_b
        else:
            y = r.value(transpose(r, b, rc + rf, "rhs_order"), [lr[d] for d in rc + rf], b.dtype)
            y_sym, tb = (reshape(r, y, [k] + [lr[d] for d in rf], "rhs_merge") if len(rc) != 1 else y.sym), False
        if not lf:
            x_sym = r.op("Reshape", x_sym, shape=(1, k), suffix="lhs_row")
        sym = r.op("dot", x_sym, y_sym, transpose_b=tb)
        if not lf or not rf:
            sym = r.op("Reshape", sym, shape=tuple(out_shape) or (1,), suffix="out")
        return traced(r, eqn, sym, ins=ins)
    batch = [la[d] for d in lb]
    m, n = size(la, lf), size(lr, rf)
    x = r.value(transpose(r, a, lb + lf + lc, "lhs_order"), [la[d] for d in lb + lf + lc], a.dtype)
    x_sym = reshape(r, x, batch + [m, k], "lhs_merge")
    if rf + rc == tuple(d for d in range(len(lr)) if d not in rb) and len(rc) == 1 and rb == tuple(range(len(rb))):
        y = r.value(b.sym, lr, b.dtype)  # rhs (batch..., free..., k): batch_dot's transpose_b
        y_sym, tb = reshape(r, y, batch + [n, k], "rhs_merge"), True
    else:
        y = r.value(transpose(r, b, rb + rc + rf, "rhs_order"), [lr[d] for d in rb + rc + rf], b.dtype)
        y_sym, tb = reshape(r, y, batch + [k, n], "rhs_merge"), False
    sym = r.op("batch_dot", x_sym, y_sym, transpose_b=tb)
    out = r.value(sym, batch + [m, n], a.dtype)
    return traced(r, eqn, reshape(r, out, out_shape, "out"), ins=ins)


# ----------------------------------------------------------------------------- patterns


def _strip(v, names=("broadcast_in_dim", "stop_gradient", "reshape", "convert_element_type")):
    """`v` with the broadcasts, stop_gradients, reshapes and max(., -inf) above it removed."""
    while isinstance(v, T) and v.origin is not None:
        prim, ins, _ = v.origin
        if prim in names:
            v = ins[0]
        elif prim == "max" and len(ins) == 2 and any(not isinstance(c, T) and np.all(np.isneginf(c)) for c in ins):
            v = next(c for c in ins if isinstance(c, T))
        else:
            break
    return v


def softmax_pattern(r, num, den):
    """``exp(x - max(x, k)) / sum(exp(.), k)`` (jax.nn.softmax over one axis k, the max under
    stop_gradient or not) as autotile's ``softmax(x, axis=k)``; None if `num`/`den` are not it."""
    if not (isinstance(num, T) and isinstance(den, T) and num.origin and num.origin[0] == "exp"):
        return None
    total = _strip(den)
    if total.origin is None or total.origin[0] != "reduce_sum" or total.origin[1][0] is not num:
        return None
    axes = tuple(total.origin[2]["axes"])
    shifted = num.origin[1][0]
    if len(axes) != 1 or not isinstance(shifted, T) or shifted.origin is None or shifted.origin[0] != "sub":
        return None
    x, top = shifted.origin[1]
    top = _strip(top)
    if not (isinstance(x, T) and isinstance(top, T) and top.origin and top.origin[0] == "reduce_max"
            and top.origin[1][0] is x and tuple(top.origin[2]["axes"]) == axes):
        return None
    return r.op("softmax", x.sym, axis=axes[0])


from . import jaxpr_rules_nn  # noqa: E402,F401  (registers the gather and convolution rules)
