"""Attributes of a sub-operator: the node's attributes adjusted to the tile it runs on.

Partition-n-reduce reuses each op's single-device kernel on smaller inputs; most kernels
take their sizes from their inputs, but some carry sizes or offsets in attributes
(FullyConnected's num_hidden, Reshape's target shape, slice offsets...). Such an op declares
a hook ``OpDef.extra["tile_attrs"](attrs, in_boxes, out_boxes, in_shapes, out_shapes)``
receiving the parsed attributes, the boxes [(lo, hi)] of the sub-op's inputs and outputs and
the full shapes; it returns the attributes the kernel must run with."""
from __future__ import annotations

from ..ops import registry


def tile_attrs(op_name: str, attrs: dict, in_boxes, out_boxes, in_shapes, out_shapes) -> dict:
    """The attributes op `op_name` runs with on a tile (unchanged when the op has no hook)."""
    hook = registry.get(op_name).extra.get("tile_attrs")
    if hook is None:
        return attrs
    return hook(attrs, in_boxes, out_boxes, in_shapes, out_shapes)
