"""The training graph: forward + backward + optimizer update in one Symbol.

:func:`training_graph` differentiates a forward Symbol by walking it in reverse topological
order and asking every op for its gradient (``OpDef.gradient(GradContext)``), which builds
backward nodes from registered ops. Gradients of a tensor used more than once are summed
with an explicit ``add_n`` node (it belongs to the tensor's group, Tofu Sec 5.1). Then one
optimizer update node per trainable parameter is appended.

Besides the Symbol, the result carries the maps the planner's coarsening needs: every
backward node with its forward node, every tensor with its gradient(s) and gradient sum,
every update node with its parameter.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import Error
from ..ops import registry
from ..ops.grad import GradContext
from ..symbol.infer import infer_entry_shapes
from ..symbol.ops_api import create
from ..symbol.symbol import Node, Symbol, Variable
from .optimizers import optimizer_spec

EntryKey = Tuple[int, int]  # (id(node), output index)

#: Attributes copied from a forward node onto its backward nodes, so the planner can merge
#: unrolled RNN timesteps of the backward pass the same way as the forward pass.
PROPAGATED_ATTRS = ("__timestep__", "__rnn_cell__", "__layer__")


@dataclass
class TrainingGraph:
    """Forward + backward + update graph of a model and the maps relating its parts.

    ``symbol``'s outputs are, in this order:

    1. the forward outputs (``output_names``, as the forward Symbol lists them);
    2. the gradient of every parameter (``grad_names``, in ``param_names`` order);
    3. the updated parameters (``updated_names``, in ``param_names`` order);
    4. the updated optimizer states (``new_state_names``, in ``state_names`` order: per
       parameter in ``param_names`` order, that parameter's states in optimizer order).

    Its inputs are the forward inputs (data, labels, parameters, auxiliary states), the
    optimizer states (``state_names``, to be fed zeros on the first step) and the head
    gradients of non-loss outputs (``head_grad_names``, to be fed ones). Loss heads such as
    SoftmaxOutput ignore their head gradient (MXNet semantics), so theirs never appears.
    """

    symbol: Symbol
    forward: Symbol
    optimizer: str
    optimizer_args: Dict[str, object]
    output_names: List[str]
    grad_names: List[str]
    updated_names: List[str]
    new_state_names: List[str]
    param_names: List[str]
    state_names: List[str]
    data_names: List[str]
    aux_names: List[str]
    head_grad_names: List[str]
    #: op nodes of the forward graph, in topological order
    forward_nodes: List[str]
    #: backward node -> the forward node whose gradient created it (op group)
    backward_of: Dict[str, str]
    #: update node -> the parameter it updates
    update_nodes: Dict[str, str]
    #: gradient entry -> the forward entry it is a gradient of (tensor group); partial
    #: gradients of a tensor used several times, and their sum, all map to that tensor
    gradient_of: Dict[str, str]
    #: forward entry -> its (total) gradient entry; activations and parameters
    gradient_entry: Dict[str, str]
    #: gradient-sum node -> the forward entry whose partial gradients it sums (tensor group)
    grad_sum_of: Dict[str, str]
    #: optimizer state input -> parameter
    state_of: Dict[str, str]
    #: head-gradient input -> forward output entry
    head_grad_of: Dict[str, str] = field(default_factory=dict)
    #: False for the forward graph alone (:func:`inference_graph`): no gradients, updates or states
    train: bool = True

    def group_of(self, node_name: str) -> Optional[str]:
        """The forward node (op group) or forward entry (tensor group) a node belongs to."""
        if node_name in self.backward_of:
            return self.backward_of[node_name]
        if node_name in self.grad_sum_of:
            return self.grad_sum_of[node_name]
        if node_name in self.update_nodes:
            return self.update_nodes[node_name]
        return node_name if node_name in set(self.forward_nodes) else None


#: Variable attribute marking a graph input as data (set by the ONNX importer on every graph
#: input that is not an initializer, whatever its name: ``input_ids``, ``pixel_values``...).
DATA_ATTR = "__data__"


#: Variable attribute marking a constant input (an ONNX Constant node or a folded constant
#: subgraph: masks, fill values, position tables): an argument that is not trained.
CONST_ATTR = "__const__"


def constant_names(sym: Symbol) -> List[str]:
    """Arguments of `sym` marked constant (:data:`CONST_ATTR`): inputs that get no gradient."""
    return [n.name for n in sym.topo_nodes() if n.is_variable and n.attrs.get(CONST_ATTR) == "1"]


def default_param_names(sym: Symbol, data_names: Optional[Sequence[str]] = None) -> List[str]:
    """The trainable parameters by default: arguments that are neither data/labels
    (:func:`default_data_names`) nor constants (:func:`constant_names`)."""
    skip = set(default_data_names(sym, data_names)) | set(constant_names(sym))
    return [a for a in sym.list_arguments() if a not in skip]


def default_data_names(arguments, data_names: Optional[Sequence[str]] = None) -> List[str]:
    """Arguments that are data or labels rather than trainable parameters: ``data``, any name
    ending in ``label``, the names in `data_names` and, when `arguments` is a Symbol, every
    Variable marked as data (:data:`DATA_ATTR`)."""
    extra = set(data_names or ())
    if isinstance(arguments, Symbol):
        extra |= {n.name for n in arguments.topo_nodes() if n.is_variable and n.attrs.get(DATA_ATTR) == "1"}
        arguments = arguments.list_arguments()
    return [a for a in arguments if a == "data" or a.endswith("label") or a in extra]


def inference_graph(sym: Symbol, data_names: Optional[Sequence[str]] = None) -> TrainingGraph:
    """The forward graph of `sym` alone, for partitioned inference: a :class:`TrainingGraph`
    whose symbol is `sym` itself, with no gradients, updates, optimizer states or head
    gradients (``train`` is False). ``param_names`` are still the weights (every argument
    that is not data or a label), so plans and baselines know what is a parameter."""
    if not isinstance(sym, Symbol):
        raise Error(f"inference_graph needs a Symbol, got {type(sym).__name__}")
    arguments = sym.list_arguments()
    data = default_data_names(sym, data_names)
    return TrainingGraph(
        symbol=sym, forward=sym, optimizer="", optimizer_args={}, output_names=sym.list_outputs(),
        grad_names=[], updated_names=[], new_state_names=[], param_names=[a for a in arguments if a not in set(data)],
        state_names=[], data_names=data, aux_names=sym.list_auxiliary_states(), head_grad_names=[],
        forward_nodes=[n.name for n in sym.topo_nodes() if not n.is_variable], backward_of={}, update_nodes={},
        gradient_of={}, gradient_entry={}, grad_sum_of={}, state_of={}, train=False)


def _entry_name(node: Node, index: int, cache: Dict[int, List[str]]) -> str:
    names = cache.get(id(node))
    if names is None:
        names = node.output_names()
        cache[id(node)] = names
    return names[index]


#: Most partial gradients one add_n sums. More are summed by a chain of add_n nodes, each
#: adding the next pieces to the running sum, so the pieces die as they are added: one add_n
#: over an unrolled RNN's every timestep keeps all of them alive until the last is computed
#: and needs them all at once (rnn-2-2k, batch 128, 4 devices: 35 pieces of a weight
#: gradient, 352 MB per device). MXNet caps its in-place sums at 8
#: (MXNET_EXEC_INPLACE_GRAD_SUM_CAP); with 8 the serial schedule still computes a link's 8
#: pieces before it sums them, while with 2 each piece is added right after it is computed:
#: per-device need of rnn-2-2k (b128, 4 devices) 639 MB with one add_n, 449 MB with 8,
#: 353 MB with 2, for the same communication.
GRAD_SUM_CAP = 2


def _sum_grads(parts: List[Symbol], name: str) -> List[Symbol]:
    """Explicit summation of partial gradients (in the order they are computed): add_n nodes of
    at most GRAD_SUM_CAP inputs, each after the first taking the running sum first; without
    add_n a chain of elemwise_add nodes. The last node is named `name`, the others `name0`,
    `name1`... Returns the new nodes' Symbols, the total last."""
    if registry.exists("add_n"):
        chain: List[Symbol] = []
        rest = list(parts)
        while rest:
            take = GRAD_SUM_CAP - (1 if chain else 0)
            group, rest = ([chain[-1]] if chain else []) + rest[:take], rest[take:]
            chain.append(create("add_n", *group, name=name if not rest else f"{name}{len(chain)}"))
        return chain
    if not registry.exists("elemwise_add"):
        raise Error(f"cannot sum gradients into '{name}': neither add_n nor elemwise_add is registered")
    chain = [parts[0]]
    for k, p in enumerate(parts[1:]):
        chain.append(create("elemwise_add", chain[-1], p, name=name if k == len(parts) - 2 else f"{name}{k}"))
    return chain[1:]


def training_graph(sym: Symbol, optimizer: str = "sgd", optimizer_args: Optional[dict] = None,
                   params: Optional[Sequence[str]] = None, data_names: Optional[Sequence[str]] = None,
                   shapes: Optional[Dict[str, tuple]] = None) -> TrainingGraph:
    """Build the training graph (forward, backward, update) of the forward Symbol `sym`.

    optimizer: ``"sgd"``, ``"momentum"`` or ``"adam"``; optimizer_args: attributes of the
    update op (``lr``, ``wd``, ``momentum``, ``beta1``, ``rescale_grad``...; defaults in
    :mod:`autotile.autodiff.optimizers`). params: exactly the trainable parameters; by default
    every argument that is not data or a label (see :func:`default_data_names`). shapes:
    input shapes (else the variables' ``__shape__``); shapes are passed to gradient functions
    and recorded on the new inputs so the training Symbol infers shapes on its own.
    """
    if not isinstance(sym, Symbol):
        raise Error(f"training_graph needs a Symbol, got {type(sym).__name__}")
    # BatchNorm with batch statistics trains in its synchronous form (ops/sync_batchnorm.py):
    # its statistics are sums a batch-split plan reduces across devices.
    from ..ops.sync_batchnorm import expand_batchnorm

    sym = expand_batchnorm(sym, shapes)
    spec = optimizer_spec(optimizer, optimizer_args)
    arguments = sym.list_arguments()
    aux_names = sym.list_auxiliary_states()
    if params is None:
        param_names = default_param_names(sym, data_names)
        data = [a for a in arguments if a not in set(param_names)]
    else:
        param_names = list(dict.fromkeys(params))
        unknown = [p for p in param_names if p not in set(arguments)]
        if unknown:
            where = " (auxiliary states get no gradient)" if set(unknown) & set(aux_names) else ""
            raise Error(f"params {unknown} are not arguments of the symbol{where} (arguments: {arguments[:30]})")
        data = [a for a in arguments if a not in set(param_names)]
    nodes = sym.topo_nodes()
    shape_of = infer_entry_shapes(sym, dict(shapes or {}), partial=True)
    names_cache: Dict[int, List[str]] = {}
    all_names = {n.name for n in nodes}

    # Which entries depend on a parameter (only those need gradients).
    param_set = set(param_names)
    needs: set = set()
    for node in nodes:
        if node.is_variable:
            if node.name in param_set:
                needs.add(id(node))
        elif any(id(src) in needs for src, _ in node.inputs):
            needs.add(id(node))

    contributions: Dict[EntryKey, List[Symbol]] = {}
    known = {id(n) for n in nodes}  # nodes already placed in a group (forward ones to start)
    backward_of: Dict[str, str] = {}
    gradient_of: Dict[str, str] = {}
    gradient_entry: Dict[str, str] = {}
    grad_sum_of: Dict[str, str] = {}
    head_grad_of: Dict[str, str] = {}
    head_vars: Dict[str, Symbol] = {}

    def new_name(name: str) -> str:
        if name in all_names:
            raise Error(f"training graph: generated node name '{name}' clashes with a node of the model; rename it")
        all_names.add(name)
        return name

    # Head gradients: one variable per head that depends on a parameter.
    for k, (node, i) in enumerate(sym.entries):
        if id(node) not in needs:
            continue
        out_name = _entry_name(node, i, names_cache)
        vname = f"{out_name}_head_grad" if f"{out_name}_head_grad" not in head_vars else f"{out_name}_head_grad{k}"
        shape = shape_of.get((id(node), i))
        hv = Variable(new_name(vname), shape=shape)
        head_vars[vname] = hv
        head_grad_of[vname] = out_name
        contributions.setdefault((id(node), i), []).append(hv)

    def total_grad(node: Node, i: int) -> Optional[Symbol]:
        """The gradient of entry (node, i): its single contribution or their explicit sum."""
        parts = contributions.get((id(node), i))
        if not parts:
            return None
        fwd = _entry_name(node, i, names_cache)
        for p in parts:
            pn, pi = p.entries[0]
            gradient_of.setdefault(_entry_name(pn, pi, names_cache), fwd)
        if len(parts) == 1:
            total = parts[0]
        else:
            chain = _sum_grads(parts, f"{fwd}_grad_sum")
            for link in chain:
                grad_sum_of[new_name(link.entries[0][0].name)] = fwd
                known.add(id(link.entries[0][0]))
            total = chain[-1]
        tn, ti = total.entries[0]
        gradient_of.setdefault(_entry_name(tn, ti, names_cache), fwd)
        gradient_entry[fwd] = _entry_name(tn, ti, names_cache)
        contributions[(id(node), i)] = [total]
        return total

    for node in reversed(nodes):
        if node.is_variable or id(node) not in needs:
            continue
        op = node.opdef()
        attrs = node.parsed_attrs()
        n_out = op.num_outputs(attrs)
        out_grads = [total_grad(node, i) for i in range(n_out)]
        if all(g is None for g in out_grads):
            continue  # no output reaches a head: the node does not influence the loss
        if op.gradient is None:
            raise Error(f"node '{node.name}' (op {node.op}) has no gradient; cannot train through it")
        outputs = [Symbol([(node, i)]) for i in range(n_out)]
        zero_nodes = []
        for i, g in enumerate(out_grads):
            if g is None:
                if not registry.exists("zeros_like"):
                    raise Error(f"node '{node.name}' (op {node.op}): output {i} has no gradient and "
                                f"zeros_like is not registered")
                out_grads[i] = create("zeros_like", outputs[i], name=new_name(f"{node.name}_zero_grad{i}"))
                zero_nodes.append(out_grads[i])
        ctx = GradContext(
            name=node.name, attrs=attrs, raw_attrs=dict(node.attrs),
            inputs=[Symbol([e]) for e in node.inputs], outputs=outputs, out_grads=out_grads,
            in_shapes=[shape_of.get((id(s), j)) for s, j in node.inputs],
            out_shapes=[shape_of.get((id(node), i)) for i in range(n_out)])
        try:
            grads = op.gradient(ctx)
        except Error as e:
            msg = str(e) if node.name in str(e) else f"node '{node.name}' (op {node.op}): gradient failed: {e}"
            raise Error(msg) from None
        n_args = len(op.arguments(attrs))
        grads = list(grads or [])
        if len(grads) == n_args:
            grads += [None] * (len(node.inputs) - n_args)
        if len(grads) != len(node.inputs):
            raise Error(f"node '{node.name}' (op {node.op}): gradient returned {len(grads)} entries "
                        f"for {len(node.inputs)} inputs")
        # Backward nodes: those built through ctx.op, plus any other new node the returned
        # gradients reach (a gradient may call ops_api.create directly).
        extra = {k: v for k, v in node.attrs.items() if k in PROPAGATED_ATTRS}
        fresh = [cn for s in list(ctx.created) + zero_nodes for cn, _ in s.entries]
        stack = [s.entries[0][0] for s in grads if isinstance(s, Symbol) and s.entries]
        while stack:
            cn = stack.pop()
            if id(cn) in known or cn.is_variable:
                continue
            fresh.append(cn)
            known.add(id(cn))
            stack.extend(src for src, _ in cn.inputs)
        zero_ids = {id(z.entries[0][0]) for z in zero_nodes}  # named by new_name already
        for cn in dict.fromkeys(fresh):
            known.add(id(cn))
            if cn.name in backward_of:
                continue
            if id(cn) not in zero_ids:
                new_name(cn.name)
            backward_of[cn.name] = node.name
            cn.attrs.update(extra)
        for j, ((src, si), g) in enumerate(zip(node.inputs, grads)):
            if j >= n_args or g is None or id(src) not in needs:
                continue
            if not isinstance(g, Symbol) or len(g.entries) != 1:
                raise Error(f"node '{node.name}' (op {node.op}): gradient of input {j} must be a "
                            f"single-output Symbol, got {g!r}")
            contributions.setdefault((id(src), si), []).append(g)

    by_name = {n.name: n for n in nodes if n.is_variable}
    grads_of_params: List[Symbol] = []
    for p in param_names:
        g = total_grad(by_name[p], 0)
        if g is None:
            if not registry.exists("zeros_like"):
                raise Error(f"parameter '{p}' does not influence any output, so it has no gradient")
            g = create("zeros_like", Symbol([(by_name[p], 0)]), name=new_name(f"{p}_zero_grad"))
            gradient_of[g.list_outputs()[0]] = p
            gradient_entry[p] = g.list_outputs()[0]
            grad_sum_of[g.entries[0][0].name] = p
        grads_of_params.append(g)

    # One optimizer update node per parameter; its hidden outputs are the new states.
    update_nodes: Dict[str, str] = {}
    state_names: List[str] = []
    state_of: Dict[str, str] = {}
    updated: List[Symbol] = []
    new_states: List[Symbol] = []
    for p, g in zip(param_names, grads_of_params):
        shape = shape_of.get((id(by_name[p]), 0))
        states = []
        for suffix in spec.states:
            sname = new_name(f"{p}_{suffix}")
            states.append(Variable(sname, shape=shape))
            state_names.append(sname)
            state_of[sname] = p
        upd = create(spec.op, Symbol([(by_name[p], 0)]), g, *states, name=new_name(f"{p}_update"),
                     **spec.attrs_for(by_name[p]))
        unode = upd.entries[0][0]
        update_nodes[unode.name] = p
        updated.append(Symbol([(unode, 0)]))
        n_out = unode.opdef().num_outputs(unode.parsed_attrs())
        if n_out != 1 + len(states):
            raise Error(f"update op {spec.op} has {n_out} outputs; expected new weight + {len(states)} states")
        new_states.extend(Symbol([(unode, 1 + s)]) for s in range(len(states)))

    entries = list(sym.entries) + [g.entries[0] for g in grads_of_params] \
        + [u.entries[0] for u in updated] + [s.entries[0] for s in new_states]
    train = Symbol(entries, sym.params)
    live = {n.name for n in train.topo_nodes()}
    live_entries = {_entry_name(n, i, names_cache) for n in train.topo_nodes()
                    for i in range(1 if n.is_variable else n.opdef().num_outputs(n.parsed_attrs()))}
    outs = train.list_outputs()
    n_fwd, n_p = len(sym.entries), len(param_names)
    return TrainingGraph(
        symbol=train, forward=sym, optimizer=spec.name, optimizer_args=dict(spec.args),
        output_names=outs[:n_fwd], grad_names=outs[n_fwd:n_fwd + n_p],
        updated_names=outs[n_fwd + n_p:n_fwd + 2 * n_p], new_state_names=outs[n_fwd + 2 * n_p:],
        param_names=param_names, state_names=state_names, data_names=data, aux_names=aux_names,
        head_grad_names=[h for h in head_vars if h in live],
        forward_nodes=[n.name for n in nodes if not n.is_variable],
        backward_of={k: v for k, v in backward_of.items() if k in live},
        update_nodes=update_nodes,
        gradient_of={k: v for k, v in gradient_of.items() if k in live_entries},
        gradient_entry={k: v for k, v in gradient_entry.items() if v in live_entries},
        grad_sum_of={k: v for k, v in grad_sum_of.items() if k in live},
        state_of=state_of,
        head_grad_of={k: v for k, v in head_grad_of.items() if k in live},
    )
