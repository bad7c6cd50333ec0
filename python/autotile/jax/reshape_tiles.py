"""The input tiles a reshape reads, exactly: a reshape keeps row-major order, so an output
tile that is a contiguous run of elements reads the same run of its input.

autotile's execution graph gives a reshape's sub-operator the interval hull of what its
output tile reads (docs/tdl.md; ops/reshape.py's tile kernel gathers from any box that
covers the reads), which for a split inside a merged dimension is wider than the run
(GPT-2's ``(24, 96) -> (4, 6, 96)`` split 4 x 2 reads rows 0-6 on device 0 for rows 0-3).
Such a hull is no mesh tile, and the node would fall to the global view; the exact run
often is one (here the input's own row tiles), and the node then runs as a shard_map
(jax/node_map.py) reading only its run, so the compiled program moves less than the plan's
hull fetches (:func:`autotile.jax.differences` names it "bounding box")."""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np

#: ops that only reshape their first input (row-major order kept; ops/reshape.py)
SHAPE_ONLY = frozenset({"Reshape", "reshape", "Flatten", "flatten", "reshape_like", "expand_dims", "squeeze"})

Box = Tuple[Tuple[int, ...], Tuple[int, ...]]


def flat_run(lo: Sequence[int], hi: Sequence[int], shape: Sequence[int]) -> Optional[Tuple[int, int]]:
    """[start, end) in row-major order of box [lo, hi) of an array of `shape` when the box's
    elements are one contiguous run (dims before some p of extent 1, dims after it whole),
    else None."""
    n = len(shape)
    p = next((d for d in range(n) if hi[d] - lo[d] != 1), n)  # first dim of extent > 1
    if any(lo[d] != 0 or hi[d] != shape[d] for d in range(p + 1, n)):
        return None
    if n == 0:
        return 0, 1
    last = [h - 1 for h in hi]
    return (int(np.ravel_multi_index(tuple(lo), tuple(shape))),
            int(np.ravel_multi_index(tuple(last), tuple(shape))) + 1)


def run_box(start: int, end: int, shape: Sequence[int]) -> Optional[Box]:
    """The box of array `shape` whose elements are exactly the run [start, end), or None when
    the run is no box."""
    if end <= start:
        return None
    if len(shape) == 0:
        return ((), ()) if (start, end) == (0, 1) else None
    lo = tuple(int(v) for v in np.unravel_index(start, tuple(shape)))
    hi = tuple(int(v) + 1 for v in np.unravel_index(end - 1, tuple(shape)))
    if int(np.prod([h - l for l, h in zip(lo, hi)])) != end - start or flat_run(lo, hi, shape) != (start, end):
        return None
    return lo, hi


def exact_input_boxes(out_boxes: Sequence[Box], in_shape, out_shape) -> Optional[List[Box]]:
    """Per device, the box of a reshape's input holding exactly the elements of its output
    box (in `out_boxes`), or None where some output box is no contiguous run or its run no
    input box."""
    found = []
    for lo, hi in out_boxes:
        run = flat_run(lo, hi, out_shape)
        box = run_box(*run, in_shape) if run is not None else None
        if box is None:
            return None
        found.append(box)
    return found
