"""dot and batch_dot (MXNet semantics) with their gradients.

dot: lhs is viewed as a matrix (prod(lhs.shape[:-1]), lhs.shape[-1]) -- with transpose_a,
(lhs.shape[0], prod(rest)) transposed -- and rhs as (rhs.shape[0], prod(rest)) -- with
transpose_b, (prod(rhs.shape[:-1]), rhs.shape[-1]) transposed; so exactly one axis is
contracted: lhs's last (first with transpose_a) with rhs's first (last with transpose_b).
The result has lhs's other dims followed by rhs's other dims; 1-D . 1-D gives shape (1,).

batch_dot: (B.., M, K) x (B.., K, N) -> (B.., M, N), transpose_a/b swap the last two dims.

TDL: ``out[i.., j..] = sum(k) { lhs[i.., k] * rhs[k, j..] }``: splitting i or j is exact,
splitting k leaves partial sums.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

from ..errors import Error
from ._axes import need_shapes
from ._tiles import out_tile_shape
from .registry import OpDef, Param, register
from .tdl_helpers import access

_PARAMS = {"transpose_a": Param("bool", False), "transpose_b": Param("bool", False)}
_IGNORED = ("forward_stype",)


# ----------------------------------------------------------------------------- dot geometry

def _dot_geometry(attrs, lshape, rshape) -> Tuple[tuple, tuple, int]:
    """(lhs's free dims, rhs's free dims, contracted size); Error if they do not fit."""
    lshape, rshape = tuple(lshape), tuple(rshape)
    ta, tb = attrs["transpose_a"], attrs["transpose_b"]
    if not lshape or not rshape:
        raise Error(f"dot: inputs must have at least one dim, got lhs {lshape} and rhs {rshape}")
    if len(lshape) == 1:
        kl, lfree = lshape[0], ()
    elif ta:
        kl, lfree = lshape[0], lshape[1:]
    else:
        kl, lfree = lshape[-1], lshape[:-1]
    if len(rshape) == 1:
        kr, rfree = rshape[0], ()
    elif tb:
        kr, rfree = rshape[-1], rshape[:-1]
    else:
        kr, rfree = rshape[0], rshape[1:]
    if kl != kr:
        raise Error(f"dot: cannot multiply lhs of shape {lshape} by rhs of shape {rshape} "
                    f"(transpose_a={ta}, transpose_b={tb}): contracted sizes {kl} and {kr} differ")
    return lfree, rfree, kl


def _dot_out(attrs, lshape, rshape):
    lfree, rfree, _ = _dot_geometry(attrs, lshape, rshape)
    return (lfree + rfree) or (1,)


def _lhs2(attrs, lhs, k):
    """lhs as an (M, K) matrix."""
    if lhs.ndim > 1 and attrs["transpose_a"]:
        return lhs.reshape(k, -1).T
    return lhs.reshape(-1, k)


def _rhs2(attrs, rhs, k):
    """rhs as a (K, N) matrix."""
    if rhs.ndim > 1 and attrs["transpose_b"]:
        return rhs.reshape(-1, k).T
    return rhs.reshape(k, -1)


def _dot_forward(attrs, inputs, ctx):
    lhs, rhs = inputs
    _, _, k = _dot_geometry(attrs, lhs.shape, rhs.shape)
    out = _lhs2(attrs, lhs, k) @ _rhs2(attrs, rhs, k)
    return [np.asarray(out, dtype=lhs.dtype).reshape(_dot_out(attrs, lhs.shape, rhs.shape))]


def _dot_vars(attrs, lshape, rshape):
    """Index lists (lhs, rhs, out) of the TDL description, plus the free variables of each."""
    lfree, rfree, _ = _dot_geometry(attrs, lshape, rshape)
    lv = [f"i{d}" for d in range(len(lfree))]
    rv = [f"j{d}" for d in range(len(rfree))]
    if len(lshape) == 1:
        li = ["k"]
    else:
        li = ["k"] + lv if attrs["transpose_a"] else lv + ["k"]
    if len(rshape) == 1:
        ri = ["k"]
    else:
        ri = rv + ["k"] if attrs["transpose_b"] else ["k"] + rv
    return li, ri, lv, rv


def _dot_tdl(attrs, in_shapes, out_shapes):
    li, ri, lv, rv = _dot_vars(attrs, *in_shapes)
    ov = (lv + rv) or ["i0"]
    return f"lhs, rhs -> out: {access('out', ov)} = sum(k) {{ {access('lhs', li)} * {access('rhs', ri)} }}"


def _dot_infer(attrs, in_shapes):
    need_shapes("dot", in_shapes, ["lhs", "rhs"])
    return list(in_shapes), [_dot_out(attrs, *in_shapes)]


def _dot_gradient(ctx):
    dy = ctx.out_grads[0]
    lhs, rhs = ctx.inputs
    t = dict(transpose_a=ctx.attrs["transpose_a"], transpose_b=ctx.attrs["transpose_b"])
    return [ctx.op("_backward_dot_lhs", dy, rhs, shape=tuple(ctx.in_shapes[0]), **t),
            ctx.op("_backward_dot_rhs", dy, lhs, shape=tuple(ctx.in_shapes[1]), **t)]


register(OpDef(
    name="dot",
    params=dict(_PARAMS),
    arguments=lambda attrs: ["lhs", "rhs"],
    infer_shape=_dot_infer,
    forward=_dot_forward,
    gradient=_dot_gradient,
    tdl=_dot_tdl,
    ignored_attrs=_IGNORED,
    doc="Dot product contracting lhs's last (first if transpose_a) and rhs's first (last if transpose_b) axis.",
))


# d lhs = dy . rhs^T and d rhs = lhs^T . dy in the matrix views; `shape` is the shape of the
# input whose gradient is computed (a 1-D lhs and an (1, K) lhs give the same dy shape).

def _bwd_lhs_infer(attrs, in_shapes):
    need_shapes("_backward_dot_lhs", in_shapes[1:], ["rhs"])
    lshape = tuple(attrs["shape"])
    return [_dot_out(attrs, lshape, in_shapes[1]), tuple(in_shapes[1])], [lshape]


def _bwd_lhs_forward(attrs, inputs, ctx):
    dy, rhs = inputs
    lshape = tuple(attrs["shape"])
    _, _, k = _dot_geometry(attrs, lshape, rhs.shape)
    r2 = _rhs2(attrs, rhs, k)
    d2 = dy.reshape(-1, r2.shape[1]) @ r2.T  # (M, K)
    if len(lshape) > 1 and attrs["transpose_a"]:
        d2 = d2.T
    return [np.asarray(d2, dtype=dy.dtype).reshape(lshape)]


def _bwd_lhs_tdl(attrs, in_shapes, out_shapes):
    lshape = tuple(attrs["shape"])
    li, ri, lv, rv = _dot_vars(attrs, lshape, in_shapes[1])
    body = f"{access('dy', (lv + rv) or ['0'])} * {access('rhs', ri)}"
    if rv:
        body = f"sum({', '.join(rv)}) {{ {body} }}"
    return f"dy, rhs -> dlhs: {access('dlhs', li)} = {body}"


def _bwd_rhs_infer(attrs, in_shapes):
    need_shapes("_backward_dot_rhs", in_shapes[1:], ["lhs"])
    rshape = tuple(attrs["shape"])
    return [_dot_out(attrs, in_shapes[1], rshape), tuple(in_shapes[1])], [rshape]


def _bwd_rhs_forward(attrs, inputs, ctx):
    dy, lhs = inputs
    rshape = tuple(attrs["shape"])
    _, _, k = _dot_geometry(attrs, lhs.shape, rshape)
    l2 = _lhs2(attrs, lhs, k)
    d2 = l2.T @ dy.reshape(l2.shape[0], -1)  # (K, N)
    if len(rshape) > 1 and attrs["transpose_b"]:
        d2 = d2.T
    return [np.asarray(d2, dtype=dy.dtype).reshape(rshape)]


def _bwd_rhs_tdl(attrs, in_shapes, out_shapes):
    rshape = tuple(attrs["shape"])
    li, ri, lv, rv = _dot_vars(attrs, in_shapes[1], rshape)
    body = f"{access('dy', (lv + rv) or ['0'])} * {access('lhs', li)}"
    if lv:
        body = f"sum({', '.join(lv)}) {{ {body} }}"
    return f"dy, lhs -> drhs: {access('drhs', ri)} = {body}"


_BWD_PARAMS = dict(_PARAMS, shape=Param("shape", required=True))
register(OpDef(
    name="_backward_dot_lhs",
    params=dict(_BWD_PARAMS),
    arguments=lambda attrs: ["dy", "rhs"],
    infer_shape=_bwd_lhs_infer,
    forward=_bwd_lhs_forward,
    tdl=_bwd_lhs_tdl,
    extra={"tile_attrs": out_tile_shape()},
    doc="Gradient of dot with respect to lhs (of shape `shape`).",
))
register(OpDef(
    name="_backward_dot_rhs",
    params=dict(_BWD_PARAMS),
    arguments=lambda attrs: ["dy", "lhs"],
    infer_shape=_bwd_rhs_infer,
    forward=_bwd_rhs_forward,
    tdl=_bwd_rhs_tdl,
    extra={"tile_attrs": out_tile_shape()},
    doc="Gradient of dot with respect to rhs (of shape `shape`).",
))


# ----------------------------------------------------------------------------- batch_dot

def _batch_out(attrs, lshape, rshape):
    lshape, rshape = tuple(lshape), tuple(rshape)
    ta, tb = attrs["transpose_a"], attrs["transpose_b"]
    if len(lshape) < 3 or len(lshape) != len(rshape) or lshape[:-2] != rshape[:-2]:
        raise Error(f"batch_dot: lhs of shape {lshape} and rhs of shape {rshape} need the same rank >= 3 "
                    f"and equal batch dims")
    m, kl = (lshape[-1], lshape[-2]) if ta else (lshape[-2], lshape[-1])
    kr, n = (rshape[-1], rshape[-2]) if tb else (rshape[-2], rshape[-1])
    if kl != kr:
        raise Error(f"batch_dot: cannot multiply lhs of shape {lshape} by rhs of shape {rshape} "
                    f"(transpose_a={ta}, transpose_b={tb}): contracted sizes {kl} and {kr} differ")
    return lshape[:-2] + (m, n)


def _batch_forward(attrs, inputs, ctx):
    lhs, rhs = inputs
    _batch_out(attrs, lhs.shape, rhs.shape)
    a = np.swapaxes(lhs, -1, -2) if attrs["transpose_a"] else lhs
    b = np.swapaxes(rhs, -1, -2) if attrs["transpose_b"] else rhs
    return [np.asarray(np.matmul(a, b), dtype=lhs.dtype)]


def _batch_tdl(attrs, in_shapes, out_shapes):
    bv = [f"b{d}" for d in range(len(in_shapes[0]) - 2)]
    li = bv + (["k", "i"] if attrs["transpose_a"] else ["i", "k"])
    ri = bv + (["j", "k"] if attrs["transpose_b"] else ["k", "j"])
    return (f"lhs, rhs -> out: {access('out', bv + ['i', 'j'])} = "
            f"sum(k) {{ {access('lhs', li)} * {access('rhs', ri)} }}")


def _batch_gradient(ctx):
    """out = A' B' with A' = A or A^T, B' = B or B^T: dA' = dy B'^T and dB' = A'^T dy,
    each written as one batch_dot of the stored operands."""
    ta, tb = ctx.attrs["transpose_a"], ctx.attrs["transpose_b"]
    dy = ctx.out_grads[0]
    a, b = ctx.inputs
    if ta:
        da = ctx.op("batch_dot", b, dy, transpose_a=tb, transpose_b=True)
    else:
        da = ctx.op("batch_dot", dy, b, transpose_a=False, transpose_b=not tb)
    if tb:
        db = ctx.op("batch_dot", dy, a, transpose_a=True, transpose_b=ta)
    else:
        db = ctx.op("batch_dot", a, dy, transpose_a=not ta, transpose_b=False)
    return [da, db]


def _batch_infer(attrs, in_shapes):
    need_shapes("batch_dot", in_shapes, ["lhs", "rhs"])
    return list(in_shapes), [_batch_out(attrs, *in_shapes)]


register(OpDef(
    name="batch_dot",
    params=dict(_PARAMS),
    arguments=lambda attrs: ["lhs", "rhs"],
    infer_shape=_batch_infer,
    forward=_batch_forward,
    gradient=_batch_gradient,
    tdl=_batch_tdl,
    ignored_attrs=_IGNORED,
    doc="Batched matrix product over the leading dims; transpose_a/b swap the last two dims.",
))
