"""Shape-only ops: Reshape (MXNet's special codes), Flatten, reshape_like, expand_dims, squeeze.

None of them moves data (row-major order is kept), so each gradient is a Reshape of the
output gradient back to the input shape, and each TDL description comes from
:mod:`._reshape_tdl` (exact for preserved and split dims, ':' inside merged dims).
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np

from ..errors import Error
from ._axes import need_shapes, norm_axes, norm_axis
from ._reshape_tdl import reshape_tdl
from .registry import OpDef, Param, alias, register


def _size(shape) -> int:
    return int(np.prod(shape, dtype=np.int64)) if len(shape) else 1


def _back_to_input(ctx):
    """Gradient of a shape-only op: dy reshaped to the input shape (later inputs get none)."""
    if not ctx.in_shapes or ctx.in_shapes[0] is None:
        raise Error(f"node '{ctx.name}': the gradient of a reshape needs the input shape")
    dx = ctx.op("Reshape", ctx.out_grads[0], shape=tuple(ctx.in_shapes[0]))
    return [dx] + [None] * (len(ctx.inputs) - 1)


def _reshape_forward(out_shape_fn):
    def forward(attrs, inputs, ctx):
        x = inputs[0]
        if attrs.get("tile_geometry") is not None:
            return [_tile_reshape(x, *attrs["tile_geometry"])]
        shapes = [np.shape(v) for v in inputs]
        return [np.reshape(x, out_shape_fn(attrs, shapes))]

    return forward


# On a tile, the input box is the interval hull of what the output tile reads (docs/tdl.md),
# which need not be the same elements in row-major order (a split inside a merged dim, or
# of an inner dim of a split one). The kernel then gathers each output element from its
# global position: exact for every box that covers the reads.

def _tile_reshape(x, full_in, in_lo, full_out, out_lo, out_tile):
    """The output tile [out_lo, out_lo + out_tile) of reshape(full input, full_out), from the
    input tile `x` whose origin in the full input (of shape full_in) is in_lo."""
    pos = np.indices(out_tile).reshape(len(out_tile), -1) + np.asarray(out_lo, dtype=np.int64).reshape(-1, 1)
    flat = np.ravel_multi_index(tuple(pos), full_out)
    src = np.unravel_index(flat, full_in)
    local = tuple(s - lo for s, lo in zip(src, in_lo))
    return x[local].reshape(out_tile)


def _tile_hook(attrs, ins, outs, in_shapes, out_shapes):
    from ._tiles import box_shape

    geometry = (tuple(in_shapes[0]), tuple(ins[0][0]), tuple(out_shapes[0]), tuple(outs[0][0]), box_shape(outs[0]))
    return {**attrs, "tile_geometry": geometry}


#: set by _tile_hook on tiles only; never written by users
_TILE_PARAM = {"tile_geometry": Param("any", None)}


def _infer(op, out_shape_fn, names=("data",)):
    def infer(attrs, in_shapes):
        need_shapes(op, in_shapes, names)
        return list(in_shapes), [out_shape_fn(attrs, in_shapes)]

    return infer


def _shape_only_tdl(out_shape_fn, inputs=("data",)):
    return lambda attrs, in_shapes, out_shapes: reshape_tdl(in_shapes[0], out_shapes[0], inputs)


# ----------------------------------------------------------------------------- Reshape

def mx_reshape(spec: Sequence[int], dshape: Sequence[int], reverse: bool = False) -> Tuple[int, ...]:
    """MXNet's InferReshapeShape: the output shape of Reshape(shape=spec) on `dshape`.

    Codes: 0 copies an input dim, -1 infers one dim from the size, -2 copies all remaining
    input dims, -3 merges two consecutive input dims, -4 splits one input dim into the two
    values that follow (one may be -1). With `reverse`, codes are matched right to left."""
    src = list(dshape)
    params = list(spec)
    if reverse:
        src.reverse()
        params.reverse()
    out: List[int] = []
    s = 0
    infer = -1
    i = 0
    bad = f"cannot reshape input of shape {tuple(dshape)} with shape={tuple(spec)}"
    while i < len(params):
        p = params[i]
        if p == 0:
            if s >= len(src):
                raise Error(f"Reshape: {bad}: code 0 has no input dim left to copy")
            out.append(src[s])
            s += 1
        elif p == -1:
            if infer >= 0:
                raise Error(f"Reshape: {bad}: only one dim can be -1")
            infer = len(out)
            out.append(1)
            s += 1
        elif p == -2:
            out.extend(src[s:])
            s = len(src)
        elif p == -3:
            if s + 1 >= len(src):
                raise Error(f"Reshape: {bad}: code -3 needs two input dims to merge")
            out.append(src[s] * src[s + 1])
            s += 2
        elif p == -4:
            if i + 2 >= len(params) or s >= len(src):
                raise Error(f"Reshape: {bad}: code -4 needs an input dim and two values after it")
            d0 = src[s]
            s += 1
            d1, d2 = params[i + 1], params[i + 2]
            i += 2
            if d1 == -1 and d2 == -1:
                raise Error(f"Reshape: {bad}: the two dims after -4 cannot both be -1")
            if d1 == -1:
                d1 = d0 // d2 if d2 > 0 else 0
            if d2 == -1:
                d2 = d0 // d1 if d1 > 0 else 0
            if d1 <= 0 or d2 <= 0 or d1 * d2 != d0:
                raise Error(f"Reshape: {bad}: split dims {params[i - 1]}, {params[i]} do not divide input dim {d0}")
            out.extend([d1, d2])
        elif p > 0:
            out.append(p)
            s += 1
        else:
            raise Error(f"Reshape: {bad}: unknown code {p} (codes are 0, -1, -2, -3, -4)")
        i += 1
    total = _size(dshape)
    if infer >= 0:
        rest = _size(out)
        if rest == 0 or total % rest:
            raise Error(f"Reshape: {bad}: the -1 dim cannot be inferred ({total} elements, others give {rest})")
        out[infer] = total // rest
    if reverse:
        out.reverse()
    if _size(out) != total:
        raise Error(f"Reshape: {bad}: target shape {tuple(out)} has {_size(out)} elements, input has {total}")
    return tuple(out)


def _legacy_reshape(attrs, dshape) -> Tuple[int, ...]:
    """Deprecated target_shape (0 = infer one dim) with keep_highest (dim 0 is kept)."""
    out = list(attrs["target_shape"])
    start = 0
    if attrs["keep_highest"]:
        out[0] = dshape[0]
        start = 1
    zeros = [d for d in range(start, len(out)) if out[d] == 0]
    bad = f"cannot reshape input of shape {tuple(dshape)} with target_shape={attrs['target_shape']}"
    if len(zeros) > 1:
        raise Error(f"Reshape: {bad}: only one dim can be 0 (inferred)")
    if zeros:
        out[zeros[0]] = 1
        rest = _size(out)
        if _size(dshape) % rest:
            raise Error(f"Reshape: {bad}: the 0 dim cannot be inferred")
        out[zeros[0]] = _size(dshape) // rest
    if _size(out) != _size(dshape) or any(d <= 0 for d in out):
        raise Error(f"Reshape: {bad}: target has {_size(out)} elements, input has {_size(dshape)}")
    return tuple(out)


def _reshape_out(attrs, shapes):
    dshape = tuple(shapes[0])
    if attrs["shape"]:
        if any(d is None for d in attrs["shape"]):
            raise Error(f"Reshape: shape={attrs['shape']} may not contain None")
        return mx_reshape(attrs["shape"], dshape, attrs["reverse"])
    if attrs["target_shape"]:
        return _legacy_reshape(attrs, dshape)
    raise Error(f"Reshape: neither shape nor target_shape is given (input shape {dshape})")


register(OpDef(
    name="Reshape",
    params={
        "shape": Param("shape", ()),
        "reverse": Param("bool", False),
        "target_shape": Param("shape", ()),
        "keep_highest": Param("bool", False),
        **_TILE_PARAM,
    },
    extra={"tile_attrs": _tile_hook},
    infer_shape=_infer("Reshape", _reshape_out),
    forward=_reshape_forward(_reshape_out),
    gradient=_back_to_input,
    tdl=_shape_only_tdl(_reshape_out),
    doc="Reshape data to `shape` (MXNet codes 0, -1, -2, -3, -4; reverse=True matches right to left).",
))
alias("reshape", "Reshape")


# ----------------------------------------------------------------------------- Flatten

def _flatten_out(attrs, shapes):
    dshape = tuple(shapes[0])
    if len(dshape) == 0:
        raise Error("Flatten: input must have at least one dim, got shape ()")
    return (dshape[0], _size(dshape[1:]))


register(OpDef(
    name="Flatten",
    params=dict(_TILE_PARAM),
    extra={"tile_attrs": _tile_hook},
    infer_shape=_infer("Flatten", _flatten_out),
    forward=_reshape_forward(_flatten_out),
    gradient=_back_to_input,
    tdl=_shape_only_tdl(_flatten_out),
    doc="Flatten data of shape (N, d1, d2, ...) to (N, d1*d2*...).",
))
alias("flatten", "Flatten")


# ----------------------------------------------------------------------------- reshape_like

def _reshape_like_out(attrs, shapes):
    lhs, rhs = tuple(shapes[0]), tuple(shapes[1])

    def bounds(shape, begin, end, side):
        n = len(shape)
        b = 0 if begin is None else begin
        e = n if end is None else end
        b, e = b + n if b < 0 else b, e + n if e < 0 else e
        if not 0 <= b <= e <= n:
            raise Error(f"reshape_like: {side}_begin={begin}, {side}_end={end} out of range for {side} shape {shape}")
        return b, e

    lb, le = bounds(lhs, attrs["lhs_begin"], attrs["lhs_end"], "lhs")
    rb, re = bounds(rhs, attrs["rhs_begin"], attrs["rhs_end"], "rhs")
    out = lhs[:lb] + rhs[rb:re] + lhs[le:]
    if _size(out) != _size(lhs):
        raise Error(f"reshape_like: cannot reshape lhs of shape {lhs} ({_size(lhs)} elements) "
                    f"like rhs of shape {rhs}: result {out} has {_size(out)} elements")
    return out


register(OpDef(
    name="reshape_like",
    params={**{k: Param("optional_int", None) for k in ("lhs_begin", "lhs_end", "rhs_begin", "rhs_end")},
            **_TILE_PARAM},
    extra={"tile_attrs": _tile_hook},
    arguments=lambda attrs: ["lhs", "rhs"],
    infer_shape=_infer("reshape_like", _reshape_like_out, ("lhs", "rhs")),
    forward=_reshape_forward(_reshape_like_out),
    gradient=_back_to_input,
    # rhs supplies a shape only, but TDL cannot say so: it is listed, unread, hence replicated.
    tdl=_shape_only_tdl(_reshape_like_out, ("lhs", "rhs")),
    doc="Reshape lhs to the shape of rhs (or of rhs[rhs_begin:rhs_end] replacing lhs[lhs_begin:lhs_end]).",
))


# ----------------------------------------------------------------------------- expand_dims / squeeze

def _expand_out(attrs, shapes):
    dshape = tuple(shapes[0])
    axis = norm_axis("expand_dims", attrs["axis"], len(dshape), "axis", dshape, extra=1)
    return dshape[:axis] + (1,) + dshape[axis:]


register(OpDef(
    name="expand_dims",
    params={"axis": Param("int", required=True), **_TILE_PARAM},
    extra={"tile_attrs": _tile_hook},
    infer_shape=_infer("expand_dims", _expand_out),
    forward=_reshape_forward(_expand_out),
    gradient=_back_to_input,
    tdl=_shape_only_tdl(_expand_out),
    doc="Insert a size-1 dim at `axis` (negative counts from the end of the result).",
))


def _squeeze_out(attrs, shapes):
    dshape = tuple(shapes[0])
    if attrs["axis"] is None:
        drop = {d for d, s in enumerate(dshape) if s == 1}
    else:
        drop = set(norm_axes("squeeze", attrs["axis"], len(dshape), "axis", dshape))
        for d in sorted(drop):
            if dshape[d] != 1:
                raise Error(f"squeeze: cannot squeeze axis {d} of input shape {dshape}: its size is {dshape[d]}, not 1")
    out = tuple(s for d, s in enumerate(dshape) if d not in drop)
    return out or (1,)  # MXNet keeps rank >= 1


register(OpDef(
    name="squeeze",
    params={"axis": Param("optional_shape", None), **_TILE_PARAM},
    extra={"tile_attrs": _tile_hook},
    infer_shape=_infer("squeeze", _squeeze_out),
    forward=_reshape_forward(_squeeze_out),
    gradient=_back_to_input,
    tdl=_shape_only_tdl(_squeeze_out),
    doc="Remove size-1 dims (all of them, or those in `axis`); the result keeps at least one dim.",
))
