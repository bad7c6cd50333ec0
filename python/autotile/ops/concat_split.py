"""Concat and SliceChannel (split), with their backward ops.

TDL: a slab of Concat's output along the concat dim reads arg0 at ``c`` but arg1 at
``c - C0``, and only one of the two exists at any ``c``; an affine index cannot switch
inputs, so the descriptions index the concat dim of every input with ':' (whole dim).
Splits of the other dims are then exact strategies; a split of the concat dim is still
correct but costed as reading every input in full along it. Splitting (SliceChannel and
the backward of Concat) is affine: ``out_k[.., c, ..] = data[.., c + k*size, ..]``.
"""
from __future__ import annotations

import numpy as np

from ..errors import Error
from ._axes import need_shapes, norm_axis
from .registry import OpDef, Param, alias, register
from .tdl_helpers import access, header, index_vars


# ----------------------------------------------------------------------------- Concat

def _concat_args(attrs):
    return [f"arg{i}" for i in range(attrs["num_args"])]


def _concat_out(attrs, shapes):
    if attrs["num_args"] < 1:
        raise Error(f"Concat: num_args={attrs['num_args']} must be at least 1")
    first = tuple(shapes[0])
    dim = norm_axis("Concat", attrs["dim"], len(first), "dim", first)
    total = 0
    for i, s in enumerate(shapes):
        s = tuple(s)
        if len(s) != len(first) or any(a != b for d, (a, b) in enumerate(zip(s, first)) if d != dim):
            raise Error(f"Concat: input arg{i} has shape {s} but arg0 has shape {first}; "
                        f"all dims except dim={attrs['dim']} must match")
        total += s[dim]
    return first[:dim] + (total,) + first[dim + 1:], dim


def _concat_infer(attrs, in_shapes):
    if len(in_shapes) != attrs["num_args"]:
        raise Error(f"Concat: num_args={attrs['num_args']} but {len(in_shapes)} inputs are given")
    need_shapes("Concat", in_shapes, _concat_args(attrs))
    return list(in_shapes), [_concat_out(attrs, in_shapes)[0]]


def _concat_forward(attrs, inputs, ctx):
    _, dim = _concat_out(attrs, [np.shape(x) for x in inputs])
    return [np.concatenate(inputs, axis=dim)]


def _concat_gradient(ctx):
    _, dim = _concat_out(ctx.attrs, ctx.in_shapes)
    sizes = tuple(int(s[dim]) for s in ctx.in_shapes)
    g = ctx.op("_backward_Concat", ctx.out_grads[0], dim=dim, sizes=sizes)
    return [g[i] for i in range(len(sizes))]


def _gather_tdl(in_names, in_shapes, out_shape, dim, squeezed, fn, output="out"):
    """out[..] = fn(in_k[.., :, ..]) over all inputs; the concat dim is ':' (or absent when
    the inputs were squeezed along it)."""
    ov = index_vars(len(out_shape))
    args = []
    for name in in_names:
        idx = [v for d, v in enumerate(ov) if not (squeezed and d == dim)]
        if not squeezed:
            idx[dim] = ":"
        args.append(access(name, idx))
    return f"{header(in_names, [output])}: {access(output, ov)} = {fn}({', '.join(args)})"


def _split_tdl(in_name, in_shape, out_names, dim, size, squeezed):
    """out_k[..] = data[.., c + k*size, ..] (or data[.., k, ..] when squeezed): exact."""
    stmts = []
    rank = len(in_shape) - (1 if squeezed else 0)
    ov = index_vars(rank)
    for k, name in enumerate(out_names):
        if squeezed:
            idx = ov[:dim] + [str(k)] + ov[dim:]
        else:
            idx = list(ov)
            off = k * size
            idx[dim] = f"{ov[dim]} + {off}" if off else ov[dim]
        stmts.append(f"{access(name, ov)} = {access(in_name, idx)}")
    return f"{header([in_name], out_names)}: " + "; ".join(stmts)


register(OpDef(
    name="Concat",
    params={"num_args": Param("int", required=True), "dim": Param("int", 1)},
    arguments=_concat_args,
    variadic="num_args",
    infer_shape=_concat_infer,
    forward=_concat_forward,
    gradient=_concat_gradient,
    tdl=lambda attrs, i, o: _gather_tdl(_concat_args(attrs), i, o[0], _concat_out(attrs, i)[1], False, "concat"),
    doc="Concatenate the inputs along `dim` (Concat(a, b, dim=1)).",
))
alias("concat", "Concat")


def _bwd_concat_outputs(attrs):
    return [f"output{i}" for i in range(len(attrs["sizes"]))]


def _bwd_concat_infer(attrs, in_shapes):
    need_shapes("_backward_Concat", in_shapes, ["dy"])
    dy = tuple(in_shapes[0])
    dim = norm_axis("_backward_Concat", attrs["dim"], len(dy), "dim", dy)
    if sum(attrs["sizes"]) != dy[dim]:
        raise Error(f"_backward_Concat: sizes={attrs['sizes']} do not add up to dim {dim} of dy shape {dy}")
    return [dy], [dy[:dim] + (s,) + dy[dim + 1:] for s in attrs["sizes"]]


def _bwd_concat_forward(attrs, inputs, ctx):
    dy = inputs[0]
    dim = norm_axis("_backward_Concat", attrs["dim"], dy.ndim)
    starts = attrs["starts"] or np.concatenate([[0], np.cumsum(attrs["sizes"])[:-1]])
    return [np.ascontiguousarray(np.take(dy, np.arange(b, b + n), axis=dim)) for b, n in zip(starts, attrs["sizes"])]


def _bwd_concat_tile(attrs, ins, outs, in_shapes, out_shapes):
    """On a tile, output k is dy[.., starts[k] : starts[k] + sizes[k], ..] of the dy tile."""
    dim = norm_axis("_backward_Concat", attrs["dim"], len(in_shapes[0]))
    offsets = np.concatenate([[0], np.cumsum(attrs["sizes"])[:-1]])
    starts = tuple(int(off + lo[dim] - ins[0][0][dim]) for off, (lo, _) in zip(offsets, outs))
    sizes = tuple(int(hi[dim] - lo[dim]) for lo, hi in outs)
    return {**attrs, "starts": starts, "sizes": sizes}


def _bwd_concat_tdl(attrs, in_shapes, out_shapes):
    dim = norm_axis("_backward_Concat", attrs["dim"], len(in_shapes[0]))
    ov = index_vars(len(in_shapes[0]))
    stmts, off = [], 0
    for name, size in zip(_bwd_concat_outputs(attrs), attrs["sizes"]):
        idx = list(ov)
        idx[dim] = f"{ov[dim]} + {off}" if off else ov[dim]
        stmts.append(f"{access(name, ov)} = {access('dy', idx)}")
        off += size
    return f"{header(['dy'], _bwd_concat_outputs(attrs))}: " + "; ".join(stmts)


register(OpDef(
    name="_backward_Concat",
    params={"dim": Param("int", required=True), "sizes": Param("shape", required=True),
            "starts": Param("shape", ())},  # starts: set on tiles only
    arguments=lambda attrs: ["dy"],
    extra={"tile_attrs": _bwd_concat_tile},
    outputs=_bwd_concat_outputs,
    infer_shape=_bwd_concat_infer,
    forward=_bwd_concat_forward,
    tdl=_bwd_concat_tdl,
    doc="Split dy along `dim` into pieces of `sizes` (the gradients of Concat's inputs).",
))


# ----------------------------------------------------------------------------- SliceChannel

def _split_outputs(attrs):
    return [f"output{i}" for i in range(attrs["num_outputs"])]


def _split_geometry(attrs, shape):
    """(axis, size of each piece); Error when the axis does not divide evenly."""
    shape = tuple(shape)
    n = attrs["num_outputs"]
    axis = norm_axis("SliceChannel", attrs["axis"], len(shape), "axis", shape)
    if n < 1 or shape[axis] % n:
        raise Error(f"SliceChannel: dim {axis} of input shape {shape} (size {shape[axis]}) "
                    f"cannot be split into num_outputs={n} equal parts")
    if attrs["squeeze_axis"] and len(shape) == 1:
        raise Error(f"SliceChannel: squeeze_axis=True on input shape {shape} would give rank-0 outputs")
    if attrs["squeeze_axis"] and shape[axis] != n:
        raise Error(f"SliceChannel: squeeze_axis=True needs dim {axis} of input shape {shape} "
                    f"to equal num_outputs={n}")
    return axis, shape[axis] // n


def _split_infer(attrs, in_shapes):
    need_shapes("SliceChannel", in_shapes, ["data"])
    shape = tuple(in_shapes[0])
    axis, size = _split_geometry(attrs, shape)
    if attrs["squeeze_axis"]:
        out = shape[:axis] + shape[axis + 1:]
    else:
        out = shape[:axis] + (size,) + shape[axis + 1:]
    return [shape], [out] * attrs["num_outputs"]


def _split_forward(attrs, inputs, ctx):
    x = inputs[0]
    if attrs["tile_starts"]:  # a tile holding a slab of every piece (see _split_tile)
        axis = norm_axis("SliceChannel", attrs["axis"], x.ndim)
        parts = [np.take(x, np.arange(b, b + attrs["tile_size"]), axis=axis) for b in attrs["tile_starts"]]
        return [np.ascontiguousarray(p) for p in parts]
    axis, _ = _split_geometry(attrs, x.shape)
    parts = np.split(x, attrs["num_outputs"], axis=axis)
    if attrs["squeeze_axis"]:
        parts = [np.squeeze(p, axis=axis) for p in parts]
    return [np.ascontiguousarray(p) for p in parts]


def _split_gradient(ctx):
    a = ctx.attrs
    return [ctx.op("_backward_SliceChannel", *ctx.out_grads, num_outputs=a["num_outputs"], axis=a["axis"],
                   squeeze_axis=a["squeeze_axis"])]


def _split_tdl_fn(attrs, in_shapes, out_shapes):
    axis, size = _split_geometry(attrs, in_shapes[0])
    return _split_tdl("data", in_shapes[0], _split_outputs(attrs), axis, size, attrs["squeeze_axis"])


def _split_tile(attrs, ins, outs, in_shapes, out_shapes):
    """A split of the sliced axis gives each tile the same slab of every piece: piece k
    starts at k*size + lo in the full input, i.e. at that minus the tile's origin."""
    if attrs["squeeze_axis"]:
        return attrs  # the axis is not an output dim: the tile holds it whole
    axis, size = _split_geometry(attrs, in_shapes[0])
    starts = tuple(int(k * size + lo[axis] - ins[0][0][axis]) for k, (lo, _) in enumerate(outs))
    return {**attrs, "tile_starts": starts, "tile_size": int(outs[0][1][axis] - outs[0][0][axis])}


_SPLIT_PARAMS = {
    "num_outputs": Param("int", required=True),
    "axis": Param("int", 1),
    "squeeze_axis": Param("bool", False),
}

register(OpDef(
    name="SliceChannel",
    # tile_starts/tile_size: set on tiles only (see _split_tile)
    params=dict(_SPLIT_PARAMS, tile_starts=Param("shape", ()), tile_size=Param("optional_int", None)),
    extra={"tile_attrs": _split_tile},
    outputs=_split_outputs,
    infer_shape=_split_infer,
    forward=_split_forward,
    gradient=_split_gradient,
    tdl=_split_tdl_fn,
    doc="Split data along `axis` into num_outputs equal parts (squeeze_axis drops the axis).",
))
alias("split", "SliceChannel")


def _bwd_split_args(attrs):
    return [f"dy{i}" for i in range(attrs["num_outputs"])]


def _bwd_split_shape(attrs, dy_shape):
    """Shape of SliceChannel's input, from one output gradient's shape."""
    n = attrs["num_outputs"]
    dy_shape = tuple(dy_shape)
    if attrs["squeeze_axis"]:
        axis = norm_axis("_backward_SliceChannel", attrs["axis"], len(dy_shape) + 1, "axis", dy_shape)
        return dy_shape[:axis] + (n,) + dy_shape[axis:], axis
    axis = norm_axis("_backward_SliceChannel", attrs["axis"], len(dy_shape), "axis", dy_shape)
    return dy_shape[:axis] + (dy_shape[axis] * n,) + dy_shape[axis + 1:], axis


def _bwd_split_infer(attrs, in_shapes):
    need_shapes("_backward_SliceChannel", in_shapes, _bwd_split_args(attrs))
    for i, s in enumerate(in_shapes):
        if tuple(s) != tuple(in_shapes[0]):
            raise Error(f"_backward_SliceChannel: dy{i} has shape {tuple(s)} but dy0 has {tuple(in_shapes[0])}")
    return list(in_shapes), [_bwd_split_shape(attrs, in_shapes[0])[0]]


def _bwd_split_forward(attrs, inputs, ctx):
    shape, axis = _bwd_split_shape(attrs, inputs[0].shape)
    parts = [np.expand_dims(g, axis) for g in inputs] if attrs["squeeze_axis"] else inputs
    return [np.concatenate(parts, axis=axis)]


def _bwd_split_tdl(attrs, in_shapes, out_shapes):
    shape, axis = _bwd_split_shape(attrs, in_shapes[0])
    return _gather_tdl(_bwd_split_args(attrs), in_shapes, shape, axis, attrs["squeeze_axis"], "concat", output="dx")


register(OpDef(
    name="_backward_SliceChannel",
    params=dict(_SPLIT_PARAMS),
    arguments=_bwd_split_args,
    variadic="num_outputs",
    infer_shape=_bwd_split_infer,
    forward=_bwd_split_forward,
    tdl=_bwd_split_tdl,
    doc="Concatenate the output gradients of SliceChannel back into the input's shape.",
))
