"""Tile hooks of this op family: the attributes a kernel runs with on one tile.

Partition-n-reduce runs an op's kernel on sub-tensors (tiles). Kernels that take sizes or
offsets from attributes (slice's begin, a backward op's target shape, mean's divisor...)
need those rewritten for the tile. Each op carries its hook as ``OpDef.extra["tile_attrs"]``
with the signature of autotile.execgraph.tile_attrs hooks:
``hook(attrs, in_boxes, out_boxes, in_shapes, out_shapes) -> attrs``, boxes being
``(lo, hi)`` per tensor in full-tensor coordinates and shapes the full shapes.
"""
from __future__ import annotations


def adds_bias(attrs) -> bool:
    """Whether a kernel of an op whose bias is added inside its contraction (FullyConnected,
    Convolution: ``+ (k == 0) * bias``) adds it on this tile: the op has a bias and the tile
    holds the contraction's first slab (``tile_bias``, set by the op's tile hook). Every
    runtime's kernel of those ops asks it."""
    return not attrs.get("no_bias") and attrs.get("tile_bias", True)


def box_shape(box):
    lo, hi = box
    return tuple(int(h) - int(l) for l, h in zip(lo, hi))


def out_tile_shape(attr="shape"):
    """Hook setting `attr` to the shape of output 0's tile."""

    def hook(attrs, ins, outs, in_shapes, out_shapes):
        return {**attrs, attr: box_shape(outs[0])}

    return hook
