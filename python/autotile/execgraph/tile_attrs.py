"""Attributes of a sub-operator: the node's attributes adjusted to the tile it runs on.

Partition-n-reduce reuses each op's single-device kernel on smaller inputs; most kernels
take their sizes from their inputs, but a few carry sizes in attributes (FullyConnected's
num_hidden, Reshape's target shape...). Each hook here receives the parsed attributes, the
boxes [(lo, hi)] of the sub-op's inputs and outputs and the full shapes, and returns the
attributes the kernel must run with."""
from __future__ import annotations

from typing import Callable, Dict

Hook = Callable[[dict, list, list, list, list], dict]
_HOOKS: Dict[str, Hook] = {}


def hook(*names):
    def deco(fn):
        for n in names:
            _HOOKS[n] = fn
        return fn

    return deco


def _size(box, dim):
    lo, hi = box
    return hi[dim] - lo[dim]


def _shape(box):
    lo, hi = box
    return tuple(h - l for l, h in zip(lo, hi))


@hook("FullyConnected")
def _fc(attrs, ins, outs, in_shapes, out_shapes):
    return {**attrs, "num_hidden": _size(outs[0], len(out_shapes[0]) - 1)}


@hook("_backward_FullyConnected_data", "_backward_FullyConnected_weight", "_backward_FullyConnected_bias")
def _fc_backward(attrs, ins, outs, in_shapes, out_shapes):
    return {**attrs, "num_hidden": _size(ins[0], len(in_shapes[0]) - 1)}


def _check_groups(attrs, channel_boxes, channel_sizes):
    """Grouped convolution runs on a channel slice only when every group is whole in it and
    the slice keeps the group structure; depthwise (one channel per group) always does."""
    groups = attrs.get("num_group", 1)
    if groups <= 1:
        return
    for (lo, hi), full in zip(channel_boxes, channel_sizes):
        if (lo, hi) != (0, full):
            raise NotImplementedError(
                f"grouped convolution (num_group={groups}) split along channels: the sub-operator would "
                "need its groups regrouped; plan this node with splits of other dims")


@hook("Convolution")
def _conv(attrs, ins, outs, in_shapes, out_shapes):
    groups = attrs.get("num_group", 1)
    depthwise = groups > 1 and in_shapes[0][1] == groups and out_shapes[0][1] == groups
    if not depthwise:
        _check_groups(attrs, [(ins[0][0][1], ins[0][1][1]), (outs[0][0][1], outs[0][1][1])],
                      [in_shapes[0][1], out_shapes[0][1]])
    if depthwise:
        return {**attrs, "num_filter": _size(outs[0], 1), "num_group": _size(outs[0], 1)}
    return {**attrs, "num_filter": _size(outs[0], 1)}


@hook("Reshape")
def _reshape(attrs, ins, outs, in_shapes, out_shapes):
    return {**attrs, "shape": _shape(outs[0]), "reverse": False}


def tile_attrs(op_name: str, attrs: dict, in_boxes, out_boxes, in_shapes, out_shapes) -> dict:
    """The attributes op `op_name` runs with on a tile (unchanged when the op needs no hook)."""
    fn = _HOOKS.get(op_name)
    if fn is None:
        return attrs
    return fn(attrs, in_boxes, out_boxes, in_shapes, out_shapes)
