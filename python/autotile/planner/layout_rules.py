"""Named meshes and layout rules (Mesh-TensorFlow Sec 4-5) as constraints of the search.

A mesh names its axes and their sizes, ``{"batch": 4, "model": 8}``. The search cuts the
devices one prime factor at a time; each cut belongs to one mesh axis (an axis of size 4 is
two 2-way cuts), axes in the order given, so device ``d`` has mesh coordinates in row-major
order (the last axis varies fastest), as ``numpy.reshape(range(devices), sizes)`` gives.

A layout is a partial map from tensors to mesh axes: ``{pattern: {dim: axis}}`` where the
pattern is a tensor name or an ``fnmatch`` pattern (``"*_weight"``). A tensor a rule matches
has its whole layout fixed: the dimensions the rule names are split over their axes, and the
tensor is replicated over every other axis. Tensors no rule matches are searched. A rule
that matches no tensor, a dimension the tensor lacks, one axis used for two dimensions or an
axis the mesh lacks is an Error naming the rule and the tensor.
"""
from __future__ import annotations

import fnmatch
import math
import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ..errors import Error

#: The axis name of a plain device count (``devices=k`` is the one-axis mesh).
DEFAULT_AXIS = "devices"
#: The most devices a plan may have (AT_MAX_DEVICES of the C API, csrc/include/autotile/c_api.h).
MAX_DEVICES = 4096


def _prime_factors(n: int) -> List[int]:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return sorted(out, reverse=True)


def check_mesh(mesh) -> Dict[str, int]:
    """`mesh` as an ordered {axis: size} dict; Error naming the argument on anything else."""
    if isinstance(mesh, str):  # the CLI form "batch=4,model=8"
        pairs = {}
        for part in filter(None, (p.strip() for p in mesh.split(","))):
            name, sep, size = part.partition("=")
            if not sep or not name.strip():
                raise Error(f"mesh: expected 'axis=size' entries separated by commas, got {part!r}")
            name = name.strip()
            if name in pairs:  # a dict would keep the last size silently
                raise Error(f"mesh: axis '{name}' is given twice ({name}={pairs[name]} and {part})")
            try:
                pairs[name] = int(size)
            except ValueError:
                raise Error(f"mesh: the size of axis '{name}' must be an integer, got {size!r}") from None
        mesh = pairs
    if not isinstance(mesh, Mapping) or not mesh:
        raise Error(f"mesh must be a non-empty dict {{axis name: size}}, got {mesh!r}")
    out: Dict[str, int] = {}
    for name, size in mesh.items():
        if not isinstance(name, str) or not name:
            raise Error(f"mesh: axis names must be non-empty strings, got {name!r}")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise Error(f"mesh: axis '{name}' must have a positive integer size, got {size!r}")
        out[name] = size
    check_axis_names(out)
    total = math.prod(out.values())
    if total > MAX_DEVICES:  # before anything factors the sizes (a huge prime would take forever)
        raise Error(f"mesh {out} has {total} devices, more than the {MAX_DEVICES} autotile plans for")
    return out


def check_axis_names(mesh: Mapping[str, int], what: str = "mesh") -> None:
    """Error when an axis is named as another axis's cut: the exports (planner/export.py) and
    the torch engine name the cuts of an axis split more than once ``model.0``, ``model.1``,
    so an axis ``model.0`` beside ``model`` would give the mesh two dimensions of one name."""
    for name in mesh:
        base, dot, index = str(name).rpartition(".")
        if dot and index.isdigit() and base in mesh:
            raise Error(f"{what}: axis '{name}' is named as a cut of axis '{base}' (the exports name the cuts of "
                        f"an axis '{base}.0', '{base}.1', ...): rename it")


def mesh_cuts(mesh: Mapping[str, int]) -> Tuple[List[int], List[str]]:
    """The cut factors of a mesh in search order and the axis each cut belongs to."""
    factors: List[int] = []
    axes: List[str] = []
    for name, size in mesh.items():
        for f in _prime_factors(size):
            factors.append(f)
            axes.append(name)
    return factors, axes


def cut_bandwidths(bandwidths, mesh: Mapping[str, int], cut_axes: Sequence[str]) -> List[float]:
    """Per-cut link bandwidths (bytes/s) from bandwidths by mesh axis name."""
    missing = [a for a in mesh if a not in bandwidths]
    unknown = [a for a in bandwidths if a not in mesh]
    if missing or unknown:
        raise Error(f"bandwidths must give one value per mesh axis ({', '.join(mesh)})"
                    + (f"; missing: {', '.join(missing)}" if missing else "")
                    + (f"; not mesh axes: {', '.join(map(str, unknown))}" if unknown else ""))
    out = []
    for axis in cut_axes:
        b = bandwidths[axis]
        if isinstance(b, bool) or not isinstance(b, (int, float)) or not b > 0:
            raise Error(f"bandwidths: axis '{axis}' needs a positive number of bytes/s, got {b!r}")
        out.append(float(b))
    return out


def _check_rules(layout) -> Dict[str, Dict[int, str]]:
    if not isinstance(layout, Mapping):
        raise Error(f"layout must be a dict {{tensor name or pattern: {{dim: mesh axis}}}}, got {type(layout).__name__}")
    rules: Dict[str, Dict[int, str]] = {}
    for pattern, dims in layout.items():
        if not isinstance(pattern, str) or not pattern:
            raise Error(f"layout: rule keys must be tensor names or patterns, got {pattern!r}")
        if not isinstance(dims, Mapping):
            raise Error(f"layout rule '{pattern}': expected {{dim: mesh axis}}, got {dims!r}")
        clean: Dict[int, str] = {}
        for dim, axis in dims.items():
            if isinstance(dim, str) and re.fullmatch(r"\s*-?\d+\s*", dim):
                dim = int(dim)  # a JSON object's key (to_mesh_tf written with json.dump)
                if dim in clean:
                    raise Error(f"layout rule '{pattern}': dimension {dim} is given twice")
            if isinstance(dim, bool) or not isinstance(dim, int):
                raise Error(f"layout rule '{pattern}': dimensions must be integers, got {dim!r}")
            if axis is None:
                continue
            if not isinstance(axis, str):
                raise Error(f"layout rule '{pattern}': dimension {dim} must map to a mesh axis name, got {axis!r}")
            clean[dim] = axis
        rules[pattern] = clean
    return rules


def pin_table(layout, tensor_names: Sequence[str], tensor_shapes: Sequence[Tuple[int, ...]],
              mesh: Mapping[str, int], cut_axes: Sequence[str]) -> Tuple[List[Optional[List[str]]], Dict[str, str]]:
    """Per tensor id, None (free) or the tiling string of every cut, from layout rules.

    Returns (pins, rule_of_tensor). The first rule (in the dict's order) that matches a tensor
    decides its layout; a rule matching no tensor is an Error."""
    rules = _check_rules(layout)
    pins: List[Optional[List[str]]] = [None] * len(tensor_names)
    rule_of: Dict[str, str] = {}
    for pattern, dims in rules.items():
        used = {}
        for dim, axis in dims.items():
            if axis not in mesh:
                raise Error(f"layout rule '{pattern}': mesh axis '{axis}' does not exist "
                            f"(mesh axes: {', '.join(mesh)})")
            if axis in used:
                raise Error(f"layout rule '{pattern}': mesh axis '{axis}' is used for two dimensions "
                            f"({used[axis]} and {dim}) of one tensor")
            used[axis] = dim
        literal = not any(c in pattern for c in "*?[")
        matched = [i for i, n in enumerate(tensor_names)
                   if (n == pattern if literal else fnmatch.fnmatchcase(n, pattern))]
        if not matched:
            hint = "" if not literal else " (names are the model's tensor names, e.g. from Plan.tensor_tilings)"
            raise Error(f"layout rule '{pattern}' matches no tensor of the training graph{hint}")
        for i in matched:
            if pins[i] is not None:
                continue  # an earlier rule decided this tensor
            name, shape = tensor_names[i], tuple(tensor_shapes[i])
            row = []
            for axis in cut_axes:
                dim = next((d for d, a in dims.items() if a == axis), None)
                if dim is None:
                    row.append("replicate")
                    continue
                d = dim + len(shape) if dim < 0 else dim
                if not 0 <= d < len(shape):
                    raise Error(f"layout rule '{pattern}': tensor '{name}' of shape {shape} has no dimension {dim}")
                row.append(f"split({d})")
            for axis, dim in used.items():
                d = dim + len(shape) if dim < 0 else dim
                if shape[d] % mesh[axis]:
                    raise Error(f"layout rule '{pattern}': dimension {d} of tensor '{name}' (size {shape[d]}) "
                                f"does not divide over mesh axis '{axis}' of size {mesh[axis]}")
            pins[i] = row
            rule_of[name] = pattern
    return pins, rule_of


def tensor_axes(tilings: Sequence[str], cut_axes: Sequence[str]) -> Dict[int, List[str]]:
    """Which tensor dimension is split over which mesh axes, from a tensor's per-cut tilings:
    {dim: [axis, ...]} (an axis appears once even when it spans several cuts)."""
    out: Dict[int, List[str]] = {}
    for t, axis in zip(tilings, cut_axes):
        if t.startswith("split("):
            d = int(t[6:-1])
            axes = out.setdefault(d, [])
            if axis not in axes:
                axes.append(axis)
    return out


def _declared(text: str) -> List[Tuple[str, Optional[int]]]:
    """A variable's ``__dims__`` attribute as (name, whole units or None) per dimension."""
    out = []
    for item in text.strip().strip("()[]").split(","):
        item = item.strip().strip("'\"")
        if item:
            name, sep, units = item.partition(":")
            out.append((name.strip(), int(units) if sep and units.strip().isdigit() else None))
    return out


def declared_dims(text: str) -> List[str]:
    """A variable's ``__dims__`` attribute ("batch,seq" or "('batch', 'seq')") as names. A name
    may carry the number of whole units its dimension holds, ``heads:4`` (a fused heads x d_k
    dimension of 4 heads): a rule may split it into whole units only."""
    return [name for name, _ in _declared(text)]


def named_dim_rules(sym, pairs, mesh: Optional[Mapping[str, int]] = None) -> Dict[str, Dict[int, str]]:
    """Mesh-TensorFlow's layout form, ``[("batch", "rows"), ("d_ff", "cols")]`` (tensor
    dimension name -> mesh axis), as per-tensor rules for every variable of `sym` that
    declares its dimension names (``Variable(..., dims=("batch", "seq", "d_model"))``). Such a
    tensor's layout is fixed as Mesh-TF fixes it: its named dimensions split over their axes,
    replicated over the rest. Tensors without declared names are left to the search. Given
    the `mesh`, a rule that cannot split a dimension whole (its size, or its declared whole
    units such as ``heads:4``, not a multiple of the axis's size) is an Error naming the rule:
    Mesh-TF refuses it rather than split inside a head."""
    mapping: Dict[str, str] = {}
    for item in pairs:
        if not (isinstance(item, (tuple, list)) and len(item) == 2 and all(isinstance(x, str) for x in item)):
            raise Error(f"layout: Mesh-TF rules are (dimension name, mesh axis) pairs, got {item!r}")
        dim, axis = item
        if dim in mapping and mapping[dim] != axis:
            raise Error(f"layout: dimension name '{dim}' is mapped to two mesh axes ('{mapping[dim]}' and '{axis}')")
        mapping[dim] = axis
    rules: Dict[str, Dict[int, str]] = {}
    used = set()
    for node in sym.topo_nodes():
        if node.is_variable and "__dims__" in node.attrs:
            declared = _declared(node.attrs["__dims__"])
            rules[node.name] = {i: mapping[n] for i, (n, _) in enumerate(declared) if n in mapping}
            used.update(n for n, _ in declared if n in mapping)
            if mesh is not None:
                _check_whole(node, declared, mapping, mesh)
    unused = [d for d in mapping if d not in used]
    if unused:
        raise Error(f"layout: no tensor declares the dimension name(s) {', '.join(map(repr, unused))} "
                    "(variables declare them with dims=(...))")
    return rules


def _check_whole(node, declared, mapping: Mapping[str, str], mesh: Mapping[str, int]) -> None:
    """Error naming the Mesh-TF rule that would split one of `node`'s named dimensions into
    pieces other than whole units (whole heads of a fused dimension, whole elements)."""
    shape = tuple(int(v) for v in re.findall(r"-?\d+", node.attrs.get("__shape__", "")))
    for i, (name, units) in enumerate(declared):
        axis = mapping.get(name)
        if axis not in mesh:
            continue  # an unknown axis is named by pin_table
        size = shape[i] if len(shape) == len(declared) else None
        if units is not None and size is not None and (units < 1 or size % units):
            raise Error(f"parameter '{node.name}': dimension {i} ('{name}') of size {size} does not hold "
                        f"{units} whole units")
        count, what = (units, f"{units} {name}") if units is not None else (size, f"size {size}")
        if count is not None and count % mesh[axis]:
            raise Error(f"layout rule ('{name}', '{axis}'): dimension {i} of '{node.name}' ({what}) does not "
                        f"split whole over mesh axis '{axis}' of size {mesh[axis]}: each device would hold "
                        f"part of one; Mesh-TF refuses such a layout")


def parse_rule(text: str) -> Tuple[str, Dict[int, str]]:
    """One rule in the CLI form ``PATTERN:DIM=AXIS[,DIM=AXIS...]`` (``PATTERN:`` replicates the
    tensor over every axis) as (pattern, {dim: axis}); Error naming the rule otherwise."""
    pattern, sep, rest = text.rpartition(":")
    if not sep or not pattern:
        raise Error(f"layout rule {text!r}: expected PATTERN:DIM=AXIS[,DIM=AXIS...] (e.g. 'fc*_weight:0=model')")
    dims: Dict[int, str] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        dim, eq, axis = part.partition("=")
        try:
            d = int(dim)
        except ValueError:
            d = None
        if not eq or d is None or not axis.strip():
            raise Error(f"layout rule {text!r}: {part!r} is not DIM=AXIS (e.g. 0=model)")
        if d in dims:
            raise Error(f"layout rule {text!r}: dimension {d} is given twice ({d}={dims[d]} and {part})")
        dims[d] = axis.strip()
    return pattern, dims


def read_rules(path) -> Tuple[Dict[str, int], Dict[str, Dict[int, str]]]:
    """The mesh and layout rules of a JSON file as ``Plan.to_mesh_tf()`` gives them (what
    ``autotile plan --mesh-tf FILE`` writes): ``{"mesh": {...}, "layout": {tensor: {dim:
    axis}}}``; its other keys (``unexpressed``) are ignored. Error naming the file otherwise."""
    import json

    from ..file_read import read_regular_file

    try:
        doc = json.loads(read_regular_file(path, "layout rules"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise Error(f"layout rules '{path}' are not valid JSON: {e}") from None
    if not isinstance(doc, dict) or "layout" not in doc or "mesh" not in doc:
        raise Error(f"layout rules '{path}': expected an object with 'mesh' and 'layout' "
                    "(as Plan.to_mesh_tf() and autotile plan --mesh-tf write)")
    try:
        return check_mesh(doc["mesh"]), _check_rules(doc["layout"])
    except Error as e:
        raise Error(f"layout rules '{path}': {e}") from None
