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


@hook("Convolution")
def _conv(attrs, ins, outs, in_shapes, out_shapes):
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
