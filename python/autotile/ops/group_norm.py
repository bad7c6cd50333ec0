"""GroupNorm (ONNX opset-21 convention) and InstanceNorm (MXNet semantics), with their
backward ops.

Both take data of layout (N, C, spatial...) and per-channel gamma, beta of shape (C,):
- GroupNorm(data, gamma, beta; num_groups=1, eps=1e-5): the C channels form num_groups
  consecutive groups; each (sample, group) is normalised over its C / num_groups channels and
  every spatial position (biased variance), then y = xhat * gamma[c] + beta[c].
- InstanceNorm(data, gamma, beta; eps=1e-3): each (sample, channel) normalised over the
  spatial positions, i.e. GroupNorm with one channel per group (data of rank >= 3).

`_backward_GroupNorm` / `_backward_InstanceNorm` (dy, data, gamma) -> dx, dgamma, dbeta
recompute the statistics from data (layer_norm.normalize_backward on the grouped view).

TDL. Statistics are nested sums over the group's channels (index `G * (c / G) + j`, G the
group size, j its offset) and the spatial positions, so:
- batch splits freely; channels split at any cut: a worker reads the whole groups its
  channels belong to (the floor division makes the interval group-aligned) and keeps its
  channels — the `channel_begin`/`channel_end`/`num_groups` tile attributes (set by the tile
  hook, never by users) tell the kernel which of the channels it normalises to output;
- spatial splits read whole feature maps in the forward op (output cropped); the backward's
  parameter gradients sum over spatial positions under names of their own, so the backward
  is split by batch or channel only (a spatial split would need partial parameter gradients
  of positions the kernel cannot tell apart from the ones it only reads).
"""
from __future__ import annotations

from ..errors import Error
from ._axes import need_shapes
from ._ew_util import cast
from ._tiles import box_shape
from .layer_norm import dy_data_shape, normalize, normalize_backward, row_stats
from .registry import OpDef, Param, register
from .tdl_helpers import access


# ----------------------------------------------------------------------------- NumPy math

def _grouped(x, groups):
    """x (N, C, S...) viewed as (N, groups, C / groups, S...), and its statistics axes."""
    g = x.reshape((x.shape[0], groups, x.shape[1] // groups) + x.shape[2:])
    return g, tuple(range(2, g.ndim))


def _channels(attrs, c):
    """The slice of the data tile's channels the kernel outputs (tile attributes)."""
    end = attrs.get("channel_end")
    return slice(attrs.get("channel_begin", 0), c if end is None else end)


def _param(v, ndim):
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def group_norm_forward(x, gamma, beta, groups, eps, channels=slice(None)):
    g, axes = _grouped(x, groups)
    xhat = normalize(g, axes, eps)[0].reshape(x.shape)[:, channels]
    return cast(xhat * _param(gamma, x.ndim) + _param(beta, x.ndim), x)


def group_norm_backward(dy, x, gamma, groups, eps, channels=slice(None)):
    g, axes = _grouped(x, groups)
    xhat, _, rstd = normalize(g, axes, eps)
    dxhat = (dy * _param(gamma, x.ndim)).reshape(g.shape)
    dx = normalize_backward(dxhat, xhat, rstd, axes).reshape(x.shape)[:, channels]
    xhat = xhat.reshape(x.shape)[:, channels]
    dy = dy[:, channels]
    others = (0,) + tuple(range(2, x.ndim))
    return [cast(dx, dy), cast((dy * xhat).sum(axis=others), dy), cast(dy.sum(axis=others), dy)]


# ----------------------------------------------------------------------------- shapes

def _infer(op, groups_of):
    def infer(attrs, in_shapes):
        need_shapes(op, in_shapes[:1], ["data"])
        data = tuple(in_shapes[0])
        least = 3 if op == "InstanceNorm" else 2
        if len(data) < least:
            raise Error(f"{op} needs data of layout (N, C, spatial...) with rank >= {least}, got shape {data}")
        c = (data[1],)
        groups = groups_of(attrs, data)
        if groups < 1 or data[1] % groups:
            raise Error(f"{op}: num_groups={groups} must be positive and divide the {data[1]} channels of data {data}")
        for name, s in zip(("gamma", "beta"), in_shapes[1:]):
            if s is not None and tuple(s) != c:
                raise Error(f"{op}: {name} has shape {tuple(s)}, expected {c} (one per channel of data {data})")
        return [data, c, c], [data]

    return infer


def _bwd_infer(op):
    def infer(attrs, in_shapes):
        shape = dy_data_shape(op, in_shapes)
        return [shape, shape, (shape[1],)], [shape, (shape[1],), (shape[1],)]

    return infer


# ----------------------------------------------------------------------------- TDL

def _tdl_parts(rank, group):
    """(output vars, statistics row, statistics reduction vars) for groups of `group` channels."""
    ov = ["n", "c"] + [f"i{d}" for d in range(2, rank)]
    spatial = [f"k{d}" for d in range(2, rank)]
    chan, red = ("c", spatial) if group == 1 else (f"{group} * (c / {group}) + j", ["j"] + spatial)
    return ov, ["n", chan] + spatial, red


def _fwd_tdl(group_of):
    def tdl(attrs, in_shapes, out_shapes):
        data = in_shapes[0]
        ov, row, red = _tdl_parts(len(data), group_of(attrs, data))
        stats = ", ".join(row_stats(["data"], row, red=red))
        return (f"data, gamma, beta -> out: {access('out', ov)} = "
                f"gn({access('data', ov)}, {stats}, gamma[c], beta[c])")

    return tdl


def _bwd_tdl(group_of):
    def tdl(attrs, in_shapes, out_shapes):
        data = in_shapes[1]
        ov, row, red = _tdl_parts(len(data), group_of(attrs, data))
        stats = ", ".join(row_stats(["data"], row, red=red))
        gamma_row = f"gamma[{row[1]}]"
        grads = ", ".join([
            f"sum({', '.join(red)}) {{ {access('dy', row)} * {gamma_row} }}",
            f"sum({', '.join(red)}) {{ {access('dy', row)} * {gamma_row} * {access('data', row)} }}"])
        dx = f"{access('dx', ov)} = dgn({access('dy', ov)}, {access('data', ov)}, gamma[c], {grads}, {stats})"
        # parameter gradients: positions under their own names (see the module docstring)
        pv = ["n", "c"] + [f"r{d}" for d in range(2, len(data))]
        prow = ["n", row[1]] + [f"k{d}" for d in range(2, len(data))]
        pstats = ", ".join(row_stats(["data"], prow, red=red))
        over = ", ".join(["n"] + pv[2:])
        dgamma = f"dgamma[c] = sum({over}) {{ {access('dy', pv)} * xhat({access('data', pv)}, {pstats}) }}"
        dbeta = f"dbeta[c] = sum({over}) {{ {access('dy', pv)} }}"
        return f"dy, data, gamma -> dx, dgamma, dbeta: {dx}; {dgamma}; {dbeta}"

    return tdl


def _tile_hook(group_of, data_index):
    """A channel split reads whole groups: the kernel learns the tile's group count and which
    of its data channels (relative to the data tile) are the output's."""

    def hook(attrs, in_boxes, out_boxes, in_shapes, out_shapes):
        (lo, _), (olo, ohi) = in_boxes[data_index], out_boxes[0]
        width = box_shape(in_boxes[data_index])[1]
        return {**attrs, "num_groups": width // group_of(attrs, in_shapes[data_index]),
                "channel_begin": int(olo[1]) - int(lo[1]), "channel_end": int(ohi[1]) - int(lo[1])}

    return hook


# ----------------------------------------------------------------------------- registration

_TILE_PARAMS = {"channel_begin": Param("int", 0), "channel_end": Param("optional_int", None)}  # tile hook only


def _register(name, params, groups_of, least_doc):
    """Registers `name` and `_backward_<name>`; groups_of(attrs, data shape) -> group count."""

    def group_of(attrs, shape):
        return shape[1] // groups_of(attrs, shape)

    def forward(attrs, inputs, ctx):
        x, gamma, beta = inputs
        return [group_norm_forward(x, gamma, beta, groups_of(attrs, x.shape), attrs["eps"],
                                   _channels(attrs, x.shape[1]))]

    def bwd_forward(attrs, inputs, ctx):
        dy, x, gamma = inputs
        return group_norm_backward(dy, x, gamma, groups_of(attrs, x.shape), attrs["eps"], _channels(attrs, x.shape[1]))

    def gradient(ctx):
        keep = {k: ctx.attrs[k] for k in params}
        bwd = ctx.op(f"_backward_{name}", ctx.out_grads[0], ctx.inputs[0], ctx.inputs[1], **keep)
        return [bwd[0], bwd[1], bwd[2]]

    hooked = "num_groups" in params
    all_params = {**params, **(_TILE_PARAMS if hooked else {})}
    register(OpDef(
        name=name,
        params=all_params,
        arguments=lambda attrs: ["data", "gamma", "beta"],
        infer_shape=_infer(name, groups_of),
        forward=forward,
        gradient=gradient,
        tdl=_fwd_tdl(group_of),
        extra={"tile_attrs": _tile_hook(group_of, 0)} if hooked else {},
        doc=least_doc,
    ))
    register(OpDef(
        name=f"_backward_{name}",
        params=all_params,
        arguments=lambda attrs: ["dy", "data", "gamma"],
        outputs=lambda attrs: ["data_grad", "gamma_grad", "beta_grad"],
        infer_shape=_bwd_infer(f"_backward_{name}"),
        forward=bwd_forward,
        tdl=_bwd_tdl(group_of),
        extra={"tile_attrs": _tile_hook(group_of, 1)} if hooked else {},
        doc=f"Gradients of {name} (data, gamma, beta), recomputing the statistics from data.",
    ))


_register("GroupNorm", {"num_groups": Param("int", 1), "eps": Param("float", 1e-5)},
          lambda attrs, shape: attrs["num_groups"],
          "Group normalisation: per sample, each of num_groups channel groups normalised over its channels "
          "and spatial positions, then * gamma[c] + beta[c] (ONNX opset 21).")
_register("InstanceNorm", {"eps": Param("float", 1e-3)}, lambda attrs, shape: shape[1],
          "Instance normalisation: each (sample, channel) normalised over the spatial positions, "
          "then * gamma[c] + beta[c] (MXNet semantics).")
