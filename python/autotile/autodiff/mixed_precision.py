"""Mixed precision (autocast) as a graph pass: the forward Symbol rewritten with Cast nodes
before autodiff, so the training graph, the planner and every runtime see each tensor in
the dtype it has (docs/mixed-precision.md).

    msym = at.autodiff.autocast(sym, "bfloat16")
    res = at.backend.run(sym, devices=4, train=True, dtype="bfloat16")   # the same, inside

What the pass does, op by op (PyTorch's autocast lists, on this op set):

- **compute ops** (:data:`LOW_PRECISION_OPS`: FullyConnected, Convolution, Deconvolution,
  dot, batch_dot) read every float input in the low dtype: a Cast node converts the
  float32 weight (once per weight, shared by its uses) and the float32 data. Their outputs,
  the activations, are bfloat16; so are the ops after them (Activation, Pooling, Dropout,
  Flatten, Concat, elementwise) and the gradients flowing back through them.
- **float32 ops** (:data:`FLOAT32_OPS`: loss heads, softmax, exp/log, normalisations) read
  float32: a bfloat16 input is cast up. Loss outputs stay float32. A normalisation
  (:data:`NORM_OPS`, BatchNorm among them) computes and keeps its statistics in float32 and
  stores its output in bfloat16 again (a Cast after it), as cuDNN's bf16 BatchNorm does.
- **other ops** run in their inputs' dtype; when float inputs mix bfloat16 and float32,
  the bfloat16 ones are cast up (the widest wins).

Weights, optimizer states and auxiliary states (moving statistics) stay float32 variables:
the weight's Cast has a gradient (``_backward_Cast``) that casts the bfloat16 weight gradient
back to float32, so the optimizer update reads and writes float32 (master weights). The
partial sums a plan reduces across devices are summed in float32 by MultiFetch (a bfloat16
accumulation sums every piece in float and rounds once, csrc/runtime/multifetch.cc).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ..dtype_flags import LOW_PRECISION, bfloat16
from ..errors import Error
from ..ops.registry import format_value
from ..symbol.infer import infer_entry_shapes, infer_entry_types
from ..symbol.symbol import Node, Symbol
from .graph import default_data_names

#: Ops computed in the low dtype: every float input is cast to it (matrix work).
LOW_PRECISION_OPS = frozenset({"FullyConnected", "Convolution", "Deconvolution", "dot", "batch_dot"})
#: Normalisations: computed in float32 (statistics in float32), the output stored back in
#: the low dtype when the input was low.
NORM_OPS = frozenset({"BatchNorm", "LayerNorm", "GroupNorm", "InstanceNorm", "RMSNorm", "LRN"})
#: Ops whose inputs are cast up to float32: losses, softmax, exp/log and sums of many terms.
FLOAT32_OPS = NORM_OPS | frozenset({
    "SoftmaxOutput", "LinearRegressionOutput", "LogisticRegressionOutput", "MAERegressionOutput", "MakeLoss",
    "make_loss", "softmax", "log_softmax", "Softmax", "SoftmaxActivation", "exp", "log", "sum", "mean", "prod",
    "cumsum", "sum_axis"})

_FLOATS = ("float16", "float32", "float64", "bfloat16")
#: Loss heads whose gradient carries ``grad_scale``: loss scaling multiplies it.
LOSS_SCALED_OPS = frozenset({"SoftmaxOutput", "LinearRegressionOutput", "LogisticRegressionOutput",
                             "MAERegressionOutput", "MakeLoss", "make_loss"})


def autocast(sym: Symbol, dtype: str = "bfloat16", dtypes: Optional[Dict[str, str]] = None,
             shapes: Optional[Dict[str, tuple]] = None, loss_scale: float = 1.0) -> Symbol:
    """`sym` rewritten for mixed-precision training in `dtype` (see the module docstring).

    dtypes: the dtypes of inputs that are not float32 (as :func:`infer_entry_types` takes
    them); inputs declared integer are never cast. shapes: input shapes, as
    :func:`infer_entry_shapes` takes them: a weight read through a Cast gets its inferred
    shape recorded (``__shape__``), since a Cast cannot infer its input's shape from its
    output as the op reading the weight did. loss_scale: the loss heads' gradients are
    multiplied by it (their ``grad_scale``), so small float16 gradients do not flush to
    zero; the caller divides the weight gradients by it (:func:`autotile.backend.run` does,
    in float32). Every output must then be such a loss head. Cast nodes are named
    ``{tensor}_{dtype}`` (``fc1_weight_bfloat16``) or ``{tensor}_float32``. Returns a new
    Symbol (the variables, their names and ``sym.params`` are the same); ``dtype="float32"``
    returns `sym` itself."""
    if not isinstance(sym, Symbol):
        raise Error(f"autocast needs a Symbol, got {type(sym).__name__}")
    if dtype in (None, "float32"):
        return sym
    if dtype not in LOW_PRECISION:
        raise Error(f"mixed precision in dtype '{dtype}' is not supported: use one of "
                    f"{', '.join(('float32',) + LOW_PRECISION)}")
    if dtype == "bfloat16":
        bfloat16()  # registers the dtype with NumPy (or names the package to install)
    loss_scale = float(loss_scale)
    if not loss_scale > 0 or loss_scale == float("inf"):
        raise Error(f"loss_scale must be a positive finite number, got {loss_scale!r}")
    if loss_scale != 1.0:
        for node, _ in sym.entries:
            if node.op not in LOSS_SCALED_OPS:
                raise Error(f"loss scaling multiplies a loss head's gradient, but output '{node.name}' is "
                            f"{'a variable' if node.is_variable else f'op {node.op}'}, not one of "
                            f"{', '.join(sorted(LOSS_SCALED_OPS))}")
    nodes = sym.topo_nodes()
    old_types = infer_entry_types(sym, dict(dtypes or {}))
    old_shapes = infer_entry_shapes(sym, dict(shapes or {}), partial=True)
    data = set(default_data_names(sym))  # their shapes come with each run (the batch)
    taken = {n.name for n in nodes}
    new: Dict[int, List[Tuple[Node, int]]] = {}  # id(old node) -> its new entries
    types: Dict[Tuple[int, int], str] = {}  # (id(new node), i) -> dtype
    casts: Dict[Tuple[int, int, str], Tuple[Node, int]] = {}  # one Cast per (entry, dtype)
    out_names: Dict[int, List[str]] = {}

    def entry_name(node: Node, i: int) -> str:
        if id(node) not in out_names:
            out_names[id(node)] = node.output_names()
        return out_names[id(node)][i]

    def cast(e: Tuple[Node, int], to: str) -> Tuple[Node, int]:
        key = (id(e[0]), e[1], to)
        if key not in casts:
            name = f"{entry_name(*e)}_{to}"
            while name in taken:
                name += "_"
            taken.add(name)
            extra = {k: v for k, v in e[0].attrs.items() if k in ("__timestep__", "__layer__")}
            node = Node("Cast", name, {**extra, "dtype": to}, [e])
            casts[key] = (node, 0)
            types[(id(node), 0)] = to
        return casts[key]

    for node in nodes:
        if node.is_variable:
            shape, var = old_shapes.get((id(node), 0)), node
            if "__shape__" not in node.attrs and node.name not in data and shape is not None:
                var = Node("null", node.name, {**node.attrs, "__shape__": format_value(tuple(shape))})
            new[id(node)] = [(var, 0)]
            types[(id(var), 0)] = old_types[(id(node), 0)]
            continue
        op = node.opdef()
        attrs = node.parsed_attrs()
        inputs = [new[id(src)][i] for src, i in node.inputs]
        in_types = [types[(id(n), i)] for n, i in inputs]
        floats = [t in _FLOATS for t in in_types]
        n_args = len(op.arguments(attrs))
        if node.op in LOW_PRECISION_OPS:
            want = [dtype if f and j < n_args else None for j, f in enumerate(floats)]
        elif node.op in FLOAT32_OPS:
            want = ["float32" if t == dtype else None for t in in_types]
        elif any(t == dtype for t in in_types) and any(f and t != dtype for f, t in zip(floats, in_types)):
            want = ["float32" if t == dtype else None for t in in_types]  # mixed: the widest wins
        else:
            want = [None] * len(inputs)
        inputs = [cast(e, w) if w is not None and types[(id(e[0]), e[1])] != w else e for e, w in zip(inputs, want)]
        node_attrs = dict(node.attrs)
        if loss_scale != 1.0 and node.op in LOSS_SCALED_OPS:
            node_attrs["grad_scale"] = repr(float(attrs["grad_scale"]) * loss_scale)
        copy = Node(node.op, node.name, node_attrs, inputs)
        _, outs = op.infer_type(attrs, [types[(id(n), i)] for n, i in inputs])
        n_out = op.num_outputs(attrs)
        if outs is None:
            first = next((types[(id(n), i)] for n, i in inputs), "float32")
            outs = [first] * n_out
        for i, t in enumerate(outs):
            types[(id(copy), i)] = t
        entries = [(copy, i) for i in range(n_out)]
        if node.op in NORM_OPS and in_types and in_types[0] == dtype:
            entries[0] = cast(entries[0], dtype)  # statistics in float32, the output stored low
        new[id(node)] = entries

    heads = []
    for node, i in sym.entries:
        e = new[id(node)][i]
        if e[0].op == "Cast" and not node.op == "Cast" and e[0].inputs:
            e = e[0].inputs[0]  # a graph output keeps its own node (and name), in float32
        heads.append(e)
    result = Symbol(heads, params=sym.params)
    for k, v in vars(sym).items():  # what a front end attached (an ONNX model's own names)
        if not k.startswith("_") and k != "params":
            setattr(result, k, v)
    return result
