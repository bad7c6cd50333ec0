"""ONNX converters of element-wise math: unary functions, Pow, comparisons and logic, Where,
Min/Max/Clip/Mod and the activations Transformers use (Erf, Gelu, HardSigmoid, HardSwish,
Mish). Binary ops broadcast as NumPy does: the lower-rank operand gets leading 1-dims, then a
registered ``broadcast_*`` op does the rest.
"""
from __future__ import annotations

import numpy as np

from .onnx_registry import _ranked, converter

# ONNX op -> registered unary op
_UNARY = {
    "Neg": "negative", "Reciprocal": "reciprocal", "Exp": "exp", "Log": "log", "Sqrt": "sqrt",
    "Abs": "abs", "Erf": "erf", "Sign": "sign", "Floor": "floor", "Ceil": "ceil", "IsNaN": "isnan",
    "Not": "logical_not", "HardSwish": "hard_swish", "Mish": "mish", "Sin": "sin", "Cos": "cos",
}


def _unary(op_name: str):
    def convert(ctx):
        return [ctx.op(op_name, ctx.input(0))]

    return convert


for _onnx_op, _op in _UNARY.items():
    converter(_onnx_op)(_unary(_op))


@converter("HardSigmoid")
def hard_sigmoid(ctx):
    return [ctx.op("hard_sigmoid", ctx.input(0), alpha=float(ctx.attr("alpha", 0.2)),
                   beta=float(ctx.attr("beta", 0.5)))]


@converter("Gelu")
def gelu(ctx):
    approximate = ctx.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise ctx.error(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return [ctx.op("gelu", ctx.input(0), approximate=approximate)]


# ----------------------------------------------------------------------------- binary

def broadcast_binary(ctx, op: str, i: int = 0, j: int = 1, suffix: str = ""):
    """``broadcast_<op>`` of inputs i and j with NumPy rank alignment."""
    ra, rb = ctx.rank(i), ctx.rank(j)
    a, b = _ranked(ctx, i, ra, rb), _ranked(ctx, j, rb, ra)
    return ctx.op(f"broadcast_{op}", a, b, suffix=suffix)


_BINARY = {
    "Equal": "equal", "Less": "lesser", "LessOrEqual": "lesser_equal", "Greater": "greater",
    "GreaterOrEqual": "greater_equal", "And": "logical_and", "Or": "logical_or", "Xor": "logical_xor",
}


def _binary_op(op: str):
    def convert(ctx):
        return [broadcast_binary(ctx, op)]

    return convert


for _onnx_op, _op in _BINARY.items():
    converter(_onnx_op)(_binary_op(_op))


def _scalar_const(ctx, i: int):
    """Input i's value as a float if it is a one-element constant, else None."""
    if not ctx.is_const(i):
        return None
    c = np.asarray(ctx.const(i))
    return float(c.ravel()[0]) if c.size == 1 else None


@converter("Pow")
def pow_(ctx):
    e = _scalar_const(ctx, 1)
    if e is not None and not ctx.is_const(0):
        if e == 1.0:
            return [ctx.input(0)]
        if e == 2.0:
            return [ctx.op("square", ctx.input(0))]
        if e == 0.5:
            return [ctx.op("sqrt", ctx.input(0))]
        return [ctx.op("_power_scalar", ctx.input(0), scalar=e, is_int=float(e).is_integer())]
    base = _scalar_const(ctx, 0)
    if base is not None and not ctx.is_const(1):
        return [ctx.op("_rpower_scalar", ctx.input(1), scalar=base)]
    return [broadcast_binary(ctx, "power")]


@converter("Mod")
def mod(ctx):
    fmod = bool(ctx.attr("fmod", 0))
    ra, rb = ctx.rank(0), ctx.rank(1)
    return [ctx.op("broadcast_mod", _ranked(ctx, 0, ra, rb), _ranked(ctx, 1, rb, ra), fmod=fmod)]


def _variadic(op: str):
    """Min/Max of any number of inputs: a chain of broadcast_<op> over the largest rank."""

    def convert(ctx):
        present = [i for i in range(ctx.num_inputs) if ctx.has_input(i)]
        if len(present) == 1:
            return [ctx.input(present[0])]
        total = None
        for k, i in enumerate(present[1:]):
            if total is None:
                total = broadcast_binary(ctx, op, present[0], i, suffix="" if len(present) == 2 else f"acc{k}")
            else:
                rank = max(ctx.rank(p) or 0 for p in present)
                term = _ranked(ctx, i, ctx.rank(i), rank)
                total = ctx.op(f"broadcast_{op}", total, term, suffix=f"acc{k}")
        return [total]

    return convert


converter("Max")(_variadic("maximum"))
converter("Min")(_variadic("minimum"))


@converter("Clip")
def clip(ctx):
    if ctx.opset < 11:
        lo, hi = ctx.attr("min"), ctx.attr("max")
        lo_i = hi_i = None
    else:
        lo_i = 1 if ctx.has_input(1) else None
        hi_i = 2 if ctx.has_input(2) else None
        lo = None if lo_i is None else _scalar_const(ctx, lo_i)
        hi = None if hi_i is None else _scalar_const(ctx, hi_i)
        for idx, val in ((lo_i, lo), (hi_i, hi)):
            if idx is not None and val is None:
                raise ctx.error(f"bound '{ctx.input_name(idx)}' must be a one-element constant")
    x = ctx.input(0)
    if lo is None and hi is None:
        return [x]
    kwargs = {}
    if lo is not None:
        kwargs["a_min"] = float(lo)
    if hi is not None:
        kwargs["a_max"] = float(hi)
    if lo is None or hi is None:  # one-sided: clip needs both bounds; use the scalar max/min
        op = "_maximum_scalar" if lo is not None else "_minimum_scalar"
        return [ctx.op(op, x, scalar=float(lo if lo is not None else hi))]
    return [ctx.op("clip", x, **kwargs)]


@converter("Where")
def where(ctx):
    ranks = [ctx.rank(i) for i in range(3)]
    top = max(r for r in ranks if r is not None) if any(r is not None for r in ranks) else None
    args = [_ranked(ctx, i, ranks[i], top) for i in range(3)]
    return [ctx.op("where", *args)]
