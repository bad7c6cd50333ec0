"""transpose (axes; empty = reverse) and SwapAxis. Each is its own gradient's op."""
from __future__ import annotations

import numpy as np

from ..errors import Error
from ._axes import need_shapes, norm_axes, norm_axis
from .registry import OpDef, Param, alias, register
from .tdl_helpers import access, header, index_vars


def _perm(attrs, shape):
    n = len(shape)
    if not attrs["axes"]:
        return tuple(range(n - 1, -1, -1))
    axes = norm_axes("transpose", attrs["axes"], n, "axes", shape)
    if len(axes) != n:
        raise Error(f"transpose: axes={tuple(attrs['axes'])} must list each of the {n} axes of input shape "
                    f"{tuple(shape)} once")
    return axes


def _permute_tdl(perm, in_shape):
    """out[j0..] = data[...] with out dim d = data dim perm[d]: exact and affine."""
    ov = index_vars(len(perm))
    idx = [""] * len(perm)
    for d, p in enumerate(perm):
        idx[p] = ov[d]
    return f"{header(['data'], ['out'])}: {access('out', ov)} = {access('data', idx)}"


def _infer(perm_fn, op):
    def infer(attrs, in_shapes):
        need_shapes(op, in_shapes, ["data"])
        shape = tuple(in_shapes[0])
        return [shape], [tuple(shape[p] for p in perm_fn(attrs, shape))]

    return infer


def _gradient(perm_fn):
    def gradient(ctx):
        perm = perm_fn(ctx.attrs, ctx.in_shapes[0])
        inverse = tuple(int(i) for i in np.argsort(perm))
        return [ctx.op("transpose", ctx.out_grads[0], axes=inverse)]

    return gradient


register(OpDef(
    name="transpose",
    params={"axes": Param("shape", ())},
    infer_shape=_infer(_perm, "transpose"),
    forward=lambda attrs, ins, ctx: [np.ascontiguousarray(np.transpose(ins[0], _perm(attrs, ins[0].shape)))],
    gradient=_gradient(_perm),
    tdl=lambda attrs, i, o: _permute_tdl(_perm(attrs, i[0]), i[0]),
    doc="Permute the dims of data by `axes` (reverse them when axes is empty).",
))


def _swap_perm(attrs, shape):
    n = len(shape)
    a = norm_axis("SwapAxis", attrs["dim1"], n, "dim1", shape)
    b = norm_axis("SwapAxis", attrs["dim2"], n, "dim2", shape)
    perm = list(range(n))
    perm[a], perm[b] = perm[b], perm[a]
    return tuple(perm)


register(OpDef(
    name="SwapAxis",
    params={"dim1": Param("int", 0), "dim2": Param("int", 0)},
    infer_shape=_infer(_swap_perm, "SwapAxis"),
    forward=lambda attrs, ins, ctx: [np.ascontiguousarray(np.transpose(ins[0], _swap_perm(attrs, ins[0].shape)))],
    gradient=_gradient(_swap_perm),
    tdl=lambda attrs, i, o: _permute_tdl(_swap_perm(attrs, i[0]), i[0]),
    doc="Swap dims dim1 and dim2 of data.",
))
alias("swapaxes", "SwapAxis")

