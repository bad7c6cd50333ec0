"""``autotile.plan``: find how to tile every tensor of a model's training graph."""
from __future__ import annotations

import numbers
import os
import time
from typing import Dict, Optional, Sequence

import numpy as np

from ..errors import Error
from ..model_input import as_symbol
from ..ops.registry import _parse_shape
from .plan import Plan

#: Every algorithm name the planner accepts (the C++ core implements them; see csrc/search).
ALGORITHMS = ("tofu", "soybean", "data", "model", "owt", "hypar", "spartan", "allrow", "equalchop", "icml18",
              "bruteforce", "ilp")


def declared_batch_dim(node):
    """The batch dim a data input declares (its ``__batch_dim__`` attribute, e.g.
    ``Variable("data", shape=(steps, batch), batch_dim=1)``; "none" for an input without one,
    e.g. an RNN's step-major labels), 0 when it declares none."""
    text = node.attrs.get("__batch_dim__") if node is not None else None
    if text is None:
        return 0
    if str(text).strip().lower() in ("none", "-1", ""):
        return None
    try:
        dim = int(text)
    except ValueError:
        dim = -1
    if dim < 0:
        raise Error(f"input '{node.name}': __batch_dim__ must be a dim (0, 1, ...) or 'none', got {text!r}")
    return dim


def data_shapes(sym, shapes: Optional[Dict[str, tuple]], batch: Optional[int], data_names: Sequence[str],
                override_batch: bool = True):
    """Shapes of the data inputs: as given, else their declared shapes, with the batch dim
    (:func:`declared_batch_dim`, dim 0 unless the input declares another) set to `batch` when
    `override_batch` (a Symbol the caller built; zoo models and ONNX files are already built
    for the batch)."""
    from ..symbol.infer import _declared_shape

    by_name = {n.name: n for n in sym.topo_nodes() if n.is_variable}
    result = {}
    for name in data_names:
        node = by_name.get(name)
        declared = _declared_shape(node) if node is not None else None
        bd = declared_batch_dim(node)
        if shapes and name in shapes:
            shape = tuple(int(d) for d in shapes[name])
            if batch is not None and bd is not None and len(shape) > bd and shape[bd] != batch:
                raise Error(f"batch={batch} contradicts the shape {shape} given for input '{name}'")
        elif declared is not None:
            shape = tuple(declared)
            if batch is not None and override_batch and bd is not None:
                if bd >= len(shape):
                    raise Error(f"input '{name}' of shape {shape} has no batch dim {bd} to set to batch={batch}")
                shape = shape[:bd] + (batch,) + shape[bd + 1:]
        elif batch is not None and override_batch and bd == 0 and _unknown_batch_only(node):
            # declared as MXNet writes an unknown batch, e.g. (0, 784): `batch` completes it
            shape = (batch,) + tuple(_parse_shape(by_name[name].attrs["__shape__"])[1:])
        else:
            zero = _zero_dim(_declared_text_shape(node))
            if zero is not None:
                raise _zero_dim_error(name, _declared_text_shape(node), zero, declared=True)
            raise Error(f"the shape of input '{name}' is unknown: pass shapes={{'{name}': (...)}}")
        result[name] = shape
    for name in (shapes or {}):
        if name not in result:
            if name not in by_name:
                raise Error(f"shapes names '{name}', which is not an input of the model")
            result[name] = tuple(shapes[name])
    return result


def data_batch_dims(sym, data_names: Sequence[str], in_shapes: Dict[str, tuple],
                    batch: Optional[int] = None) -> Dict[str, int]:
    """The dim each data input binds the batch to, where data parallelism splits it: the
    declared batch dim (:func:`declared_batch_dim`) of every data input whose size there is the
    batch (`batch`, else the size most data inputs have there; on a tie that of the largest
    input, whose batch the labels follow). Inputs without one (a (1, seq) position input,
    step-major labels) are left out."""
    by_name = {n.name: n for n in sym.topo_nodes() if n.is_variable}
    dims = {}
    for name in data_names:
        shape = in_shapes.get(name)
        bd = declared_batch_dim(by_name.get(name))
        if shape is not None and bd is not None and bd < len(shape):
            dims[name] = bd
        elif shape is not None and bd is not None and name in by_name and "__batch_dim__" in by_name[name].attrs:
            raise Error(f"input '{name}' of shape {tuple(shape)} has no batch dim {bd}")
    if batch is None:
        counts: Dict[int, list] = {}
        for name, d in dims.items():
            entry = counts.setdefault(in_shapes[name][d], [0, 0])
            entry[0] += 1
            entry[1] = max(entry[1], int(np.prod(in_shapes[name])))
        batch = max(counts, key=lambda size: tuple(counts[size])) if counts else None
    return {name: d for name, d in dims.items() if in_shapes[name][d] == batch}


def _unknown_batch_only(node) -> bool:
    """True for a variable declared with only its dim 0 unknown (0), e.g. (0, 784) or (0,)."""
    text = node.attrs.get("__shape__") if node is not None else None
    if not text:
        return False
    try:
        shape = _parse_shape(text)
    except ValueError:
        return False
    return len(shape) >= 1 and shape[0] in (0, None) and all(d is not None and d > 0 for d in shape[1:])


def _declared_text_shape(node) -> Optional[tuple]:
    """The shape a Variable's ``__shape__`` attribute writes, 0s and Nones included."""
    text = node.attrs.get("__shape__") if node is not None else None
    try:
        return _parse_shape(text) if text else None
    except ValueError:
        return None


def _zero_dim(shape) -> Optional[int]:
    """The first dim of `shape` of size 0, or None."""
    return next((k for k, d in enumerate(shape or ()) if d == 0), None)


def _zero_dim_error(name: str, shape: tuple, dim: int, declared: bool) -> Error:
    if declared:  # MXNet's spelling of an unknown dim, which nothing here sized
        return Error(f"the shape of input '{name}' is unknown: it declares dimension {dim} of size 0 (shape "
                     f"{tuple(shape)}) and nothing gives it a size; pass shapes={{'{name}': (...)}} (or batch= "
                     f"for a data input's batch dim)")
    return Error(f"input '{name}' has dimension {dim} of size 0 (shape {tuple(shape)}): autotile plans no "
                 f"empty tensors; give it a positive size (shapes=, or a non-empty array)")


def check_input_dims(sym, in_shapes: Dict[str, tuple], known: Optional[dict] = None) -> None:
    """Refuse an input with a 0-sized dim: given so (`in_shapes`: shapes=, a fed array), or
    declared so (``Variable(shape=(0, 5))``) when nothing (`known`: inferred shapes) sized it.
    Planning an empty tensor has no tiles; an unsized one used to surface as a KeyError of the
    head-gradient shapes (a parameter ``x`` is not given a batch) or as the core's add_tensor."""
    for node in sym.topo_nodes():
        if not node.is_variable:
            continue
        if node.name in in_shapes:
            shape, declared = tuple(in_shapes[node.name]), False
        elif known is not None and (id(node), 0) not in known:
            shape, declared = _declared_text_shape(node), True
        else:
            continue
        dim = _zero_dim(shape)
        if dim is not None:
            raise _zero_dim_error(node.name, shape, dim, declared)


def declared_input_shapes(sym, in_shapes) -> Dict[str, tuple]:
    """The shapes `sym`'s inputs declare where `in_shapes` (what a plan is made for) differ
    from them: the model a plan overrode the batch of (``at.plan(sym, batch=B)``)."""
    from ..symbol.infer import _declared_shape

    out = {}
    for node in sym.topo_nodes():
        declared = _declared_shape(node) if node.is_variable and node.name in in_shapes else None
        if declared is not None and tuple(declared) != tuple(in_shapes[node.name]):
            out[node.name] = tuple(declared)
    return out


def with_head_grads(tg, shapes: Dict[str, tuple]) -> Dict[str, tuple]:
    """`shapes` plus the shapes of the training graph's head-gradient inputs (those of the
    non-loss outputs they belong to)."""
    if not tg.head_grad_names:
        return shapes
    from ..symbol.infer import infer_entry_shapes

    known = infer_entry_shapes(tg.forward, {k: v for k, v in shapes.items() if k in set(tg.forward.list_inputs())})
    by_output = dict(zip(tg.output_names, tg.forward.entries))
    result = dict(shapes)
    for head, out in tg.head_grad_of.items():
        node, i = by_output[out]
        if (id(node), i) not in known:  # an input nothing gives a shape, e.g. a parameter's
            raise Error(f"the shape of output '{out}' is unknown (an input of node '{node.name}' has no shape): "
                        f"pass shapes= for the model's inputs")
        result[head] = known[(id(node), i)]
    return result


def lowered_training_graph(model, shapes=None, batch=None, optimizer: str = "sgd",
                           replicate_fallback: bool = False, train: bool = True):
    """What the search runs on: (Symbol, TrainingGraph, input shapes, LoweredGraph) of
    `model`'s training step at the given shapes (or batch); with ``train=False`` of its
    forward graph alone (:func:`autotile.autodiff.inference_graph`)."""
    from ..autodiff import inference_graph, training_graph
    from ..autodiff.graph import default_data_names
    from .lower import lower

    sym = as_symbol(model, batch=batch)
    names = default_data_names(sym)
    in_shapes = data_shapes(sym, shapes, batch, names, override_batch=not isinstance(model, (str, os.PathLike)))
    from ..symbol.infer import infer_entry_shapes

    check_input_dims(sym, in_shapes)
    # The whole forward graph's shapes first: an op whose attributes are wrong (a 5-D kernel, a
    # zero stride) is then named itself, not a later op whose gradient lacks its input's shape.
    given = {k: v for k, v in in_shapes.items() if k in set(sym.list_inputs())}
    try:
        known = infer_entry_shapes(sym, given)
    except Error:  # an op short of a shape: name the input declared with a 0 dim, if one is why
        check_input_dims(sym, {}, infer_entry_shapes(sym, given, partial=True))
        raise
    check_input_dims(sym, {}, known)
    # Shapes let gradient functions fix divisors from whole tensors (a tile must still divide
    # by the whole batch) and record them on the training graph's new inputs.
    tg = training_graph(sym, optimizer=optimizer, shapes=in_shapes) if train else inference_graph(sym)
    in_shapes = with_head_grads(tg, in_shapes)
    lowered = lower(tg.symbol, in_shapes, tg.param_names, tg.backward_of, tg.update_nodes,
                    {g: f for f, g in tg.gradient_entry.items()}, replicate_fallback=replicate_fallback)
    return sym, tg, in_shapes, lowered


def _as_int(value):
    """A NumPy integer as a Python int; anything else unchanged (checked by the caller)."""
    return int(value) if isinstance(value, numbers.Integral) and not isinstance(value, bool) else value


def plan(model, devices: Optional[int] = None, shapes: Optional[Dict[str, tuple]] = None,
         batch: Optional[int] = None, algorithm: str = "tofu", bandwidths: Optional[Sequence[float]] = None,
         optimizer: str = "sgd", replicate_fallback: bool = False, mesh=None, layout=None,
         device_memory=None, train: bool = True, refine: bool = True, objective: str = "bytes", hardware=None,
         candidates: Optional[Sequence[str]] = None) -> Plan:
    """Plan the training step of `model` (Symbol, model path or zoo name) on `devices` devices
    (with ``train=False``, its forward graph alone: partitioned inference).

    `shapes` gives input shapes by name; otherwise `batch` sets the batch dim of every data
    input's declared shape (dim 0, or the dim a Variable declares with ``batch_dim=``).
    ``algorithm="data"`` splits each data input along that dim and carries it through the
    graph (csrc/search/baselines/data.h); a graph whose batch no op can split is an Error. `bandwidths` (one per cut, bytes/s, slowest link first; with a
    mesh, a dict by axis name or a list in cut order) weights each cut's cost for
    hierarchical machines. `mesh` ({"batch": 4, "model": 8}, or the CLI
    form "batch=4,model=8") names the device axes instead of `devices`; `layout` fixes some
    tensors' layouts, {tensor name or pattern: {dim: mesh axis}} (see
    :mod:`autotile.planner.layout_rules`), and the search completes the rest (tofu,
    bruteforce and data honour it). `device_memory` (bytes, or "16GiB") is a per-device budget:
    the search returns the cheapest plan whose memory plan fits it, trading communication for
    memory when the cheapest plan does not fit (:mod:`autotile.planner.memory_fit`).
    `refine` (tofu): improve the recursive plan across its cuts afterwards
    (csrc/search/cut_refine.h; not with bandwidths or a memory budget's weighted searches);
    False keeps the recursion's plan, whose cut costs never decrease (Tofu App. A).
    `objective` "bytes" (default) minimises bytes moved; "time" minimises one device's step
    time on the `hardware` profile (a shipped name such as "dgx-h100", a JSON path or a dict):
    each cut pays its link level's bandwidth and latency and the compute each device does,
    then the time plan, the bytes plan and the applicable baselines (`candidates`: a subset
    of "bytes", "data", "owt", "megatron") are simulated on the profile and the fastest is
    returned, each candidate's simulated step in ``plan.candidates`` and the winner in
    ``plan.chosen`` (:mod:`autotile.planner.time_objective`; docs/time-objective.md).
    Returns a :class:`Plan`."""
    from .. import _core
    from ..arguments import check_bandwidths, check_flag, check_shapes
    from . import layout_rules

    shapes, bandwidths = check_shapes(shapes), check_bandwidths(bandwidths)
    refine, train = check_flag(refine, "refine"), check_flag(train, "train")  # "no" is truthy
    replicate_fallback = check_flag(replicate_fallback, "replicate_fallback")
    mesh_axes, mesh_arg = None, mesh
    if mesh is not None:
        mesh = layout_rules.check_mesh(mesh)
        size = 1
        for v in mesh.values():
            size *= v
        if devices is not None and devices != size:
            raise Error(f"devices={devices!r} but the mesh {mesh} has {size} devices (give one or the other)")
        devices = size
    if devices is None:
        raise Error("plan needs devices= (a device count) or mesh= (named axes)")
    devices, batch = _as_int(devices), _as_int(batch)  # NumPy integers are counts too
    if not isinstance(devices, int) or isinstance(devices, bool) or devices < 1:
        raise Error(f"devices must be a positive integer, got {devices!r}")
    if devices > layout_rules.MAX_DEVICES:  # before building the graph and factoring the count
        raise Error(f"devices must be at most {layout_rules.MAX_DEVICES}, got {devices}")
    if algorithm not in ALGORITHMS:
        raise Error(f"unknown algorithm '{algorithm}' (choose from {', '.join(ALGORITHMS)})")
    if batch is not None and (not isinstance(batch, int) or isinstance(batch, bool) or batch < 1):
        raise Error(f"batch must be a positive integer, got {batch!r}")
    if device_memory is not None:  # a bad budget is refused before the graph is built
        from .memory_fit import parse_bytes

        device_memory = parse_bytes(device_memory)
    from . import time_objective

    hw = time_objective.check(objective, hardware, algorithm, device_memory, bandwidths)
    if hw is not None:
        hw.check_fits(devices)
    t0 = time.perf_counter()
    sym, tg, in_shapes, lowered = lowered_training_graph(model, shapes, batch, optimizer, replicate_fallback, train)
    lower_seconds = time.perf_counter() - t0
    factors, pins = None, None
    if isinstance(bandwidths, dict) and mesh is None:
        raise Error("bandwidths by axis name need mesh= (give bandwidths as a list, one per cut, otherwise)")
    if mesh is not None or layout is not None:
        mesh = mesh or {layout_rules.DEFAULT_AXIS: devices}
        factors, mesh_axes = layout_rules.mesh_cuts(mesh)
        if isinstance(bandwidths, dict):
            bandwidths = layout_rules.cut_bandwidths(bandwidths, mesh, mesh_axes)
        if layout is not None:
            if isinstance(layout, (list, tuple)):  # Mesh-TF's form over declared dimension names
                layout = layout_rules.named_dim_rules(sym, layout, mesh)
            pins, _ = layout_rules.pin_table(layout, lowered.tensor_names, lowered.tensor_shapes, mesh, mesh_axes)
    # Data parallelism runs the ops that cannot split along the batch replicated (an unrolled
    # RNN's Concat of its timesteps, a BatchNorm of 3 channels on 2 devices), as users of data
    # parallelism expect; Plan.replicated_nodes() and the summary name them.
    fallback = replicate_fallback or algorithm == "data"
    # Where the batch is: the data baselines split it there and carry it through the graph.
    batch_dims = [-1] * len(lowered.tensor_names)
    tensor_id = {name: i for i, name in enumerate(lowered.tensor_names)}
    for name, d in data_batch_dims(sym, tg.data_names, in_shapes, batch).items():
        if name in tensor_id:
            batch_dims[tensor_id[name]] = d
    # A cut too wide for the exact DP (DenseNet's dense blocks) goes to the integer program
    # with a time limit; `wide` collects its stats (cut, gap) for the plan.
    from . import ilp

    wide: list = []
    wide_solver = ilp.wide_fallback(wide) if algorithm not in ("ilp", "bruteforce") else None
    timing = None
    if objective == "time":
        timing = time_objective.time_model(hw, lowered, factors or _core.factorize(devices))

    def search(memory_weight=0.0):
        wide.clear()
        try:
            raw = _core.plan_graph(lowered.core, devices, algorithm, list(bandwidths) if bandwidths else None,
                                   fallback, factors=factors, pinned=pins, memory_weight=memory_weight,
                                   cut_solver=wide_solver, refine=bool(refine), batch_dims=batch_dims,
                                   time_model=timing)
            raw["wide_cuts"] = list(wide)  # the budget search may keep a plan other than its last
            return raw
        except Error as e:
            if "too wide for the exact search" in str(e) and wide_solver is None:
                raise Error(f"{e} (install SciPy, autotile[ilp], to solve such cuts with the integer program)") from None
            raise

    peak, weight = None, 0.0
    if device_memory is not None:
        from . import memory_fit

        if algorithm in ("tofu", "ilp", "data", "bruteforce"):
            raw, peak, weight, _ = memory_fit.fit(search, lowered, devices, device_memory)
        else:  # the layer-wise baselines fix their own layouts: only check them
            raw = search()
            peak = memory_fit.peak_bytes(lowered, raw)
            if peak > device_memory:
                raise Error(f"the {algorithm} plan needs {peak} bytes on some device, more than "
                            f"device_memory={device_memory} bytes (tofu can trade communication for memory)")
    else:
        raw = search()
    if timing is not None and pins is None and algorithm == "tofu":
        raw = time_objective.start_from_bytes(lowered.core, devices, raw, timing, replicate_fallback=fallback,
                                              factors=factors, refine=bool(refine), batch_dims=batch_dims,
                                              cut_solver=wide_solver)
    names = lowered.tensor_names
    result = Plan(
        algorithm=algorithm, devices=devices, factors=list(raw["factors"]), cut_costs=list(raw["cut_costs"]),
        comm_bytes=float(raw["total_bytes"]), search_seconds=float(raw["search_seconds"]),
        tensor_tilings={names[i]: list(t) for i, t in enumerate(raw["tensor_tilings"])},
        node_strategies={lowered.node_names[i]: list(s) for i, s in enumerate(raw["node_strategies"])},
        tensor_shapes=dict(zip(names, lowered.tensor_shapes)), tensor_dtypes=dict(zip(names, lowered.tensor_dtypes)),
        node_ops=dict(zip(lowered.node_names, lowered.node_ops)), param_names=list(tg.param_names),
        weighted_cost=raw.get("weighted_cost"), bandwidths=list(bandwidths) if bandwidths else None,
        model=model if isinstance(model, str) else (sym.name or ""),
        batch=batch if batch is not None else (next(iter(in_shapes.values()))[0] if in_shapes else None),
        num_groups=int(raw.get("num_groups", 0)), num_levels=int(raw.get("num_levels", 0)),
        optimizer=optimizer if train else "", input_shapes=in_shapes, train=train)
    result.declared_shapes = declared_input_shapes(sym, in_shapes)
    result.lower_seconds = lower_seconds  # not part of the JSON form: how long building the graph took
    result.device_memory, result.peak_memory, result.memory_weight = device_memory, peak, weight
    result.swap_budget = raw.get("swap_budget")
    by_cut = {w["cut"]: w for w in raw["wide_cuts"]}
    result.cut_solvers = ["ilp" if i in by_cut or algorithm == "ilp" else ("bruteforce" if algorithm == "bruteforce"
                          else "dp") for i in range(len(result.factors))]
    result.optimality_gaps = [float(by_cut[i]["gap"]) if i in by_cut else (None if algorithm == "ilp" else 0.0)
                              for i in range(len(result.factors))]
    result.mesh = dict(mesh) if mesh is not None else {layout_rules.DEFAULT_AXIS: devices}
    result.cut_axes = list(mesh_axes) if mesh_axes else [layout_rules.DEFAULT_AXIS] * len(result.factors)
    if hw is not None:
        result.hardware = hw.name
    if timing is not None:
        result.objective, result.model_seconds = "time", raw["model_seconds"]
        result.cut_seconds, result.cut_levels = list(raw["cut_seconds"]), list(timing["levels"])
        result.time_start = raw.get("start")

        def replan(**kw):
            base = dict(devices=devices, shapes=shapes, batch=batch, optimizer=optimizer,
                        replicate_fallback=replicate_fallback, mesh=mesh_arg, layout=layout, train=train,
                        refine=refine, hardware=hw)
            base.update(kw)
            return plan(sym if not isinstance(model, (str, os.PathLike)) else model, **base)

        result = time_objective.choose(result, sym, hw, replan, None if candidates is None else list(candidates))
    elif candidates is not None:
        raise Error("candidates= is for objective='time' (the plans its choice simulates)")
    return result


__all__ = ["ALGORITHMS", "Plan", "plan"]
