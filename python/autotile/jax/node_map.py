"""Nodes run as the plan runs them: each node of the training graph as a ``jax.shard_map``
over the plan's mesh (one mesh axis per cut), its kernel on each device's tile, with the
collectives the plan implies written out where XLA's partitioner would pick costlier ones.

autotile's execution graph (``execgraph.transform``) says, for every device, which box of
each input a node's sub-operator reads, which box of each output it writes and whether that
output is a partial sum. Where those boxes are the tiles of a mesh sharding (even splits,
mesh axes in order), the node becomes ``shard_map(kernel, in_specs, out_specs)``:

- inputs are re-laid out from their stored layout to ``in_specs`` by explicit collectives
  (:func:`relayout`): all-gathers over the mesh axes the target drops, all-to-alls moving a
  split between dimensions, tile permutes, and one all-to-all over every mesh axis involved
  when the tiles move into another mesh-axis order in equal pieces (``exchange``); only what
  none of these expresses (unequal pieces) is left to XLA as a sharding constraint;
- a partial output is reduced inside the map as the plan reduces it: ``psum_scatter`` over
  the partial mesh axes along the dimension the stored layout splits over them, ``psum`` over
  the rest. XLA's SPMD partitioner on CPU lowers the same re-layout, written as a sharding
  constraint on a dot's output, as an all-reduce followed by a slice (twice the bytes);
- devices whose tile attributes differ (FullyConnected's bias added by the first
  contraction slab only, an Embedding tile's first row...) pick their kernel with
  ``lax.switch`` on their mesh coordinates.

A convolution-family node that reads its tiles plus rows of the neighbouring tiles (a
spatial split's halo) gets those rows by ``lax.ppermute`` (jax/halo.py); a reshape whose
boxes are hulls reads the exact run of its output tile (jax/reshape_tiles.py). A node whose boxes
are not mesh tiles otherwise (uneven splits, other halos) or whose output is partial in a
way the boxes do not explain runs in the global view instead (jnp on
whole arrays with sharding constraints); :func:`node_maps` says which and why."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..execgraph.tile_attrs import tile_attrs
from .halo import HALO_OPS, halo_of, split_axes, tile_index
from .reshape_tiles import SHAPE_ONLY, exact_input_boxes

Spec = Tuple[Tuple[str, ...], ...]


@dataclass
class NodeMap:
    """How one node runs per device: the mesh spec of each input (None: read for its shape
    only, a zero of `shape_only[j]` stands in), of each output as the kernel computes it, the
    mesh axes each output is a partial sum over, and the tile attributes per device group
    (`groups[d]`: device d's index into `attrs`, devices in mesh order)."""

    name: str
    in_specs: List[Optional[Spec]]
    shape_only: Dict[int, Tuple[int, ...]]
    out_specs: List[Spec]
    partial: List[Tuple[str, ...]]
    attrs: List[dict]
    groups: List[int]
    out_tiles: List[Tuple[int, ...]]
    halos: Dict[int, list] = field(default_factory=dict)  # input -> [halo.Halo]: rows of neighbouring tiles


def _coords(d: int, shape) -> Tuple[int, ...]:
    return tuple(int(c) for c in np.unravel_index(d, shape))


def spec_of(boxes, full, shape, names) -> Optional[Spec]:
    """The mesh spec (per dimension, the mesh axes splitting it, major first) whose tiles are
    `boxes` (per device in mesh order: (lo, hi)) of a tensor of shape `full`, or None when
    the boxes are not such tiles (uneven, overlapping, or a sub-region on every device)."""
    spec = [split_axes(boxes, j, shape) for j in range(len(full))]
    for d, (lo, hi) in enumerate(boxes):
        c = _coords(d, shape)
        for j, axes in enumerate(spec):
            n = int(np.prod([shape[a] for a in axes])) if axes else 1
            if full[j] % n:
                return None
            tile, idx = full[j] // n, tile_index(c, axes, shape)
            if lo[j] != idx * tile or hi[j] != lo[j] + tile:
                return None
    return tuple(tuple(names[a] for a in axes) for axes in spec)


def _key(attrs: dict) -> str:
    return repr(sorted((k, repr(v)) for k, v in attrs.items()))


def node_maps(eg, mesh_shape, axis_names) -> Tuple[Dict[str, NodeMap], Dict[str, str]]:
    """({node: NodeMap} for the nodes of execution graph `eg` that run as mesh tiles,
    {node: why not} for the others). Devices are in autotile's order, which is the mesh's
    (cut 0 the major axis)."""
    low = eg.lowered
    ndev = int(np.prod(mesh_shape))
    per_node: Dict[int, Dict[int, dict]] = {}
    for i in range(len(eg.ops)):
        op = eg.ops[i]
        if op["kind"] == "compute":
            per_node.setdefault(op["node"], {})[op["device"]] = op
    maps, why = {}, {}
    nodes = {n.name: n for n in eg.training.symbol.topo_nodes() if not n.is_variable}
    for nid, ops in per_node.items():
        name = low.node_names[nid]
        m = _node_map(eg, nodes.get(name), name, nid, ops, ndev, mesh_shape, axis_names)
        if isinstance(m, str):
            why[name] = m
        else:
            maps[name] = m
    return maps, why


def _node_map(eg, node, name, nid, ops, ndev, mesh_shape, axis_names):
    low = eg.lowered
    if node is None:
        return "not a node of the training graph"
    if sorted(ops) != list(range(ndev)):
        return f"runs on {len(ops)} of {ndev} devices"
    ops = [ops[d] for d in range(ndev)]
    in_t, out_t = eg.core_tensor_inputs[nid], eg.core_tensor_outputs[nid]
    if len(in_t) != len(node.inputs):
        return "the execution graph's inputs are not the node's"
    in_shapes = [tuple(low.tensor_shapes[t]) for t in in_t]
    out_shapes = [tuple(low.tensor_shapes[t]) for t in out_t]
    in_specs, shape_only, halos, wide = [], {}, {}, {}
    varying = set()  # mesh axes along which some input the node reads changes
    for j, full in enumerate(in_shapes):
        if any(op["inputs"][j] < 0 for op in ops):
            if not all(op["inputs"][j] < 0 for op in ops):
                return f"input {j} is read on some devices only"
            shapes = {_shape_only(eg, op, j, nid) for op in ops}
            if len(shapes) != 1:
                return f"input {j} (read for its shape) has tiles of different shapes"
            in_specs.append(None)
            shape_only[j] = shapes.pop()
            continue
        boxes = [op["input_boxes"][j] for op in ops]
        spec = spec_of(boxes, full, mesh_shape, axis_names)
        found = halo_of(boxes, full, mesh_shape) if spec is None and node.op in HALO_OPS else None
        if found is not None:  # the tile and its neighbours' rows (halo.py)
            core, halos[j], wide[j] = found
            spec = spec_of(core, full, mesh_shape, axis_names)
        if spec is None and j == 0 and node.op in SHAPE_ONLY:  # a reshape's hull: its exact run
            exact = exact_input_boxes([_box(eg, op["outputs"][0]) for op in ops], full, out_shapes[0])
            spec = spec_of(exact, full, mesh_shape, axis_names) if exact else None
            if spec is not None:
                wide[j] = exact
        if spec is None:
            return f"input '{low.tensor_names[in_t[j]]}' is read in boxes that are not mesh tiles (halo or uneven)"
        in_specs.append(spec)
        varying |= {a for axes in spec for a in axes}
    out_specs, partial, tiles = [], [], []
    for j, full in enumerate(out_shapes):
        bufs = [eg.buffers[op["outputs"][j]] for op in ops]
        spec = spec_of([(b["lo"], b["hi"]) for b in bufs], full, mesh_shape, axis_names)
        if spec is None:
            return f"output '{low.tensor_names[out_t[j]]}' is written in boxes that are not mesh tiles"
        used = {a for axes in spec for a in axes}
        summed = tuple(a for a in axis_names if a in varying and a not in used)
        if bool(summed) != bool(bufs[0]["partial"]) or any(b["partial"] != bufs[0]["partial"] for b in bufs):
            return f"output '{low.tensor_names[out_t[j]]}' is partial in a way its boxes do not explain"
        out_specs.append(spec)
        partial.append(summed)
        tiles.append(tuple(h - lo for lo, h in zip(bufs[0]["lo"], bufs[0]["hi"])))
    attrs, groups, seen = [], [], {}
    parsed = node.parsed_attrs()
    for d, op in enumerate(ops):
        out_boxes = [(eg.buffers[b]["lo"], eg.buffers[b]["hi"]) for b in op["outputs"]]
        # a widened input's tile attributes from its unclipped box (the zeros it receives
        # past the tensor's ends are the padding), a reshape's from its exact run
        in_boxes = [wide[j][d] if j in wide else box for j, box in enumerate(op["input_boxes"])]
        a = tile_attrs(node.op, parsed, in_boxes, out_boxes, in_shapes, out_shapes)
        k = _key(a)
        if k not in seen:
            seen[k] = len(attrs)
            attrs.append(a)
        groups.append(seen[k])
    return NodeMap(name, in_specs, shape_only, out_specs, partial, attrs, groups, tiles, halos)


def _box(eg, buffer: int):
    b = eg.buffers[buffer]
    return tuple(b["lo"]), tuple(b["hi"])


def _shape_only(eg, op, j, nid) -> Tuple[int, ...]:
    """The tile shape of an input read for its shape only (backend/sub_op.py's stand-in)."""
    low = eg.lowered
    lo, hi = op["input_boxes"][j]
    full = tuple(low.tensor_shapes[eg.core_tensor_inputs[nid][j]])
    for out_t, b in zip(eg.core_tensor_outputs[nid], op["outputs"]):
        if tuple(low.tensor_shapes[out_t]) == full:
            ob = eg.buffers[b]
            return tuple(h - l for l, h in zip(ob["lo"], ob["hi"]))
    return tuple(h - l for l, h in zip(lo, hi))


def reduction(spec: Spec, summed: Tuple[str, ...], stored: Optional[Spec], tile, sizes: Dict[str, int],
              shape=None):
    """How a partial output (tile shape `tile` of mesh spec `spec`, a partial sum over the
    mesh axes `summed`) is reduced toward its `stored` layout inside the map: reduce-scatters
    [(dimension, axes, run)] over the partial axes the stored layout splits a dimension over
    (appended to the axes the tile already has there), then an all-reduce over the axes
    left. `run` is the stored order of the mesh axes the scatter appends: the partial `axes`
    and, between or after them, axes the tile is replicated over (neither split nor summed),
    whose part each device keeps before the reduce-scatter, so the group reduces only what
    its members store (a weight gradient summed over the batch axis and stored split over all
    three: each device sends an eighth, not half). Returns (scatters, all-reduce axes, the
    result's spec, notes): the notes say where
    this costs more than the plan's own reduction ("uneven": a tile that the partial axes do
    not divide, all-reduced; "order": scattered in another mesh-axis order than stored, so
    a permutation of tiles follows). A partial axis that fits none of these is scattered along
    the dimension of the tile (of a tensor of `shape`) from which :func:`relayout` reaches
    the stored layout most simply, when one does."""
    left, spec, tile = list(summed), [tuple(a) for a in spec], list(tile)
    free = [a for a in sizes if a not in summed and not any(a in axes for axes in spec)]
    scatters, notes = [], []
    for j, axes in enumerate(stored or ()):
        axes = tuple(axes)
        if axes[:len(spec[j])] == spec[j]:  # the axes that follow the tile's own, in order
            run = []
            for a in axes[len(spec[j]):]:
                if a not in left and a not in free:
                    break
                run.append(a)
            if tile[j] % int(np.prod([sizes[a] for a in run])):
                # the replicated axes' parts do not divide the tile: the partial axes that
                # directly follow the tile's own only (reduce-scattered whole, as before)
                run = run[:next((i for i, a in enumerate(run) if a not in left), len(run))]
            extra = [a for a in run if a in left]
        else:  # scattered after the tile's own axes; a permutation of tiles follows
            extra = [a for a in axes if a in left and a not in spec[j]]
            run = list(extra)
            if extra:
                notes.append("order")
        n = int(np.prod([sizes[a] for a in run])) if extra else 1
        if extra and tile[j] % n:
            notes.append(f"uneven: dimension {j} of {tile[j]} over {n} devices")
        if not extra or tile[j] % n:
            continue
        scatters.append((j, tuple(extra), tuple(run)))
        spec[j] += tuple(run)
        tile[j] //= n
        left = [a for a in left if a not in extra]
        free = [a for a in free if a not in run]
    for a in [a for a in left if stored and any(a in axes for axes in stored)]:
        # a partial axis the stored layout splits some dimension over, not where the tile's own
        # axes allow: scatter it along the dimension from which the re-layout is cleanest
        best = None
        for j in range(len(tile)):
            if tile[j] % sizes[a]:
                continue
            trial = [tuple(x) for x in spec]
            trial[j] += (a,)
            steps = relayout(tuple(trial), stored, sizes, shape) if shape is not None else None
            score = 2 if steps is None else int(any(st[0] in ("move", "exchange") for st in steps))
            if score < 2 and (best is None or (score, len(steps)) < best[:2]):
                best = (score, len(steps), j)
        if best is not None:
            j = best[2]
            scatters.append((j, (a,), (a,)))
            spec[j] += (a,)
            tile[j] //= sizes[a]
            left.remove(a)
    return scatters, tuple(left), tuple(spec), notes


def reduce_partial(x, scatters, left, sizes: Dict[str, int]):
    """Inside the map: the partial sum `x` reduced as :func:`reduction` says (`sizes`: the
    mesh axes' sizes)."""
    import jax
    import jax.numpy as jnp

    dtype = x.dtype
    if dtype == jnp.bool_:  # NumPy's sum of booleans is their logical or: counted in a byte, as the plan's
        n = int(np.prod([sizes[a] for _, axes, _ in scatters for a in axes] + [sizes[a] for a in left]))
        x = x.astype(jnp.uint8 if n < 256 else jnp.int32)
    for j, axes, run in scatters:
        if run != axes:  # keep this device's part for the replicated axes of the run first
            x = x.reshape(x.shape[:j] + tuple(sizes[a] for a in run) + (-1,) + x.shape[j + 1:])
            for i in reversed(range(len(run))):
                if run[i] not in axes:
                    x = jax.lax.dynamic_index_in_dim(x, jax.lax.axis_index(run[i]), j + i, keepdims=False)
            x = x.reshape(x.shape[:j] + (-1,) + x.shape[j + len(axes) + 1:])
        x = jax.lax.psum_scatter(x, axes, scatter_dimension=j, tiled=True)
    x = jax.lax.psum(x, left) if left else x
    return x > 0 if dtype == jnp.bool_ else x


def device_index(axis_names, mesh_shape):
    """This device's index in mesh order, inside a shard_map."""
    import jax

    idx = 0
    for a, k in zip(axis_names, mesh_shape):
        idx = idx * k + jax.lax.axis_index(a)
    return idx


def tile_offset(spec: Spec, j: int, tile: int, mesh_sizes: Dict[str, int]):
    """Inside the map: where this device's tile of dimension `j` starts."""
    import jax

    idx = 0
    for a in spec[j]:
        idx = idx * mesh_sizes[a] + jax.lax.axis_index(a)
    return idx * tile


def relayout(src: Spec, dst: Spec, sizes: Dict[str, int], shape):
    """The steps that take a tile of mesh spec `src` to one of `dst` inside a shard_map, each
    moving only what the target tile needs: ``("slice", j, axes)`` keeps this device's part
    of dimension j for mesh axes no device splits yet (no data moves); ``("a2a", i, j,
    moving, axes)`` moves the minor mesh axes `moving` of dimension i to dimension j (one
    all-to-all over them), after keeping this device's part for the further `axes` that
    follow them in j; ``("a2a2", i, j1, first, j2, second)`` moves them to two dimensions
    in one all-to-all, ``("a2a2m", i1, first, i2, second, j)`` minor axes of two
    dimensions to one; ``("gather", i, a)`` all-gathers dimension i over its minor axis `a`;
    ``("move", moves)`` sends each device's target tile from a device whose tile holds it
    (:func:`block_moves`: a permutation of tiles, collective-permutes that skip devices
    already holding their target); ``("exchange", pieces)`` cuts each tile into the pieces
    the target tiles need and sends them in one all-to-all over the source's mesh axes
    (:func:`exchange`: tiles in another mesh-axis order, every piece of equal size). None
    when these steps cannot reach `dst` or a tile of the tensor's `shape` does not divide
    (the caller then leaves the re-layout to XLA)."""
    cur = [tuple(a) for a in src]
    dst = [tuple(a) for a in dst]
    steps = _relayout_steps(cur, dst, sizes)
    if steps is None:
        moves = block_moves(src, dst, sizes, shape)
        if moves is not None:
            return [("move", moves)]
        pieces = exchange(src, dst, sizes, shape)
        return None if pieces is None else [("exchange", pieces)]
    local = [int(n) for n in shape]
    for j, axes in enumerate(src):
        local[j] = _divide(local[j], [sizes[a] for a in axes])
    for step in steps:
        if step[0] == "slice":
            local[step[1]] = _divide(local[step[1]], [sizes[a] for a in step[2]])
        elif step[0] == "a2a":
            _, i, j, moving, axes = step
            k = int(np.prod([sizes[a] for a in moving]))
            local[j] = _divide(local[j], [k] + [sizes[b] for b in axes])
            local[i] = None if local[i] is None else local[i] * k
        elif step[0] == "a2a2":
            _, i, j1, first, j2, second = step
            k1, k2 = (int(np.prod([sizes[a] for a in run])) for run in (first, second))
            local[j1], local[j2] = _divide(local[j1], [k1]), _divide(local[j2], [k2])
            local[i] = None if local[i] is None else local[i] * k1 * k2
        elif step[0] == "a2a2m":
            _, i1, first, i2, second, j = step
            k1, k2 = (int(np.prod([sizes[a] for a in run])) for run in (first, second))
            local[j] = _divide(local[j], [k1, k2])
            local[i1] = None if local[i1] is None else local[i1] * k1
            local[i2] = None if local[i2] is None else local[i2] * k2
        else:
            local[step[1]] = None if local[step[1]] is None else local[step[1]] * sizes[step[2]]
    return None if None in local else steps


def _divide(n, ks):
    if n is None:
        return None
    for k in ks:
        if n % k:
            return None
        n //= k
    return n


def _relayout_steps(cur, dst, sizes):
    steps = []
    for _ in range(4 * (len(cur) + 1) * (len(sizes) + 1)):
        if cur == dst:
            return steps
        present = {a for axes in cur for a in axes}
        moved = False
        slicing = any(cur[j] != want and want[:len(cur[j])] == cur[j] and want[len(cur[j])] not in present
                      for j, want in enumerate(dst))
        two = None if slicing else _split_all_to_all(cur, dst)
        if two is not None:  # minor axes of one dimension moving to two others at once
            i, j1, first, j2, second = two
            steps.append(("a2a2", i, j1, first, j2, second))
            cur[i] = cur[i][:len(cur[i]) - len(first) - len(second)]
            cur[j1] += first
            cur[j2] += second
            continue
        merge = None if slicing else _merge_all_to_all(cur, dst)
        if merge is not None:  # minor axes of two dimensions moving to one other at once
            i1, first, i2, second, j = merge
            steps.append(("a2a2m", i1, first, i2, second, j))
            cur[i1] = cur[i1][:len(cur[i1]) - len(first)]
            cur[i2] = cur[i2][:len(cur[i2]) - len(second)]
            cur[j] += first + second
            continue
        for j, want in enumerate(dst):
            if cur[j] == want or want[:len(cur[j])] != cur[j]:
                continue
            nxt = want[len(cur[j])]
            if nxt not in present:
                run = []
                for a in want[len(cur[j]):]:
                    if a in present:
                        break
                    run.append(a)
                steps.append(("slice", j, tuple(run)))
                cur[j] += tuple(run)
                moved = True
                break
            # the minor axes of another dimension, from nxt on, that come next here: one all-to-all
            holder = [(i, axes.index(nxt)) for i, axes in enumerate(cur) if i != j and nxt in axes]
            i, p = holder[0] if holder else (None, None)
            moving = cur[i][p:] if holder else ()
            start = len(cur[j])
            if holder and want[start:start + len(moving)] == moving:
                run = []
                for a in want[start + len(moving):]:
                    if a in present:
                        break
                    run.append(a)
                steps.append(("a2a", i, j, moving, tuple(run)))
                cur[i] = cur[i][:p]
                cur[j] += moving + tuple(run)
                moved = True
                break
        if moved:
            continue
        # gather a minor axis the target does not split by; one it does (wanted elsewhere or in
        # another order) is a permutation of tiles, which gathering would only replicate
        for i, axes in enumerate(cur):
            if axes and dst[i][:len(axes)] != axes and not any(axes[-1] in d for d in dst):
                steps.append(("gather", i, axes[-1]))
                cur[i] = axes[:-1]
                moved = True
                break
        if not moved:
            return None
    return None


def _split_all_to_all(cur, dst):
    """(i, j1, first, j2, second) where the minor axes of dimension i are `first` then
    `second`, and they come next in dimensions j1 and j2 of the target; None if none."""
    for i, axes in enumerate(cur):
        for n in range(2, len(axes) + 1):
            suffix = axes[len(axes) - n:]
            for cut in range(1, n):
                first, second = suffix[:cut], suffix[cut:]
                ends = []
                for run in (first, second):
                    ends.append(next((j for j, want in enumerate(dst) if j != i and want[:len(cur[j])] == cur[j]
                                      and want[len(cur[j]):len(cur[j]) + len(run)] == run), None))
                if None not in ends and ends[0] != ends[1]:
                    return i, ends[0], first, ends[1], second
    return None


def _merge_all_to_all(cur, dst):
    """(i1, first, i2, second, j) where `first` and `second` are minor axes of dimensions i1
    and i2 that come next, in that order, in dimension j of the target; None if none."""
    for j, want in enumerate(dst):
        if want[:len(cur[j])] != cur[j] or len(want) - len(cur[j]) < 2:
            continue
        rest = want[len(cur[j]):]
        for cut in range(1, len(rest)):
            first, second = rest[:cut], rest[cut:]
            src = []
            for run in (first, second):
                src.append(next((i for i, axes in enumerate(cur) if i != j and len(axes) >= len(run)
                                 and axes[len(axes) - len(run):] == run), None))
            if None not in src and src[0] != src[1]:
                return src[0], first, src[1], second, j
    return None


def _coord(axes, sizes):
    """Inside the map: this device's index along mesh axes `axes` (major first)."""
    import jax

    idx = 0
    for a in axes:
        idx = idx * sizes[a] + jax.lax.axis_index(a)
    return idx


def apply_relayout(x, steps, sizes: Dict[str, int]):
    """Inside the map: `x` re-laid out by :func:`relayout`'s steps."""
    import jax

    for step in steps:
        if step[0] == "move":
            x = _apply_moves(x, step[1], sizes)
        elif step[0] == "exchange":
            x = _apply_exchange(x, step[1], sizes)
        elif step[0] == "slice":
            _, j, axes = step
            n = int(np.prod([sizes[a] for a in axes]))
            size = x.shape[j] // n
            x = jax.lax.dynamic_slice_in_dim(x, _coord(axes, sizes) * size, size, j)
        elif step[0] == "a2a":
            _, i, j, moving, axes = step
            k = int(np.prod([sizes[a] for a in moving]))
            if axes:  # keep this device's part for `axes` within each of the moved axes' chunks
                n = int(np.prod([sizes[b] for b in axes]))
                rest = x.shape[j] // (k * n)
                y = x.reshape(x.shape[:j] + (k, n, rest) + x.shape[j + 1:])
                y = jax.lax.dynamic_slice_in_dim(y, _coord(axes, sizes), 1, j + 1)
                x = y.reshape(x.shape[:j] + (k * rest,) + x.shape[j + 1:])
            x = jax.lax.all_to_all(x, moving if len(moving) > 1 else moving[0], j, i, tiled=True)
        elif step[0] == "a2a2":
            x = _all_to_all_two(x, *step[1:], sizes)
        elif step[0] == "a2a2m":
            x = _all_to_all_merge(x, *step[1:], sizes)
        else:
            _, i, a = step
            x = jax.lax.all_gather(x, a, axis=i, tiled=True)
    return x


def _all_to_all_two(x, i, j1, first, j2, second, sizes):
    """One all-to-all over `first + second` (dimension i's minor axes) sending chunk (p, q)
    of dimensions (j1, j2) to the device at index p along `first` and q along `second`."""
    import jax
    import jax.numpy as jnp

    k1, k2 = (int(np.prod([sizes[a] for a in run])) for run in (first, second))
    shape, split = list(x.shape), []
    for d, n in enumerate(shape):
        split += [k1, n // k1] if d == j1 else [k2, n // k2] if d == j2 else [n]
    y = x.reshape(split)
    p1 = j1 + (1 if j2 < j1 else 0)  # where dimension j1's chunk index sits in `split`
    p2 = j2 + (1 if j1 < j2 else 0)
    y = jnp.moveaxis(y, (p1, p2), (0, 1))
    y = y.reshape((k1 * k2,) + y.shape[2:])
    y = jax.lax.all_to_all(y, tuple(first) + tuple(second), 0, 1 + i, tiled=True)
    return y.reshape(y.shape[1:])


def _boxes(spec, sizes, axis_order, shape):
    """Each device's box (lo, tile shape) under mesh spec `spec`, devices in mesh order."""
    mesh = [sizes[a] for a in axis_order]
    tile = [int(n) // int(np.prod([sizes[a] for a in axes])) for n, axes in zip(shape, spec)]
    out = []
    for d in range(int(np.prod(mesh))):
        c = dict(zip(axis_order, _coords(d, mesh)))
        lo = []
        for axes, t in zip(spec, tile):
            idx = 0
            for a in axes:
                idx = idx * sizes[a] + c[a]
            lo.append(idx * t)
        out.append(tuple(lo))
    return out, tuple(tile)


def _tiles_divide(src: Spec, dst: Spec, sizes: Dict[str, int], shape) -> bool:
    return all(int(n) % int(np.prod([sizes[a] for a in axes])) == 0
               for n, axes in list(zip(shape, src)) + list(zip(shape, dst)))


def block_moves(src: Spec, dst: Spec, sizes: Dict[str, int], shape):
    """Where every device's `dst` tile lies inside some device's `src` tile: (tile shape,
    per device the offset of its own target inside its own tile or None, and rounds of
    (pairs, per device the offset it sends that round or None, per device whether it
    receives that round)). None otherwise, or when a tile does not divide."""
    axis_order = list(sizes)
    if not _tiles_divide(src, dst, sizes, shape):
        return None
    src_lo, src_tile = _boxes(src, sizes, axis_order, shape)
    dst_lo, dst_tile = _boxes(dst, sizes, axis_order, shape)

    def inside(d, s):
        return all(sl <= dl and dl + dt <= sl + st for dl, dt, sl, st in zip(dst_lo[d], dst_tile, src_lo[s], src_tile))

    ndev = len(src_lo)
    local, sends = [None] * ndev, [[] for _ in range(ndev)]
    for d in range(ndev):
        if inside(d, d):
            local[d] = tuple(dl - sl for dl, sl in zip(dst_lo[d], src_lo[d]))
            continue
        holders = [s for s in range(ndev) if inside(d, s)]
        if not holders:
            return None
        s = min(holders, key=lambda h: len(sends[h]))
        sends[s].append((d, tuple(dl - sl for dl, sl in zip(dst_lo[d], src_lo[s]))))
    rounds = []
    for r in range(max(len(x) for x in sends)):
        pairs, offset, receives = [], [None] * ndev, [False] * ndev
        for s in range(ndev):
            if r < len(sends[s]):
                d, off = sends[s][r]
                pairs.append((s, d))
                offset[s], receives[d] = off, True
        rounds.append((pairs, offset, receives))
    return dst_tile, local, rounds


def _apply_moves(x, moves, sizes):
    """Inside the map: :func:`block_moves`' plan carried out with ``lax.ppermute``."""
    import jax
    import jax.numpy as jnp

    tile, local, rounds = moves
    axes = tuple(sizes)
    idx = device_index(axes, [sizes[a] for a in axes])
    zero = (0,) * len(tile)

    def table(offsets):
        return jnp.asarray(np.array([o if o is not None else zero for o in offsets], np.int32))

    y = jax.lax.dynamic_slice(x, tuple(table(local)[idx]), tile)
    for pairs, offset, receives in rounds:
        piece = jax.lax.dynamic_slice(x, tuple(table(offset)[idx]), tile)
        got = jax.lax.ppermute(piece, axes, pairs)
        y = jnp.where(jnp.asarray(np.array(receives))[idx], got, y)
    return y


def _all_to_all_merge(x, i1, first, i2, second, j, sizes):
    """One all-to-all over `first + second` (minor axes of dimensions i1 and i2) sending
    chunk p * k2 + q of dimension j to the device at index p along `first` and q along
    `second`; what arrives from index (p', q') lands at block p' of i1 and q' of i2."""
    import jax
    import jax.numpy as jnp

    k1, k2 = (int(np.prod([sizes[a] for a in run])) for run in (first, second))
    shape = x.shape
    y = x.reshape(shape[:j] + (k1 * k2, shape[j] // (k1 * k2)) + shape[j + 1:])
    y = jax.lax.all_to_all(y, tuple(first) + tuple(second), j, j, tiled=True)  # now indexed by source
    y = y.reshape(shape[:j] + (k1, k2, shape[j] // (k1 * k2)) + shape[j + 1:])
    y = jnp.moveaxis(y, (j, j + 1), (0, 1))  # (k1, k2, *dims with j divided)
    rest = list(y.shape[2:])
    y = jnp.moveaxis(y, 0, 1 + i1)  # k1 just before dimension i1
    y = y.reshape((k2,) + tuple(rest[:i1]) + (k1 * rest[i1],) + tuple(rest[i1 + 1:]))
    rest[i1] *= k1
    y = jnp.moveaxis(y, 0, i2)  # k2 just before dimension i2
    return y.reshape(tuple(rest[:i2]) + (k2 * rest[i2],) + tuple(rest[i2 + 1:]))


def exchange(src: Spec, dst: Spec, sizes: Dict[str, int], shape):
    """A re-layout as one all-to-all over the mesh axes `src` splits by (`group`, in mesh
    order): every device cuts its `src` tile into the pieces the `dst` tiles of its group's
    members need (the intersections of the tiles' boxes) and receives one piece from each.
    Returns (group, piece shape, target tile shape, send offsets, receive offsets): per device
    (mesh order) and group member g, where the piece for g starts in this device's source
    tile, and where the piece from g starts in its target tile. None when a tile does not divide or the pieces
    differ in size (an empty one included): one all-to-all then moves more than the plan."""
    axis_order = list(sizes)
    if not _tiles_divide(src, dst, sizes, shape):
        return None
    group = tuple(a for a in axis_order if sizes[a] > 1 and any(a in axes for axes in src))
    if not group:
        return None
    src_lo, src_tile = _boxes(src, sizes, axis_order, shape)
    dst_lo, dst_tile = _boxes(dst, sizes, axis_order, shape)
    mesh, gshape = [sizes[a] for a in axis_order], [sizes[a] for a in group]
    ndev, n = int(np.prod(mesh)), int(np.prod(gshape))
    piece, send, recv = None, [[None] * n for _ in range(ndev)], [[None] * n for _ in range(ndev)]
    for d in range(ndev):
        c = dict(zip(axis_order, _coords(d, mesh)))
        me = int(np.ravel_multi_index([c[a] for a in group], gshape))
        for g in range(n):
            c.update(zip(group, _coords(g, gshape)))
            t = int(np.ravel_multi_index([c[a] for a in axis_order], mesh))
            lo = tuple(max(s, u) for s, u in zip(src_lo[d], dst_lo[t]))
            hi = tuple(min(s + k, u + m) for s, k, u, m in zip(src_lo[d], src_tile, dst_lo[t], dst_tile))
            size = tuple(h - l for l, h in zip(lo, hi))
            if min(size, default=1) <= 0 or (piece is not None and size != piece):
                return None
            piece = size
            send[d][g] = tuple(l - s for l, s in zip(lo, src_lo[d]))
            recv[t][me] = tuple(l - u for l, u in zip(lo, dst_lo[t]))
    if n * int(np.prod(piece)) != int(np.prod(dst_tile)):  # pieces overlap: not one tile each
        return None
    return group, piece, dst_tile, send, recv


def _apply_exchange(x, pieces, sizes):
    """Inside the map: :func:`exchange`'s pieces sent by one ``lax.all_to_all``."""
    import jax
    import jax.numpy as jnp

    group, piece, tile, send, recv = pieces
    axes = tuple(sizes)
    idx = device_index(axes, [sizes[a] for a in axes])
    send_at = jnp.asarray(np.array(send, np.int32))[idx]
    recv_at = jnp.asarray(np.array(recv, np.int32))[idx]
    y = jnp.stack([jax.lax.dynamic_slice(x, tuple(send_at[g]), piece) for g in range(len(send[0]))])
    y = jax.lax.all_to_all(y, group if len(group) > 1 else group[0], 0, 0, tiled=True)  # slot g: from g
    out = jnp.zeros(tile, x.dtype)
    for g in range(len(recv[0])):
        out = jax.lax.dynamic_update_slice(out, y[g], tuple(recv_at[g]))
    return out
