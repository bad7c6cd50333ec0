"""Shape and dtype inference over a Symbol, MXNet style."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ..dtype_flags import dtype_name
from ..errors import Error
from ..ops import registry
from .symbol import Node, Symbol, implements

Shape = Tuple[int, ...]


def _declared_shape(node: Node) -> Optional[Shape]:
    text = node.attrs.get("__shape__")
    if text is None:
        return None
    shape = registry._parse_shape(text)
    if not shape or any(d is None or d <= 0 for d in shape):  # MXNet writes 0 for unknown dims
        return None
    return tuple(shape)


def _variables_by_name(nodes) -> Dict[str, object]:
    """The symbol's Variables by name; Error naming the name when two different Variables
    share it (names identify inputs and weights, so MXNet refuses this at bind too: one
    would get the other's value)."""
    by_name: Dict[str, object] = {}
    for n in nodes:
        if n.is_variable and by_name.setdefault(n.name, n) is not n:
            raise Error(f"the symbol has two different Variables named '{n.name}': names identify inputs and "
                        f"weights; rename one, or use the same Variable for both uses")
    return by_name


def infer_entry_shapes(sym: Symbol, shapes: Dict[str, Shape], partial: bool = False) -> Dict[Tuple[int, int], Shape]:
    """Shapes of every entry (id(node), output index) reachable from `sym`.

    Variables take their shape from `shapes`, else from their __shape__ attribute, else from
    what the consuming op deduces (weights). Raises Error on contradictions."""
    nodes = sym.topo_nodes()
    known: Dict[Tuple[int, int], Shape] = {}
    by_name = _variables_by_name(nodes)
    for name, shape in shapes.items():
        if name not in by_name:
            raise Error(f"infer_shape: '{name}' is not an input of the symbol (inputs: {sorted(by_name)[:30]})")
        try:
            known[(id(by_name[name]), 0)] = tuple(int(d) for d in shape)
        except (TypeError, ValueError):
            raise Error(f"infer_shape: shape of '{name}' must be a tuple of ints, got {shape!r}") from None
    for n in nodes:
        if n.is_variable and (id(n), 0) not in known:
            declared = _declared_shape(n)
            if declared is not None:
                known[(id(n), 0)] = declared
    for node in nodes:
        if node.is_variable:
            continue
        op = node.opdef()
        attrs = node.parsed_attrs()
        in_shapes = [known.get((id(src), i)) for src, i in node.inputs]
        if op.infer_shape is None:
            raise Error(f"node '{node.name}' (op {node.op}) has no shape inference")
        try:
            result = op.infer_shape(attrs, list(in_shapes))
        except (Error, ValueError, IndexError, TypeError, ZeroDivisionError) as e:
            if partial and any(s is None for s in in_shapes):
                continue  # not enough known yet: partial inference leaves this node out
            if isinstance(e, Error):
                msg = str(e) if f"'{node.name}'" in str(e) else f"node '{node.name}' (op {node.op}): {e}"
                raise Error(msg) from None
            shown = ", ".join(str(s) for s in in_shapes)
            raise Error(f"node '{node.name}' (op {node.op}): shape inference failed for input shapes [{shown}]: {e}") from None
        new_in, out = result[0], result[1]
        if len(new_in) != len(node.inputs):
            raise Error(f"node '{node.name}' (op {node.op}): expects {len(new_in)} inputs, got {len(node.inputs)}")
        for (src, i), old, new in zip(node.inputs, in_shapes, new_in):
            if new is None:
                continue
            new = tuple(int(d) for d in new)
            if old is not None and tuple(old) != new:
                raise Error(f"node '{node.name}' (op {node.op}): input '{src.name}' has shape {tuple(old)} "
                            f"but the op needs {new}")
            known[(id(src), i)] = new
        for i, s in enumerate(out):
            if s is not None:
                known[(id(node), i)] = tuple(int(d) for d in s)
    return known


@implements("infer_shapes")
def infer_shapes(sym: Symbol, shapes: Dict[str, Shape], partial: bool = False):
    known = infer_entry_shapes(sym, shapes, partial)
    nodes = sym.topo_nodes()
    by_name = {n.name: n for n in nodes if n.is_variable}

    def lookup(names: List[str]):
        result = []
        for name in names:
            s = known.get((id(by_name[name]), 0))
            if s is None and not partial:
                raise Error(f"infer_shape: cannot deduce the shape of input '{name}'; pass it, e.g. {name}=(...)")
            result.append(s)
        return result

    arg_shapes = lookup(sym.list_arguments())
    aux_shapes = lookup(sym.list_auxiliary_states())
    out_shapes = []
    for node, i in sym.entries:
        s = known.get((id(node), i))
        if s is None and not partial:
            raise Error(f"infer_shape: cannot deduce the shape of output {i} of node '{node.name}'")
        out_shapes.append(s)
    return arg_shapes, out_shapes, aux_shapes


def infer_entry_types(sym: Symbol, dtypes: Dict[str, str]) -> Dict[Tuple[int, int], str]:
    """Dtype (NumPy name) of every entry; float32 wherever nothing says otherwise."""
    import numpy as np

    known: Dict[Tuple[int, int], str] = {}
    nodes = sym.topo_nodes()
    for n in nodes:
        if n.is_variable:
            if n.name in dtypes:
                known[(id(n), 0)] = str(np.dtype(dtypes[n.name]))
            elif "__dtype__" in n.attrs:
                known[(id(n), 0)] = dtype_name(n.attrs["__dtype__"])  # MXNet flag or NumPy name
    for node in nodes:
        if node.is_variable:
            continue
        op = node.opdef()
        attrs = node.parsed_attrs()
        in_types = [known.get((id(src), i)) for src, i in node.inputs]
        new_in, out = op.infer_type(attrs, in_types)
        for (src, i), t in zip(node.inputs, new_in):
            if t is not None and (id(src), i) not in known:
                known[(id(src), i)] = t
        n_out = op.num_outputs(attrs)
        if out is None:
            first = next((t for t in new_in if t is not None), "float32")
            out = [first] * n_out
        for i, t in enumerate(out):
            known[(id(node), i)] = t
    for n in nodes:
        if n.is_variable:
            known.setdefault((id(n), 0), "float32")
    return known


@implements("infer_types")
def infer_types(sym: Symbol, dtypes: Dict[str, str]):
    known = infer_entry_types(sym, dtypes)
    nodes = {n.name: n for n in sym.topo_nodes() if n.is_variable}
    args = [known[(id(nodes[n]), 0)] for n in sym.list_arguments()]
    aux = [known[(id(nodes[n]), 0)] for n in sym.list_auxiliary_states()]
    outs = [known[(id(n), i)] for n, i in sym.entries]
    return args, outs, aux
