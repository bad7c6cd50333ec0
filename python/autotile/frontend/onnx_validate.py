"""Structural checks of an ONNX graph before it is imported.

ONNX requires static single assignment (every tensor written once), unique graph inputs and
node arities within the operator's schema; files that break these rules would otherwise be
imported silently with one of the conflicting meanings. Each violation is an Error naming the
tensor or node.
"""
from __future__ import annotations

from typing import Dict

from ..errors import Error


def _node_label(node, index: int) -> str:
    return f"'{node.name or (node.output[0] if node.output else index)}' ({node.op_type})"


def _check_inputs(graph):
    seen: Dict[str, object] = {}
    for vi in graph.input:
        if vi.name in seen and seen[vi.name] != vi.type:
            raise Error(f"ONNX graph input '{vi.name}' is declared twice with different types or shapes")
        seen[vi.name] = vi.type
    return set(seen)


def _check_ssa(graph, inputs: set):
    written: Dict[str, str] = {}
    initializers = {t.name for t in graph.initializer}
    for index, node in enumerate(graph.node):
        for out in node.output:
            if not out:
                continue
            label = _node_label(node, index)
            if out in written:
                raise Error(f"ONNX tensor '{out}' is written by two nodes, {written[out]} and {label}; "
                            f"ONNX graphs assign each tensor once")
            if out in inputs or out in initializers:
                kind = "graph input" if out in inputs else "initializer"
                raise Error(f"ONNX node {label} writes '{out}', which is also a {kind}")
            written[out] = label


#: most inputs one node may have: an operator's TDL description holds at most 2^16 tensors,
#: inputs and output together (kMaxTensors in csrc/tdl/tdl_parser.cc)
MAX_NODE_INPUTS = (1 << 16) - 1


def _check_arity(graph, opset: int):
    from onnx import defs

    for index, node in enumerate(graph.node):
        if len(node.input) > MAX_NODE_INPUTS:
            raise Error(f"ONNX node {_node_label(node, index)} has {len(node.input)} inputs; autotile operators "
                        f"take at most {MAX_NODE_INPUTS} (an operator's TDL description holds at most "
                        f"{MAX_NODE_INPUTS + 1} tensors)")
        domain = "" if node.domain == "ai.onnx" else node.domain
        try:
            schema = defs.get_schema(node.op_type, opset, domain)
        except Exception:  # unknown op or domain: the importer lists it as unsupported
            continue
        n_in, n_out = len(node.input), len(node.output)
        if n_in > schema.max_input or n_out > schema.max_output:
            raise Error(f"ONNX node {_node_label(node, index)} has {n_in} inputs and {n_out} outputs; "
                        f"{node.op_type}-{schema.since_version} takes at most {schema.max_input} inputs and "
                        f"{schema.max_output} outputs")
        present = sum(1 for x in node.input if x)
        if n_in < schema.min_input and present < schema.min_input:
            raise Error(f"ONNX node {_node_label(node, index)} has {n_in} inputs; {node.op_type}-"
                        f"{schema.since_version} needs at least {schema.min_input}")
        single = defs.OpSchema.FormalParameterOption.Single
        for i, (name, formal) in enumerate(zip(node.input, schema.inputs)):
            if not name and formal.option == single:  # "" marks an omitted input: only optional ones
                raise Error(f"ONNX node {_node_label(node, index)} leaves out its input {i} "
                            f"('{formal.name}'), which {node.op_type}-{schema.since_version} requires")


def validate(model, opset: int):
    """Raise Error if `model`'s main graph breaks SSA, declares an input twice with different
    types, or has a node with more (or fewer) inputs/outputs than its operator takes, or one
    that leaves out (names as "") an input its operator requires."""
    graph = model.graph
    inputs = _check_inputs(graph)
    _check_ssa(graph, inputs)
    _check_arity(graph, opset)
