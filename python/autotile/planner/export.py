"""A plan's layouts in the forms other engines take: PyTorch DTensor placements, JAX
PartitionSpecs and Mesh-TensorFlow-style layout rules. Plain data (JSON-serialisable); the
engines' own objects are built from it only when the engine is installed (``objects=True``).

Device order. autotile numbers devices with the first cut as the most significant digit, so
device ``d`` of a mesh ``{"batch": 2, "model": 4}`` sits at ``numpy.unravel_index(d, (2, 4))``:
the row-major order of ``torch.arange(8).reshape(2, 4)`` (a DTensor ``DeviceMesh``) and of
``numpy.array(jax.devices()).reshape(2, 4)`` (a JAX ``Mesh``). A tensor dimension split over
several mesh dimensions is split major-first, which is DTensor's default shard order and the
order of a JAX PartitionSpec entry ``("batch", "model")``.

Granularity. The search cuts the devices one prime factor at a time, and a mesh axis of size
4 is two 2-way cuts that could, in principle, split two different dimensions of one tensor.
Such a layout has no placement over the user's axis, so the export then uses one mesh
dimension per cut (named ``model.0``, ``model.1``) and says so in ``note``.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from ..errors import Error
from .layout_rules import DEFAULT_AXIS


def _mesh_of(plan) -> Tuple[Dict[str, int], List[str]]:
    mesh = dict(getattr(plan, "mesh", None) or {DEFAULT_AXIS: plan.devices})
    axes = list(getattr(plan, "cut_axes", None) or [DEFAULT_AXIS] * len(plan.factors))
    return mesh, axes


def _exported_tensors(plan, tensors: str = "io") -> List[str]:
    """The tensors an export covers: parameters and inputs ("io"), or every tensor of the
    planned graph ("all": activations, gradients, updated parameters too)."""
    if tensors not in ("io", "all"):
        raise Error(f"tensors must be 'io' (parameters and inputs) or 'all' (every tensor of the planned "
                    f"graph), got {tensors!r}")
    names = list(plan.input_shapes) + [p for p in plan.param_names if p not in plan.input_shapes]
    if tensors == "all":
        names += [n for n in plan.tensor_tilings if n not in set(names)]
    return [n for n in names if n in plan.tensor_tilings]


def _per_dim(tilings: List[str], cut_dim: List[int]):
    """{mesh dim index: ("shard", d) | ("replicate",) | ("partial",)} for one tensor, or None
    when two cuts of one mesh dim disagree."""
    out: Dict[int, tuple] = {}
    for t, m in zip(tilings, cut_dim):
        kind = ("shard", int(t[6:-1])) if t.startswith("split(") else ((t,) if t == "partial" else ("replicate",))
        if m in out and out[m] != kind:
            return None
        out[m] = kind
    return out


def _mesh_dims(plan, granularity: str):
    """(mesh dim names, sizes, mesh dim of each cut, note)."""
    mesh, axes = _mesh_of(plan)
    if granularity == "cut":
        names, sizes, cut_dim = [], [], []
        for c, (k, axis) in enumerate(zip(plan.factors, axes)):
            span = axes.count(axis)
            names.append(axis if span == 1 else f"{axis}.{axes[:c].count(axis)}")
            sizes.append(k)
            cut_dim.append(c)
        return names, sizes, cut_dim
    names = list(mesh)
    return names, [mesh[a] for a in names], [names.index(a) for a in axes]


def _layouts(plan, granularity: Optional[str], tensors: str = "io"):
    """Per exported tensor, its per-mesh-dim placement; picks cut granularity when the axis
    granularity cannot express some tensor (unless `granularity` forces one)."""
    if granularity not in (None, "axis", "cut"):
        raise Error(f"granularity must be 'axis', 'cut' or None (axis when it can express the plan), "
                    f"got {granularity!r}")
    names_out = _exported_tensors(plan, tensors)
    for g in ([granularity] if granularity else ["axis", "cut"]):
        names, sizes, cut_dim = _mesh_dims(plan, g)
        per = {}
        bad = None
        for n in names_out:
            p = _per_dim(plan.tensor_tilings[n], cut_dim)
            if p is None:
                bad = n
                break
            per[n] = p
        if bad is None:
            note = "" if g == "axis" else ("one mesh dimension per cut: some tensor splits two dimensions "
                                           "over one mesh axis")
            return names, sizes, per, note
        if granularity:
            raise Error(f"tensor '{bad}' splits different dimensions over one mesh axis "
                        f"({' '.join(plan.tensor_tilings[bad])}); export with granularity='cut'")
    raise AssertionError("cut granularity always expresses a plan")


def to_dtensor(plan, granularity: Optional[str] = None, objects: bool = False, tensors: str = "io") -> dict:
    """PyTorch DTensor layout: ``{"mesh": {"shape": [...], "dim_names": [...]}, "placements":
    {tensor: ["Shard(0)", "Replicate()", "Partial()"]}}`` for every parameter and input
    (``tensors="all"``: every tensor of the planned graph, activations, gradients and updated
    parameters too, by autotile's names), one placement per mesh dimension in DeviceMesh order.
    With ``objects=True`` the placements are ``torch.distributed.tensor`` objects (needs torch)."""
    names, sizes, per, note = _layouts(plan, granularity, tensors)
    placements = {}
    for n, p in per.items():
        row = []
        for m in range(len(names)):
            kind = p.get(m, ("replicate",))
            row.append(f"Shard({kind[1]})" if kind[0] == "shard" else ("Partial()" if kind[0] == "partial"
                                                                        else "Replicate()"))
        placements[n] = row
    out = {"mesh": {"shape": sizes, "dim_names": names}, "placements": placements, "note": note}
    if objects:
        try:
            from torch.distributed.tensor import Partial, Replicate, Shard
        except ImportError as e:
            raise Error(f"to_dtensor(objects=True) needs PyTorch with torch.distributed.tensor ({e})") from None

        def obj(text):
            if text.startswith("Shard("):
                return Shard(int(text[6:-1]))
            return Partial() if text == "Partial()" else Replicate()

        out["placements"] = {n: [obj(t) for t in row] for n, row in placements.items()}
    return out


def to_jax(plan, granularity: Optional[str] = None, objects: bool = False, tensors: str = "io") -> dict:
    """JAX shardings: ``{"mesh": {"shape": [...], "axis_names": [...]}, "specs": {tensor:
    [None | axis | [axis, ...]] per tensor dimension}}`` (a PartitionSpec's entries). With
    ``objects=True`` the specs are ``jax.sharding.PartitionSpec`` objects (needs jax). A
    parameter or input left partial by the plan has no PartitionSpec: Error naming it.

    ``tensors="all"`` covers every tensor of the planned graph (activations, gradients,
    updated parameters, by autotile's names); a tensor the plan leaves partial (an unreduced
    sum, which a PartitionSpec cannot express) is then listed in ``"partial"`` instead, with
    the mesh dimensions it is partial over, and has no spec."""
    names, sizes, per, note = _layouts(plan, granularity, tensors)
    specs, partial = {}, {}
    for n, p in per.items():
        rank = len(plan.tensor_shapes[n])
        entries: List[list] = [[] for _ in range(rank)]
        over = [names[m] for m in range(len(names)) if p.get(m, ("replicate",))[0] == "partial"]
        if over and tensors == "all" and n not in plan.param_names and n not in plan.input_shapes:
            partial[n] = over
            continue
        for m in range(len(names)):
            kind = p.get(m, ("replicate",))
            if kind[0] == "partial":
                raise Error(f"tensor '{n}' is partial (unreduced) over mesh dimension '{names[m]}': a JAX "
                            "PartitionSpec cannot express it")
            if kind[0] == "shard":
                entries[kind[1]].append(names[m])
        specs[n] = [None if not e else (e[0] if len(e) == 1 else list(e)) for e in entries]
    out = {"mesh": {"shape": sizes, "axis_names": names}, "specs": specs, "note": note}
    if tensors == "all":
        out["partial"] = partial
    if objects:
        try:
            from jax.sharding import PartitionSpec
        except ImportError as e:
            raise Error(f"to_jax(objects=True) needs jax ({e})") from None
        out["specs"] = {n: PartitionSpec(*[tuple(e) if isinstance(e, list) else e for e in s])
                        for n, s in specs.items()}
    return out


def to_mesh_tf(plan) -> dict:
    """Layout rules that reproduce the plan's parameters and inputs when passed back as
    ``at.plan(..., mesh=plan.mesh, layout=rules["layout"])``: ``{"mesh": {...}, "layout":
    {tensor: {dim: axis}}, "unexpressed": [tensors whose layout no rule gives]}``. A tensor
    is unexpressed when it is partial, when it splits two dimensions over one axis, or when
    it splits one dimension over only some of an axis's cuts. The result survives a JSON round
    trip (``json.loads(json.dumps(rules))``, dimensions then string keys) and is what
    ``autotile plan --mesh-tf FILE`` writes and ``--layout-file FILE`` reads."""
    mesh, axes = _mesh_of(plan)
    layout, unexpressed = {}, []
    for n in _exported_tensors(plan):
        by_axis: Dict[str, set] = {}
        for t, a in zip(plan.tensor_tilings[n], axes):
            by_axis.setdefault(a, set()).add(t)
        rule, ok = {}, True
        for a, kinds in by_axis.items():
            if kinds == {"replicate"}:
                continue
            if len(kinds) != 1 or not next(iter(kinds)).startswith("split("):
                ok = False
                break
            d = int(next(iter(kinds))[6:-1])
            if d in rule:
                ok = False  # one dimension over two axes: rules map a dimension to one axis
                break
            rule[d] = a
        if ok:  # as a rule key: the name, its pattern characters matched literally ([*])
            layout[re.sub(r"([*?[])", r"[\1]", n)] = rule
        else:
            unexpressed.append(n)
    return {"mesh": mesh, "layout": layout, "unexpressed": unexpressed}
