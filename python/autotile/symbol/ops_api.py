"""Op constructors: ``autotile.sym.FullyConnected(data=x, num_hidden=10, name="fc1")``.

Positional arguments fill the op's arguments in order; keyword arguments named like an
argument are inputs, all others are attributes (formatted as MXNet formats them).
Arguments and auxiliary states left out become Variables named ``{name}_{argument}``,
as MXNet does (``fc1_weight``, ``bn0_moving_mean``)."""
from __future__ import annotations

from collections import deque
from typing import Optional

from ..errors import Error
from ..ops import registry
from .json_io import apply_compose_var_attrs
from .symbol import Node, Symbol, Variable, implements, names


@implements("create")
def create(op_name: str, *args, name: Optional[str] = None, attr: Optional[dict] = None, **kwargs) -> Symbol:
    """Apply operator `op_name` to symbols and return the resulting Symbol."""
    op = registry.get(op_name)
    sym_kwargs = {k: v for k, v in kwargs.items() if isinstance(v, Symbol)}
    attr_kwargs = {k: v for k, v in kwargs.items() if not isinstance(v, Symbol) and v is not None}
    if len(args) == 1 and isinstance(args[0], (list, tuple)) and op.variadic:
        args = tuple(args[0])
    for a in args:
        if not isinstance(a, Symbol):
            raise Error(f"{op_name}: positional inputs must be Symbols, got {type(a).__name__}")
    raw = {k: registry.format_value(v) for k, v in attr_kwargs.items()}
    if op.variadic and op.variadic not in raw:
        raw[op.variadic] = str(len(args) + len(sym_kwargs))
    raw.update({k: str(v) for k, v in (attr or {}).items()})
    node_name = name or names.get(op_name.lstrip("_"))
    attrs = registry.parse_attrs(op, raw, node_name)
    arg_names = op.arguments(attrs)
    aux_names = op.aux(attrs)
    inputs = []
    params = {}
    positional = deque(args)  # popped from the left: a list's pop(0) made 10^5 inputs quadratic
    for i, arg in enumerate(arg_names + aux_names):
        if arg in sym_kwargs:
            s = sym_kwargs.pop(arg)
        elif positional and i < len(arg_names):
            s = positional.popleft()
        else:  # as NNVM's compose: a created variable carries a copy of the node's attributes
            s = Variable(f"{node_name}_{arg}", attr=raw)
        if len(s.entries) != 1:
            raise Error(f"node '{node_name}' (op {op_name}): input '{arg}' must be a single-output symbol, "
                        f"got {len(s.entries)} outputs")
        inputs.append(s.entries[0])
        params.update(s.params)
    if positional:
        raise Error(f"node '{node_name}' (op {op_name}): {len(positional)} positional inputs too many "
                    f"(arguments: {arg_names})")
    if sym_kwargs:
        raise Error(f"node '{node_name}' (op {op_name}): unknown inputs {sorted(sym_kwargs)} "
                    f"(arguments: {arg_names + aux_names})")
    apply_compose_var_attrs(op_name, inputs)
    node = Node(op_name, node_name, raw, inputs)
    n_out = op.num_visible_outputs(attrs)
    return Symbol([(node, i) for i in range(n_out)], params)


def constructor(op_name: str):
    """A Python function building op `op_name`, named after it."""

    def build(*args, **kwargs):
        return create(op_name, *args, **kwargs)

    build.__name__ = op_name
    build.__doc__ = registry.get(op_name).doc or f"Apply the {op_name} operator."
    return build
