"""The Plan: the result of a partition search, readable by people and programs."""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Tuple

from ..errors import Error


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n:.0f} B"
        n /= 1000.0
    return f"{n:.1f} TB"


#: What each field of a plan holds, checked on load (a plan JSON may have been edited):
#: "int", "num", "str", "bool", "list[...]", "dict[...]" (by str key), "shape"; "?" allows null.
_FIELD_KINDS = {
    "algorithm": "str", "devices": "int", "factors": "list[int]", "cut_costs": "list[num]", "comm_bytes": "num",
    "search_seconds": "num", "tensor_tilings": "dict[list[str]]", "node_strategies": "dict[list[str]]",
    "tensor_shapes": "dict[shape]", "tensor_dtypes": "dict[str]", "node_ops": "dict[str]",
    "param_names": "list[str]", "weighted_cost": "num?", "bandwidths": "list[num]?", "model": "str",
    "batch": "int?", "num_groups": "int", "num_levels": "int", "optimizer": "str", "input_shapes": "dict[shape]",
    "mesh": "dict[int]", "cut_axes": "list[str]", "device_memory": "int?", "peak_memory": "int?",
    "memory_weight": "num", "swap_budget": "int?", "train": "bool", "cut_solvers": "list[str]",
    "optimality_gaps": "list[num?]", "declared_shapes": "dict[shape]?", "objective": "str", "hardware": "str?",
    "model_seconds": "num?", "cut_seconds": "list[num]", "cut_levels": "list[str]", "candidates": "dict[num?]?",
    "chosen": "str?", "skipped": "dict[str]?", "time_search_seconds": "num?", "selection_seconds": "num?",
    "candidate_search_seconds": "dict[num]?", "hierarchical_above": "int?", "stage_levels": "list[int]",
    "time_start": "str?",
}


def _is_kind(value, kind: str) -> bool:
    if kind.endswith("?"):
        return value is None or _is_kind(value, kind[:-1])
    if kind.startswith(("list[", "dict[")):
        inner = kind[5:-1]
        if kind.startswith("list["):
            return isinstance(value, list) and all(_is_kind(v, inner) for v in value)
        return isinstance(value, dict) and all(isinstance(k, str) and _is_kind(v, inner) for k, v in value.items())
    if kind == "shape":
        return isinstance(value, (tuple, list)) and all(_is_kind(d, "int") and d >= 0 for d in value)
    if kind == "num":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, {"int": int, "str": str, "bool": bool}[kind]) and (kind == "bool" or not isinstance(value, bool))


def _unique_keys(pairs) -> dict:
    """A JSON object as a dict; Error on a key given twice (json keeps the last one silently:
    a mesh {"batch": 2, "batch": 4} would lose an axis)."""
    out = {}
    for key, value in pairs:
        if key in out:
            raise Error(f"plan JSON: key '{key}' appears twice in one object")
        out[key] = value
    return out


@dataclass
class Plan:
    """A tiling for every tensor and a strategy for every op, per cut, and what it costs.

    - ``comm_bytes``: total bytes moved between devices in one training step (sum of cut_costs).
    - ``cut_costs``: bytes moved at each cut (δ_i, all groups of that step together).
    - ``tiling(name)``: e.g. ``"split(0) split(1) replicate"``, one basic tiling per cut.
    - ``strategy(node)``: the TDL variable split at each cut, e.g. ``"n o"``.
    """

    algorithm: str
    devices: int
    factors: List[int]
    cut_costs: List[float]
    comm_bytes: float
    search_seconds: float
    tensor_tilings: Dict[str, List[str]]
    node_strategies: Dict[str, List[str]]
    tensor_shapes: Dict[str, Tuple[int, ...]] = field(default_factory=dict)
    tensor_dtypes: Dict[str, str] = field(default_factory=dict)
    node_ops: Dict[str, str] = field(default_factory=dict)
    param_names: List[str] = field(default_factory=list)
    weighted_cost: Optional[float] = None
    bandwidths: Optional[List[float]] = None
    model: str = ""
    batch: Optional[int] = None
    num_groups: int = 0
    num_levels: int = 0
    optimizer: str = "sgd"
    #: input shapes the plan was made for (data and label), needed to rebuild its graph
    input_shapes: Dict[str, Tuple[int, ...]] = field(default_factory=dict)
    #: the named mesh ({axis: size}; a plain device count is {"devices": k}) and the mesh
    #: axis of each cut (planner/layout_rules.py)
    mesh: Dict[str, int] = field(default_factory=dict)
    cut_axes: List[str] = field(default_factory=list)
    #: the per-device memory budget the plan was searched for (bytes), the largest per-device
    #: arena of its execution graph, and the memory weight the search used (planner/memory_fit.py)
    device_memory: Optional[int] = None
    peak_memory: Optional[int] = None
    memory_weight: float = 0.0
    #: when set, the execution graph swaps tensors to host memory to fit this many bytes per
    #: device (csrc/exec/swap_plan.h): no partition alone fits the budget
    swap_budget: Optional[int] = None
    #: False for a plan of the forward graph alone (inference: no backward, no update)
    train: bool = True
    #: how each cut was solved: "dp" (exact), "ilp" (the integer program: a graph too wide for
    #: the exact DP, or algorithm="ilp"), "bruteforce"; and each cut's relative optimality gap
    #: (0: proven optimal; > 0: the time limit stopped the integer program that far from its
    #: bound; None: not known)
    cut_solvers: List[str] = field(default_factory=list)
    optimality_gaps: List[Optional[float]] = field(default_factory=list)
    #: the input shapes the planned model itself declared, where they differ from
    #: input_shapes only by the batch= the plan was made for (None: a plan written before this
    #: field, not checked); transform accepts a model declaring either
    declared_shapes: Optional[Dict[str, Tuple[int, ...]]] = None
    #: what the search minimised: "bytes", or "time" (one device's step on the `hardware`
    #: profile; planner/time_objective.py). With "time": the searched plan's seconds in the
    #: search's model (model_seconds; per cut its communication, then the compute, in
    #: cut_seconds; the link level of each cut in cut_levels), each candidate's simulated step
    #: (candidates: "time", "bytes", baselines; None for one that could not be planned, the
    #: reason in skipped), the winner (chosen), and the seconds the time search and the
    #: choice took
    objective: str = "bytes"
    hardware: Optional[str] = None
    model_seconds: Optional[float] = None
    cut_seconds: List[float] = field(default_factory=list)
    cut_levels: List[str] = field(default_factory=list)
    candidates: Optional[Dict[str, Optional[float]]] = None
    chosen: Optional[str] = None
    skipped: Optional[Dict[str, str]] = None
    time_search_seconds: Optional[float] = None
    selection_seconds: Optional[float] = None
    candidate_search_seconds: Optional[Dict[str, float]] = None
    #: the collectives the returned plan's simulated step ran, which transform builds by
    #: default (None: flat; else hierarchical above this tile size, with one stage per level
    #: of stage_levels, the link level of each cut)
    hierarchical_above: Optional[int] = None
    stage_levels: List[int] = field(default_factory=list)
    #: where the time search's refinement started from to reach its plan: "recursion" (its own
    #: cuts), "bytes" (the bytes objective's plan, when that ends faster in the time model) or
    #: "recursion only" (a graph too large for the second start: time_objective.BYTES_START_LIMIT)
    time_start: Optional[str] = None

    # ------------------------------------------------------------------ queries
    def tiling(self, name: str) -> str:
        """The tiling of tensor `name` per cut, space separated."""
        if name not in self.tensor_tilings:
            raise Error(f"plan has no tensor named '{name}'")
        return " ".join(self.tensor_tilings[name])

    def strategy(self, node: str) -> str:
        """The partitioned TDL variable of node `node` per cut, space separated."""
        if node not in self.node_strategies:
            raise Error(f"plan has no node named '{node}'")
        return " ".join(self.node_strategies[node])

    def replicated_nodes(self) -> List[str]:
        """Nodes that run whole (replicated) in some cut: no strategy of theirs divides or is
        allowed there (a 3-channel BatchNorm on 2 devices; under data parallelism, an op that
        cannot split along the batch), or running whole moves less (a slice of a replicated
        weight, that weight's update and the gradient feeding it: csrc/search/cut_problem.cc)."""
        return [n for n, s in self.node_strategies.items() if "replicate" in s]

    def tile_shape(self, name: str) -> Tuple[int, ...]:
        """Shape of the tile one device holds of tensor `name`."""
        shape = list(self.tensor_shapes[name])
        for cut, t in zip(self.factors, self.tensor_tilings[name]):
            if t.startswith("split("):
                d = int(t[6:-1])
                shape[d] //= cut
        return tuple(shape)

    def validate(self) -> "Plan":
        """Check the plan against itself (a plan read from JSON may have been edited): a
        positive device count, cut factors >= 2 whose product is that count, one tiling per
        cut for every tensor, each ``replicate``, ``partial`` or ``split(d)`` with ``d`` a
        dimension of the tensor's shape. Raises Error naming the tensor or field at fault."""
        ok_int = lambda v: isinstance(v, int) and not isinstance(v, bool)  # noqa: E731
        for name, kind in _FIELD_KINDS.items():
            if not _is_kind(getattr(self, name), kind):
                raise Error(f"plan: field {name} must be {kind.replace('?', ' or null')}, "
                            f"got {str(getattr(self, name))[:60]!r}")
        if not ok_int(self.devices) or self.devices < 1:
            raise Error(f"plan: devices must be a positive integer, got {self.devices!r}")
        from .layout_rules import MAX_DEVICES

        if self.devices > MAX_DEVICES:
            raise Error(f"plan: devices must be at most {MAX_DEVICES}, got {self.devices}")
        if not isinstance(self.factors, list) or not all(ok_int(f) and f >= 2 for f in self.factors):
            raise Error(f"plan: factors must be a list of integers >= 2, got {self.factors!r}")
        product = 1
        for f in self.factors:
            product *= f
        if product != self.devices:
            raise Error(f"plan: factors {self.factors} multiply to {product}, not devices={self.devices}")
        for field_name in ("tensor_tilings", "node_strategies", "tensor_shapes"):
            if not isinstance(getattr(self, field_name), dict):
                raise Error(f"plan: {field_name} must be an object by name, got "
                            f"{type(getattr(self, field_name)).__name__}")
        for name, shape in self.tensor_shapes.items():
            if not all(ok_int(d) and d >= 0 for d in shape):
                raise Error(f"plan: tensor '{name}' has shape {list(shape)!r}, not a list of non-negative integers")
        cuts = len(self.factors)
        self._validate_costs(cuts)
        missing = next((n for n in self.tensor_tilings if n not in self.tensor_shapes), None)
        if missing is not None:  # tile_shape and the exports need every tiled tensor's shape
            raise Error(f"plan: tensor '{missing}' has tilings but no shape in tensor_shapes")
        for name, tilings in self.tensor_tilings.items():
            if not isinstance(tilings, list) or len(tilings) != cuts:
                raise Error(f"plan: tensor '{name}' has tilings {tilings!r}, expected a list of {cuts} (one per cut)")
            ndim = len(self.tensor_shapes[name]) if name in self.tensor_shapes else None
            for t in tilings:
                if t in ("replicate", "partial"):
                    continue
                dim = t[6:-1] if isinstance(t, str) and t.startswith("split(") and t.endswith(")") else ""
                if not dim.isdigit() or (ndim is not None and int(dim) >= ndim):
                    raise Error(f"plan: tensor '{name}' has tiling {t!r}, which is not replicate, partial or split(d) "
                                f"with d a dimension of its {ndim}-D shape")
        for name, strategies in self.node_strategies.items():
            if not isinstance(strategies, list) or len(strategies) != cuts or \
                    not all(isinstance(x, str) for x in strategies):
                raise Error(f"plan: node '{name}' has strategies {strategies!r}, expected {cuts} names (one per cut)")
        self._validate_mesh()
        for name in ("device_memory", "swap_budget"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise Error(f"plan: {name} must be a positive number of bytes or null, got {value!r}")
        if self.peak_memory is not None and self.peak_memory < 0:
            raise Error(f"plan: peak_memory must be a non-negative number of bytes or null, got {self.peak_memory!r}")
        if not math.isfinite(self.memory_weight) or self.memory_weight < 0:
            raise Error(f"plan: memory_weight must be a non-negative finite number, got {self.memory_weight!r}")
        return self

    def _validate_costs(self, cuts: int) -> None:
        """Costs and times are finite and non-negative (JSON reads NaN and Infinity), one cut
        cost per cut, comm_bytes their sum; bandwidths are positive."""
        def bad(v, positive=False):
            return v is not None and (not math.isfinite(v) or v < 0 or (positive and v == 0))

        for name in ("comm_bytes", "search_seconds", "weighted_cost"):
            if bad(getattr(self, name)):
                raise Error(f"plan: {name} must be a finite non-negative number, got {getattr(self, name)!r}")
        for name, positive in (("cut_costs", False), ("optimality_gaps", False), ("bandwidths", True)):
            value = next((v for v in getattr(self, name) or [] if bad(v, positive)), None)
            if value is not None:
                raise Error(f"plan: {name} holds {value!r}, not a finite {'positive' if positive else 'non-negative'} "
                            "number")
        if len(self.cut_costs) != cuts:
            raise Error(f"plan: cut_costs {self.cut_costs} has {len(self.cut_costs)} entries, expected one per cut "
                        f"({cuts} cuts)")
        if not math.isclose(self.comm_bytes, math.fsum(self.cut_costs), rel_tol=1e-9, abs_tol=1.0):
            raise Error(f"plan: comm_bytes={self.comm_bytes!r} is not the sum of cut_costs {self.cut_costs} "
                        f"({math.fsum(self.cut_costs)!r})")

    def _validate_mesh(self) -> None:
        """The mesh's sizes multiply to devices, cut_axes has one mesh axis per cut, and each
        axis's cut factors multiply to its size (an empty mesh and cut_axes: the plain
        {"devices": k} of plans written before meshes)."""
        if not self.mesh and not self.cut_axes:
            return
        if not self.mesh:
            raise Error(f"plan: cut_axes {self.cut_axes} name mesh axes, but the plan has no mesh")
        from .layout_rules import check_axis_names

        check_axis_names(self.mesh, "plan: mesh")
        bad = next((a for a, k in self.mesh.items() if k < 1), None)
        if bad is not None:
            raise Error(f"plan: mesh axis '{bad}' has size {self.mesh[bad]}, not a positive integer")
        size = math.prod(self.mesh.values())
        if size != self.devices:
            raise Error(f"plan: mesh {self.mesh} has {size} devices, not devices={self.devices}")
        if len(self.cut_axes) != len(self.factors):
            raise Error(f"plan: cut_axes {self.cut_axes} has {len(self.cut_axes)} entries, expected one mesh axis "
                        f"per cut ({len(self.factors)} cuts)")
        unknown = [a for a in self.cut_axes if a not in self.mesh]
        if unknown:
            raise Error(f"plan: cut_axes names '{unknown[0]}', which is not an axis of the mesh "
                        f"({', '.join(self.mesh)})")
        for axis, k in self.mesh.items():
            cut = math.prod(f for f, a in zip(self.factors, self.cut_axes) if a == axis)
            if cut != k:
                raise Error(f"plan: the cuts of mesh axis '{axis}' multiply to {cut}, not its size {k}")

    # ------------------------------------------------------------------ reports
    def summary(self, max_rows: int = 40) -> str:
        """A table a person can read: cut costs, then the parameters' tilings."""
        lines = [f"plan: {self.model or 'model'}  algorithm={self.algorithm}  devices={self.devices} "
                 f"(cuts {' x '.join(map(str, self.factors)) or '-'})" + (f"  batch={self.batch}" if self.batch else "")
                 + ("" if self.train else "  inference")
                 + (f"  mesh {' x '.join(f'{a}={n}' for a, n in self.mesh.items())} (cut axes: "
                    f"{' '.join(self.cut_axes)})" if self.mesh and list(self.mesh) != ["devices"] else ""),
                 f"communication per step: {_fmt_bytes(self.comm_bytes)}   search: {self.search_seconds * 1000:.1f} ms"
                 + (f"   coarsened groups: {self.num_groups}, levels: {self.num_levels}" if self.num_groups else "")]
        if self.peak_memory is not None:
            lines.append(f"per-device memory peak: {_fmt_bytes(self.peak_memory)}"
                         + (f" (budget {_fmt_bytes(self.device_memory)}"
                            + (f", memory weight {self.memory_weight:g}" if self.memory_weight else "")
                            + (", tensors swapped to host memory)" if self.swap_budget else ")")
                            if self.device_memory else ""))
        if self.candidates:
            shown = ", ".join(f"{n} {'n/a' if v is None else f'{v * 1e3:.3f} ms'}" for n, v in self.candidates.items())
            lines.append(f"objective: time on {self.hardware}: chose '{self.chosen}' by simulated step ({shown})"
                         + (", collectives one stage per link level" if self.hierarchical_above is not None else ""))
        for i, (k, c) in enumerate(zip(self.factors, self.cut_costs)):
            lines.append(f"  cut {i + 1} ({k}-way): {_fmt_bytes(c)}"
                         + (f" over {self.cut_levels[i]}" if i < len(self.cut_levels) else ""))
        wide = [i for i, s in enumerate(self.cut_solvers) if s == "ilp"] if self.algorithm != "ilp" else []
        if wide:
            gaps = [self.optimality_gaps[i] if i < len(self.optimality_gaps) else None for i in wide]
            worst = max((g for g in gaps if g is not None), default=None)
            lines.append(f"  cut{'s' if len(wide) > 1 else ''} {', '.join(str(i + 1) for i in wide)}: too wide for "
                         "the exact DP, solved by the integer program: "
                         + ("optimal" if worst == 0 else "optimality gap unknown" if worst is None
                            else f"within {100 * worst:.2f}% of the optimum (time limit)"))
        replicated = self.replicated_nodes()
        if replicated:
            shown = ", ".join(f"{n} ({self.node_ops.get(n, '?')})" for n in replicated[:8])
            lines.append(f"  replicated ops (no split allowed in some cut): {len(replicated)}: {shown}"
                         + (" ..." if len(replicated) > 8 else ""))
        names = [n for n in self.param_names if n in self.tensor_tilings]
        if names:
            lines.append("")
            width = max(len(n) for n in names[:max_rows])
            lines.append(f"  {'parameter'.ljust(width)}  {'shape':<22} tiling per cut")
            for n in names[:max_rows]:
                lines.append(f"  {n.ljust(width)}  {str(self.tensor_shapes.get(n, '')):<22} {self.tiling(n)}")
            if len(names) > max_rows:
                lines.append(f"  ... {len(names) - max_rows} more")
        return "\n".join(lines)

    def __str__(self):
        return self.summary()

    def to_json(self) -> str:
        doc = asdict(self)
        doc["tensor_shapes"] = {k: list(v) for k, v in self.tensor_shapes.items()}
        doc["input_shapes"] = {k: list(v) for k, v in self.input_shapes.items()}
        if self.declared_shapes is not None:
            doc["declared_shapes"] = {k: list(v) for k, v in self.declared_shapes.items()}
        doc["format"] = "autotile-plan-1"
        return json.dumps(doc, indent=1)

    @classmethod
    def from_json(cls, text: str) -> "Plan":
        """The plan of :meth:`to_json`'s text, checked against itself (:meth:`validate`)."""
        if not isinstance(text, (str, bytes, bytearray)):
            raise Error(f"Plan.from_json needs the JSON text (str), got {type(text).__name__}")
        try:
            doc = json.loads(text, object_pairs_hook=_unique_keys)
        except json.JSONDecodeError as e:
            raise Error(f"plan JSON is not valid JSON: {e}") from None
        except RecursionError:  # the decoder recurses once per nesting level
            raise Error("plan JSON is nested too deeply (a plan is a flat object)") from None
        if not isinstance(doc, dict) or doc.pop("format", None) != "autotile-plan-1":
            raise Error("not an autotile plan (missing format 'autotile-plan-1')")
        for key in ("tensor_shapes", "input_shapes", "declared_shapes"):
            if key == "declared_shapes" and doc.get(key) is None:
                continue
            shapes = doc.get(key, {})
            if not isinstance(shapes, dict):
                raise Error(f"plan JSON: {key} must be an object of shape lists, got {type(shapes).__name__}")
            bad = next((k for k, v in shapes.items() if not isinstance(v, list)), None)
            if bad is not None:
                raise Error(f"plan JSON: {key}['{bad}'] must be a list of dims, got {shapes[bad]!r}")
            doc[key] = {k: tuple(v) for k, v in shapes.items()}
        try:
            plan = cls(**doc)
        except TypeError as e:
            raise Error(f"plan JSON has unexpected fields: {e}") from None
        return plan.validate()

    # ------------------------------------------------------------------ exports
    def to_dtensor(self, granularity: Optional[str] = None, objects: bool = False, tensors: str = "io") -> dict:
        """PyTorch DTensor mesh and placements of every parameter and input, or with
        ``tensors="all"`` of every tensor of the training graph (planner/export.py)."""
        from .export import to_dtensor

        return to_dtensor(self, granularity, objects, tensors)

    def to_jax(self, granularity: Optional[str] = None, objects: bool = False, tensors: str = "io") -> dict:
        """JAX mesh and PartitionSpecs of every parameter and input, or with ``tensors="all"``
        of every tensor of the training graph (planner/export.py)."""
        from .export import to_jax

        return to_jax(self, granularity, objects, tensors)

    def to_mesh_tf(self) -> dict:
        """Layout rules that reproduce the plan where rules can (planner/export.py)."""
        from .export import to_mesh_tf

        return to_mesh_tf(self)

    def draw(self, path: str, tensors: Optional[List[str]] = None, max_tensors: int = 12) -> str:
        """Picture of the tile each device owns for weights and activations (Tofu Fig. 11)."""
        from .draw import draw_plan

        return draw_plan(self, path, tensors, max_tensors)
