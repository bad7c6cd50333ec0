"""ExecGraph: the per-device execution graph of a planned training step, built by the C++
core (csrc/exec), with its static memory plan."""
from __future__ import annotations

import json
from collections.abc import Sequence
from typing import List, Optional

from .. import _core
from ..errors import Error
from ..model_input import as_symbol
from ..planner.lower import LoweredGraph, lower


class _Lazy(Sequence):
    """Ops or buffers of the core graph as dicts, each built on first access and kept: a
    4096-device graph has millions of MultiFetch pieces, and building every dict up front
    took three times the memory of the C++ graph itself."""

    def __init__(self, get, n: int):
        self._get = get
        self._items = [None] * n

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self):
        # each item in order, built where it is first reached (Sequence's default calls
        # __getitem__ per item: about 3 times slower)
        items, get = self._items, self._get
        for i, item in enumerate(items):
            if item is None:
                item = items[i] = get(i)
            yield item

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        item = self._items[i]
        if item is None:
            item = self._items[i] = self._get(i % len(self._items))
        return item


class ExecGraph:
    """Per-device sub-operators, MultiFetch ops, control dependencies and memory plan."""

    def __init__(self, core: "_core.ExecGraph", lowered: LoweredGraph, training, plan):
        self.core = core
        self.lowered = lowered
        self.training = training
        self.plan = plan
        self.devices = core.devices
        self._ops = _Lazy(core.op, core.num_ops)
        self._buffers = _Lazy(core.buffer, core.num_buffers)
        nodes = [lowered.core.node(i) for i in range(lowered.core.num_nodes)]
        #: per core node id: the tensor ids it reads and writes
        self.core_tensor_inputs = [n["inputs"] for n in nodes]
        self.core_tensor_outputs = [n["outputs"] for n in nodes]
        self.tensor_id = {n: i for i, n in enumerate(lowered.tensor_names)}

    # ------------------------------------------------------------------ queries
    @property
    def ops(self) -> Sequence:
        return self._ops

    @property
    def buffers(self) -> Sequence:
        return self._buffers

    def schedule(self, device: int) -> List[int]:
        """Op ids of `device` in execution order."""
        return self.core.schedule(device)

    def device_nodes(self, device: int) -> List[str]:
        """Names of the ops `device` runs, in order (fetches named after their node)."""
        names = []
        for i in self.schedule(device):
            op = self._ops[i]
            node = self.lowered.node_names[op["node"]] if op["node"] >= 0 else "?"
            names.append(node if op["kind"] == "compute" else f"fetch:{node}:{i}")
        return names

    def peak_memory(self, device: int) -> int:
        """Bytes of `device`'s arena under the static memory plan."""
        if not 0 <= device < self.devices:
            raise Error(f"device {device} out of range (0..{self.devices - 1})")
        return self.core.arena_bytes[device]

    def stats(self) -> dict:
        """Bytes moved between devices (total and received per device), ops and memory."""
        compute, fetch, reductions, pieces, deps = self.core.op_counts()
        return {
            "bytes": int(self.core.bytes_moved),
            "bytes_per_device": [int(b) for b in self.core.bytes_received],
            "compute_ops": compute,
            "fetch_ops": fetch,
            "reductions": reductions,
            "pieces": pieces,
            "dependencies": deps,
            "peak_memory": [int(b) for b in self.core.arena_bytes],
            "live_peak_memory": [int(b) for b in self.core.live_peak_bytes],
        }

    def to_json(self) -> str:
        """MXNet-style JSON: one node per op with a device attribute (loadable with from_json)."""
        names = self.lowered.node_names
        tnames = self.lowered.tensor_names
        nodes = []
        for i, op in enumerate(self._ops):
            entry = {"op": op["node"] >= 0 and ("_MultiFetch" if op["kind"] == "fetch" else
                                                 self.lowered.node_ops[op["node"]]) or "?",
                     "name": f"{names[op['node']]}@{op['device']}" + ("" if op["kind"] == "compute" else f"#fetch{i}"),
                     "attrs": {"__device__": str(op["device"]), "__ctx_group__": f"dev{op['device']}",
                               "bytes_moved": str(op["bytes_moved"])},
                     "inputs": [[d, 0, 0] for d in op["deps"]]}
            if op["kind"] == "fetch":
                entry["attrs"]["accumulate"] = str(op["accumulate"])
                entry["attrs"]["pieces"] = json.dumps(
                    [[p[0], self._buffers[p[0]]["device"], list(p[1]), list(p[2])] for p in op["pieces"]])
            entry["attrs"]["outputs"] = json.dumps(
                [[b, tnames[self._buffers[b]["tensor"]], list(self._buffers[b]["lo"]), list(self._buffers[b]["hi"]),
                  self._buffers[b]["offset"]] for b in op["outputs"]])
            nodes.append(entry)
        doc = {"nodes": nodes, "arg_nodes": [], "heads": [],
               "attrs": {"autotile_exec": ["int", 1], "devices": ["int", self.devices],
                         "factors": ["list", self.core.factors], "stats": ["dict", self.stats()]}}
        return json.dumps(doc, indent=1)

    @staticmethod
    def from_json(text: str) -> dict:
        """Parse an ExecGraph JSON back into its nodes and attributes (a dict), checking its form."""
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise Error(f"exec graph JSON is not valid JSON: {e}") from None
        if not isinstance(doc, dict) or "autotile_exec" not in doc.get("attrs", {}):
            raise Error("not an autotile execution graph JSON")
        return doc


def lower_for_plan(sym, plan, replicate_fallback: bool = False, optimizer_args: Optional[dict] = None,
                   dtypes: Optional[dict] = None):
    """Rebuild the graph the plan was made for (the training graph, with `optimizer_args` on
    its update ops, or the forward graph of an inference plan) and lower it to the core graph
    (inputs of the dtypes in `dtypes` by name, float32 otherwise)."""
    from ..autodiff import inference_graph, training_graph

    arguments = set(sym.list_arguments())
    if not getattr(plan, "train", True):
        tg = inference_graph(sym)
    else:
        tg = training_graph(sym, optimizer=plan.optimizer, optimizer_args=optimizer_args,
                            shapes={k: v for k, v in plan.input_shapes.items() if k in arguments})
    lowered = lower(tg.symbol, dict(plan.input_shapes), tg.param_names, tg.backward_of, tg.update_nodes,
                    {g: f for f, g in tg.gradient_entry.items()}, dtypes=_with_head_grad_dtypes(tg, dtypes),
                    replicate_fallback=replicate_fallback)
    return tg, lowered


def _with_head_grad_dtypes(tg, dtypes):
    """`dtypes` with each head gradient (``{output}_head_grad``) given its output's dtype
    unless named: a float64 run's dy is float64 (as a variable it would default to float32,
    and a gradient computed from dy alone, e.g. sum's, came back float32 on k devices)."""
    head_of = getattr(tg, "head_grad_of", None)
    if not dtypes or not head_of:
        return dtypes
    from ..symbol.infer import infer_entry_types

    types = infer_entry_types(tg.symbol, dtypes)
    out_type = {name: types.get((id(n), i)) for n in tg.symbol.topo_nodes() if not n.is_variable
                for i, name in enumerate(n.output_names())}
    return {**{h: out_type[o] for h, o in head_of.items() if out_type.get(o)}, **dtypes}


def node_ids(lowered: LoweredGraph, order: Optional[Sequence]) -> Optional[List[int]]:
    """Node ids of a schedule given by node names or ids (None stays None: the default).
    Error naming the argument unless it lists every node of the graph once."""
    if order is None:
        return None
    if isinstance(order, (str, bytes)) or not hasattr(order, "__iter__"):
        raise Error(f"order must be a list of node names or ids (every node once), got {type(order).__name__}")
    index = {n: i for i, n in enumerate(lowered.node_names)}
    ids = []
    for v in order:
        if isinstance(v, str):
            if v not in index:
                raise Error(f"schedule order: no node '{v}' in the graph")
            ids.append(index[v])
        elif not isinstance(v, bool) and hasattr(v, "__index__"):
            ids.append(v.__index__())
        else:
            raise Error(f"schedule order: {v!r} is neither a node name nor a node id")
    if not ids:  # the core reads an empty order as "the default": say so instead of ignoring it
        raise Error(f"schedule order: 0 nodes given, the graph has {len(index)} (order must list every node "
                    "once; order=None gives the default schedule)")
    return ids


def check_transform_dicts(optimizer_args, dtypes):
    """`optimizer_args` ({name: number}) and `dtypes` ({input: NumPy dtype name}) of
    :func:`transform`, or an Error naming the argument and entry at fault."""
    import numpy as np

    for what, value in (("optimizer_args", optimizer_args), ("dtypes", dtypes)):
        if value is not None and not isinstance(value, dict):
            raise Error(f"{what} must be a dict or None, got {type(value).__name__}")
    clean = None
    if dtypes is not None:
        clean = {}
        for name, dtype in dtypes.items():
            try:
                clean[name] = np.dtype(dtype).name
            except TypeError:
                raise Error(f"dtypes['{name}'] = {dtype!r} is not a NumPy dtype (e.g. 'float32', 'int64')") from None
    return optimizer_args, clean


def check_batch(sym, plan) -> None:
    """Error when `sym` declares an input shape other than the one `plan` was made for (a plan
    for batch 64 handed a model built for batch 32), unless it is the shape the planned model
    declared before ``at.plan(..., batch=B)`` overrode it (``plan.declared_shapes``)."""
    from ..symbol.infer import _declared_shape

    if plan.declared_shapes is None:  # a plan written before the field: nothing to compare with
        return
    for node in sym.topo_nodes():
        if not node.is_variable or node.name not in plan.input_shapes:
            continue
        declared = _declared_shape(node)
        made = tuple(plan.input_shapes[node.name])
        if not declared or len(declared) != len(made) or tuple(declared[1:]) != made[1:]:
            continue  # other dims differ: another graph, which the tensor shapes name
        if tuple(declared) not in (made, tuple(plan.declared_shapes.get(node.name, made))):
            raise Error(f"plan was made for another batch: input '{node.name}' is {made} in the plan "
                        f"(batch {plan.batch}), the model declares {tuple(declared)}")


def transform(model, plan, control_deps: bool = True, device_memory: Optional[int] = None,
              replicate_fallback: bool = False, swap: Optional[bool] = None,
              optimizer_args: Optional[dict] = None, dtypes: Optional[dict] = None,
              order: Optional[Sequence] = None, hierarchical_above: Optional[int] = None,
              stage_above: Optional[int] = None, cut_levels: Optional[Sequence[int]] = None) -> ExecGraph:
    """The execution graph of `model`'s training step under `plan` (from autotile.plan), or of
    its forward graph for an inference plan (``plan.train`` False). `optimizer_args` (lr,
    momentum...) go on the update ops and `dtypes` (NumPy names by input) set the inputs'
    dtypes (float32 by default); neither changes the graph the plan tiles.

    `device_memory` (bytes) is a per-device budget: a plan that needs more gives an Error
    before anything runs, saying how much each device needs. With `swap` (default: the plan's
    own `swap_budget`, set by ``at.plan(device_memory=...)`` when no partition fits), tensors
    move to host memory between uses until every device fits the budget (SwapAdvisor;
    csrc/exec/swap_plan.h).

    `order` (node names of the lowered graph, or their ids) replaces the default serial
    schedule (csrc/exec/schedule_order.h): every node once, each after the producers of its
    inputs, else an Error naming the node (autotile.planner.swap_search searches over them).

    `hierarchical_above` (bytes) makes the collectives that move more per device follow the cut
    hierarchy, the first cuts being the slower links (they separate nodes): reductions sum
    inside a node first and gathers cross nodes first, so the links between nodes carry the
    smallest pieces, at the cost of one more round and a re-indexing copy where the plan's
    slabs need one (csrc/exec/exec_graph.h: a 1/K part of such a tensor more bytes than
    ``plan.comm_bytes``). None: only where that costs no bytes or rounds. `stage_above`: the
    other collectives over groups of more devices run in stages (default 8; csrc/exec/exec_graph.h).
    `cut_levels` (the link level of each cut, as ``Hardware.cut_levels`` gives them): a staged
    collective takes the consecutive cuts of one level in one stage. A plan of the time
    objective that chose hierarchical collectives (``plan.hierarchical_above``) gets them by
    default, as its simulated step ran them."""
    from ..arguments import check_plan
    from ..planner.memory_fit import parse_bytes

    check_plan(plan)
    if hierarchical_above is None and getattr(plan, "hierarchical_above", None) is not None:
        hierarchical_above = plan.hierarchical_above
        from ..planner.time_objective import HIERARCHICAL_STAGE_ABOVE

        stage_above = HIERARCHICAL_STAGE_ABOVE if stage_above is None else stage_above
        cut_levels = cut_levels if cut_levels is not None else (plan.stage_levels or None)
    optimizer_args, dtypes = check_transform_dicts(optimizer_args, dtypes)
    given_memory = device_memory is not None
    if device_memory is not None:
        device_memory = parse_bytes(device_memory)
    budget = device_memory if device_memory is not None else getattr(plan, "swap_budget", None)
    if swap is None:
        swap = getattr(plan, "swap_budget", None) is not None
    if swap and budget is None:
        raise Error("swap=True needs a budget: pass device_memory= (bytes per device)")
    if device_memory is None and swap:
        device_memory = budget
    sym = as_symbol(model, batch=plan.batch)
    check_batch(sym, plan)
    tg, lowered = lower_for_plan(sym, plan, replicate_fallback, optimizer_args, dtypes)
    names = lowered.tensor_names
    missing = [n for n in names if n not in plan.tensor_tilings]
    extra = sorted(set(plan.tensor_tilings) - set(names))
    if extra:
        raise Error(f"plan was made for another graph: it tiles tensors {extra[:5]}, which this graph does not have")
    if missing or len(plan.tensor_tilings) != len(names):
        raise Error(f"plan was made for another graph: tensors {missing[:5]} are not in it "
                    f"({len(plan.tensor_tilings)} tensors planned, the graph has {len(names)})")
    nodes = lowered.node_names
    missing_nodes = [n for n in nodes if n not in plan.node_strategies]
    if missing_nodes:
        raise Error(f"plan was made for another graph: nodes {missing_nodes[:5]} are not in it")
    for n, shape in zip(names, lowered.tensor_shapes):
        if n in plan.tensor_shapes and tuple(plan.tensor_shapes[n]) != tuple(shape):
            raise Error(f"plan was made for other shapes: tensor '{n}' has shape {tuple(shape)} here, "
                        f"{tuple(plan.tensor_shapes[n])} in the plan")
    core = _core.build_exec_graph(lowered.core, plan.factors, [plan.tensor_tilings[n] for n in names],
                                  [plan.node_strategies[n] for n in nodes], control_deps,
                                  int(device_memory) if swap else 0, order=node_ids(lowered, order),
                                  hierarchical_above=-1 if hierarchical_above is None else int(hierarchical_above),
                                  stage_above=8 if stage_above is None else int(stage_above),
                                  cut_levels=None if cut_levels is None else list(cut_levels))
    eg = ExecGraph(core, lowered, tg, plan)
    if device_memory is not None:
        over = [(d, b) for d, b in enumerate(core.arena_bytes) if b > device_memory]
        if over:
            from ..planner.plan import _fmt_bytes

            need = ", ".join(f"device {d}: {_fmt_bytes(b)}" for d, b in over[:8])
            # name the budget where it came from: the argument, or the plan's own swap_budget
            budget_name = "device_memory" if given_memory else "the plan's swap_budget"
            raise Error(f"the plan needs more than {budget_name}={_fmt_bytes(device_memory)} on "
                        f"{len(over)} device(s){' even with swapping' if swap else ''}: {need}")
    return eg
