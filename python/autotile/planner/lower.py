"""Lowering: a training graph (autotile.autodiff.TrainingGraph) with concrete input shapes
becomes the core's graph IR (autotile._core.Graph): one tensor per entry, one node per op
with its TDL text, roles, backward->forward links and tensor->gradient links, which is all
the C++ planner needs."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .. import _core
from ..errors import Error
from ..symbol.infer import infer_entry_shapes, infer_entry_types
from ..symbol.symbol import Node


@dataclass
class LoweredGraph:
    """The core graph plus the names needed to read a plan back."""

    core: "_core.Graph"
    tensor_names: List[str]  # by core tensor id
    node_names: List[str]  # by core node id
    node_ops: List[str]
    tensor_shapes: List[Tuple[int, ...]]
    tensor_dtypes: List[str]
    param_names: List[str]
    entry_tensor: Dict[Tuple[int, int], int] = field(default_factory=dict)  # (id(node), i) -> tensor id


def entry_name(node: Node, index: int) -> str:
    return node.name if node.is_variable else node.output_names()[index]


def lower(symbol, shapes: Dict[str, tuple], param_names=(), backward_of: Optional[Dict[str, str]] = None,
          update_nodes=(), gradient_of: Optional[Dict[str, str]] = None, dtypes: Optional[Dict[str, str]] = None,
          replicate_fallback: bool = False) -> LoweredGraph:
    """Build the core graph of `symbol` (normally a training graph's symbol) at `shapes`.

    An op without a TDL description is an Error naming the node and op, unless
    `replicate_fallback` is set (then the node is planned as replicated)."""

    backward_of = backward_of or {}
    gradient_of = gradient_of or {}
    update_nodes = set(update_nodes)
    params = set(param_names)
    known = infer_entry_shapes(symbol, shapes)
    types = infer_entry_types(symbol, dtypes or {})
    g = _core.Graph()
    lowered = LoweredGraph(g, [], [], [], [], [], sorted(params))
    node_id: Dict[str, int] = {}
    missing_tdl = []
    for node in symbol.topo_nodes():
        if node.is_variable:
            key = (id(node), 0)
            if key not in known:
                raise Error(f"cannot plan: the shape of input '{node.name}' is unknown; pass it in shapes= or batch=")
            _add_tensor(lowered, node.name, key, known[key], types.get(key, "float32"), node.name in params)
            continue
        op = node.opdef()
        attrs = node.parsed_attrs()
        n_out = op.num_outputs(attrs)
        in_shapes = [known[(id(src), i)] for src, i in node.inputs]
        out_shapes = []
        for i in range(n_out):
            key = (id(node), i)
            if key not in known:
                raise Error(f"node '{node.name}' (op {node.op}): the shape of output {i} could not be inferred")
            out_shapes.append(known[key])
        tdl = op.tdl(attrs, in_shapes, out_shapes) if op.tdl is not None else None
        if not tdl:
            if not replicate_fallback:
                missing_tdl.append(f"{node.name} ({node.op})")
            tdl = ""
        outs = [_add_tensor(lowered, entry_name(node, i), (id(node), i), out_shapes[i],
                            types.get((id(node), i), "float32"), False) for i in range(n_out)]
        ins = [lowered.entry_tensor[(id(src), i)] for src, i in node.inputs]
        role = "update" if node.name in update_nodes else ("backward" if node.name in backward_of else "forward")
        nid = g.add_node(node.name, node.op, ins, outs, tdl, role)
        for key, value in node.attrs.items():
            if key != "__inplace__":  # the op decides, below; a symbol's copy could be stale
                g.set_attr(nid, key, value)
        no_split = op.extra.get("no_split")
        if no_split is not None:
            vetoed = no_split(attrs, in_shapes, out_shapes)
            if vetoed:
                g.set_attr(nid, "__no_split__", ",".join(vetoed))
        inplace = inplace_pairs(op, attrs, [lowered.tensor_dtypes[t] for t in ins],
                                [lowered.tensor_dtypes[t] for t in outs], in_shapes, out_shapes)
        if inplace:
            g.set_attr(nid, "__inplace__", ",".join(str(j) for j in inplace))
        group = timestep_group(node)
        if group:
            g.set_attr(nid, "__timestep_group__", group)
        node_id[node.name] = nid
        lowered.node_names.append(node.name)
        lowered.node_ops.append(node.op)
    for head in symbol.entries:
        g.mark_output(lowered.entry_tensor[(id(head[0]), head[1])])
    if missing_tdl:
        raise Error("cannot plan: these ops have no TDL description (pass replicate_fallback=True to run them "
                    "replicated): " + ", ".join(missing_tdl[:20]) + (" ..." if len(missing_tdl) > 20 else ""))
    for bwd, fwd in backward_of.items():
        if bwd in node_id and fwd in node_id:
            g.set_backward_of(node_id[bwd], node_id[fwd])
    name_to_tensor = {n: i for i, n in enumerate(lowered.tensor_names)}
    for grad, fwd in gradient_of.items():
        if grad in name_to_tensor and fwd in name_to_tensor:
            g.set_gradient(name_to_tensor[fwd], name_to_tensor[grad])
    return lowered


def inplace_pairs(op, attrs, in_dtypes, out_dtypes, in_shapes, out_shapes) -> List[int]:
    """Per output, the input whose memory it may take when the node is that input's last
    reader (-1: none), or [] when no output may. From the OpDef's ``extra['inplace']`` hook,
    else a single-output element-wise op pairs its output with the first input of the same
    shape and dtype (MXNet's FInplaceOption for element-wise ops). The runtimes compute all of
    a node's outputs before writing any, so aliasing an input is safe."""
    hook = op.extra.get("inplace")
    if hook is not None:
        pairs = list(hook(attrs, in_shapes, out_shapes))
    elif op.elementwise and len(out_shapes) == 1:
        pairs = [next((j for j, (s, t) in enumerate(zip(in_shapes, in_dtypes))
                       if tuple(s) == tuple(out_shapes[0]) and t == out_dtypes[0]), -1)]
    else:
        return []
    return pairs if any(j >= 0 for j in pairs) else []


def timestep_group(node: Node) -> str:
    """The key shared by one op of an unrolled RNN across its timesteps (Tofu Sec 5.1):
    nodes named ``{cell}_t{t}_{op}`` (and their backward nodes) with ``__rnn_cell__`` and
    ``__timestep__`` attributes map to ``{cell}:{op}``."""
    cell, step = node.attrs.get("__rnn_cell__"), node.attrs.get("__timestep__")
    if cell is None or step is None:
        return ""
    prefix = f"{cell}_t{step}_"
    if not node.name.startswith(prefix):
        return ""
    return f"{cell}:{node.name[len(prefix):]}"


def _add_tensor(lowered: LoweredGraph, name: str, key, shape, dtype: str, is_param: bool) -> int:
    shape = tuple(int(d) for d in shape)
    tid = lowered.core.add_tensor(name, shape, dtype, is_param)
    lowered.tensor_names.append(name)
    lowered.tensor_shapes.append(shape)
    lowered.tensor_dtypes.append(dtype)
    lowered.entry_tensor[key] = tid
    return tid
