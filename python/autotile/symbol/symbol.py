"""Symbol: the MXNet-1.x-style graph handle users compose (``autotile.sym``).

A Symbol is a list of output entries ``(Node, index)``; Nodes hold the op name, raw string
attributes (as MXNet's JSON does) and input entries. Variables are nodes with op ``null``.
A node's inputs are its op's arguments followed by its auxiliary states, as in MXNet.
"""
from __future__ import annotations

import itertools
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from ..errors import Error
from ..ops import registry

Entry = Tuple["Node", int]

#: What Symbol's methods that infer shapes and types, write JSON and apply operators call. The
#: modules above this one (infer, json_io, ops_api) take a Symbol as an argument and register
#: their functions here when imported (``autotile.symbol`` imports all of them), so this
#: module, the lowest of the four, imports none of them back.
METHODS: Dict[str, Callable] = {}


def implements(name: str) -> Callable[[Callable], Callable]:
    """Decorator of a function of a module above this one: Symbol's methods call it as `name`."""

    def register(fn: Callable) -> Callable:
        METHODS[name] = fn
        return fn

    return register


class Node:
    """One operator application (or a variable when ``op == "null"``)."""

    __slots__ = ("op", "name", "attrs", "inputs", "__weakref__")

    def __init__(self, op: str, name: str, attrs: Optional[Dict[str, str]] = None,
                 inputs: Optional[List[Entry]] = None):
        self.op = op
        self.name = name
        self.attrs = dict(attrs or {})
        self.inputs = list(inputs or [])

    @property
    def is_variable(self) -> bool:
        return self.op == "null"

    def opdef(self) -> registry.OpDef:
        return registry.get(self.op, self.name)

    def parsed_attrs(self) -> dict:
        return registry.parse_attrs(self.opdef(), self.attrs, self.name)

    def output_names(self) -> List[str]:
        if self.is_variable:
            return [self.name]
        return [f"{self.name}_{o}" for o in self.opdef().outputs(self.parsed_attrs())]

    def __repr__(self):
        return f"<Node {self.op} {self.name}>"


class _NameManager:
    """Automatic names like MXNet's: ``fullyconnected0``, ``fullyconnected1``..."""

    def __init__(self):
        self.counters: Dict[str, itertools.count] = {}

    def get(self, hint: str) -> str:
        hint = hint.lower()
        counter = self.counters.setdefault(hint, itertools.count())
        return f"{hint}{next(counter)}"


names = _NameManager()


def topo_sort(entries: Iterable[Entry]) -> List[Node]:
    """Nodes reachable from `entries` in post-order (inputs before users), deterministic."""
    order: List[Node] = []
    seen = set()
    for head, _ in entries:
        if id(head) in seen:
            continue
        stack = [(head, 0)]
        on_stack = {id(head)}
        while stack:
            node, i = stack.pop()
            if i < len(node.inputs):
                stack.append((node, i + 1))
                child = node.inputs[i][0]
                if id(child) in on_stack:
                    raise Error(f"symbol graph has a cycle through node '{child.name}'")
                if id(child) not in seen:
                    stack.append((child, 0))
                    on_stack.add(id(child))
            else:
                on_stack.discard(id(node))
                if id(node) not in seen:
                    seen.add(id(node))
                    order.append(node)
    return order


class Symbol:
    """A (multi-output) symbolic graph handle, MXNet 1.x compatible."""

    def __init__(self, entries: Sequence[Entry], params: Optional[dict] = None):
        self._entries: List[Entry] = list(entries)
        #: Parameters carried by the symbol (ONNX initializers, loaded .params): name -> ndarray.
        self.params: dict = dict(params or {})

    # ------------------------------------------------------------------ structure
    @property
    def entries(self) -> List[Entry]:
        return list(self._entries)

    @property
    def name(self) -> Optional[str]:
        if len(self._entries) != 1:
            return None
        return self._entries[0][0].name

    def topo_nodes(self) -> List[Node]:
        """All nodes in topological order (a fresh list; the order is computed once per Symbol:
        planning asks for it many times, and a Symbol's graph does not change after it is
        built)."""
        cached = self.__dict__.get("_topo")
        if cached is None:
            cached = self._topo = topo_sort(self._entries)
        return list(cached)

    def _aux_variable_ids(self) -> set:
        aux = set()
        for node in self.topo_nodes():
            if node.is_variable:
                continue
            op = node.opdef()
            attrs = node.parsed_attrs()
            nargs = len(op.arguments(attrs))
            for src, _ in node.inputs[nargs:]:
                aux.add(id(src))
        return aux

    def list_arguments(self) -> List[str]:
        aux = self._aux_variable_ids()
        return [n.name for n in self.topo_nodes() if n.is_variable and id(n) not in aux]

    def list_auxiliary_states(self) -> List[str]:
        aux = self._aux_variable_ids()
        return [n.name for n in self.topo_nodes() if n.is_variable and id(n) in aux]

    def list_inputs(self) -> List[str]:
        return [n.name for n in self.topo_nodes() if n.is_variable]

    def list_outputs(self) -> List[str]:
        return [node.output_names()[i] for node, i in self._entries]

    def get_internals(self) -> "Symbol":
        entries = []
        for node in self.topo_nodes():
            n_out = 1 if node.is_variable else node.opdef().num_visible_outputs(node.parsed_attrs())
            entries.extend((node, i) for i in range(n_out))
        return Symbol(entries, self.params)

    def get_children(self) -> Optional["Symbol"]:
        if len(self._entries) != 1 or not self._entries[0][0].inputs:
            return None
        return Symbol(self._entries[0][0].inputs)

    def __len__(self):
        return len(self._entries)

    def __iter__(self):
        return (Symbol([e], self.params) for e in self._entries)

    def __getitem__(self, key) -> "Symbol":
        if isinstance(key, str):
            names = self.list_outputs()
            matches = [i for i, n in enumerate(names) if n == key]
            if not matches:
                raise Error(f"no output named '{key}' (outputs: {names[:20]})")
            key = matches[0]
        if not -len(self._entries) <= key < len(self._entries):
            raise Error(f"output index {key} out of range ({len(self._entries)} outputs)")
        return Symbol([self._entries[key]], self.params)

    def attr(self, key: str) -> Optional[str]:
        if len(self._entries) != 1:
            return None
        return self._entries[0][0].attrs.get(key)

    def list_attr(self) -> Dict[str, str]:
        return dict(self._entries[0][0].attrs) if len(self._entries) == 1 else {}

    def __repr__(self):
        return f"<Symbol {self.name or 'group'} outputs={self.list_outputs()[:4]}>"

    # ------------------------------------------------------------------ inference
    def infer_shape(self, **shapes):
        """MXNet's infer_shape: returns (arg_shapes, out_shapes, aux_shapes) in list order.

        Raises Error naming the node, op and shapes at fault when shapes contradict, or
        naming the inputs whose shapes could not be deduced."""
        return METHODS["infer_shapes"](self, shapes, partial=False)

    def infer_shape_partial(self, **shapes):
        return METHODS["infer_shapes"](self, shapes, partial=True)

    def infer_type(self, **dtypes):
        return METHODS["infer_types"](self, dtypes)

    # ------------------------------------------------------------------ serialisation
    def tojson(self) -> str:
        """MXNet 1.x symbol JSON (nodes, arg_nodes, node_row_ptr, heads, attrs)."""
        return METHODS["to_json"](self)

    def save(self, fname: str) -> None:
        """Write the symbol JSON to `fname` (Error naming the file when it cannot be written)."""
        METHODS["save"](self, fname)

    # ------------------------------------------------------------------ arithmetic sugar
    def _binary(self, other, op: str, scalar_op: str, reverse: bool = False):
        create = METHODS["create"]
        if isinstance(other, Symbol):
            return create(op, other, self) if reverse else create(op, self, other)
        if isinstance(other, (int, float)):
            return create(scalar_op, self, scalar=float(other))
        return NotImplemented

    def __add__(self, other):
        return self._binary(other, "elemwise_add", "_plus_scalar")

    __radd__ = __add__

    def __sub__(self, other):
        return self._binary(other, "elemwise_sub", "_minus_scalar")

    def __rsub__(self, other):
        return self._binary(other, "elemwise_sub", "_rminus_scalar", reverse=True)

    def __mul__(self, other):
        return self._binary(other, "elemwise_mul", "_mul_scalar")

    __rmul__ = __mul__

    def __truediv__(self, other):
        return self._binary(other, "elemwise_div", "_div_scalar")

    def __neg__(self):
        return self * -1.0


def Variable(name: str, shape=None, dtype=None, lr_mult=None, wd_mult=None, init=None, attr=None, **kwargs) -> Symbol:
    """A named input (data, label or weight). `shape` is recorded as MXNet's __shape__."""
    if not isinstance(name, str) or not name:
        raise Error("Variable needs a non-empty string name")
    attrs = dict(attr or {})
    if shape is not None:
        attrs["__shape__"] = registry.format_value(tuple(shape))
    if dtype is not None:  # MXNet writes its dtype flag ("0" for float32)
        from ..dtype_flags import flag_or_name

        attrs["__dtype__"] = flag_or_name(dtype)
    if lr_mult is not None:
        attrs["__lr_mult__"] = str(lr_mult)
    if wd_mult is not None:
        attrs["__wd_mult__"] = str(wd_mult)
    if init is not None:
        attrs["__init__"] = str(init)
    for k, v in kwargs.items():
        attrs[f"__{k}__"] = str(v)
    return Symbol([(Node("null", name, attrs), 0)])


var = Variable


def Group(symbols: Sequence[Symbol]) -> Symbol:
    """One symbol whose outputs are the outputs of all `symbols`."""
    entries: List[Entry] = []
    params: dict = {}
    for s in symbols:
        entries.extend(s.entries)
        params.update(s.params)
    return Symbol(entries, params)
