"""MXNet 1.x symbol JSON: read (new ``attrs`` and older ``attr``/``param`` keys) and write."""
from __future__ import annotations

import json
from typing import List

from ..errors import Error
from .symbol import Node, Symbol

MXNET_VERSION = 10901


def to_json(sym: Symbol) -> str:
    nodes = sym.topo_nodes()
    index = {id(n): i for i, n in enumerate(nodes)}
    out_nodes = []
    row_ptr = [0]
    for n in nodes:
        entry = {"op": n.op, "name": n.name}
        if n.attrs:
            entry["attrs"] = dict(n.attrs)
        entry["inputs"] = [[index[id(src)], i, 0] for src, i in n.inputs]
        out_nodes.append(entry)
        row_ptr.append(row_ptr[-1] + (1 if n.is_variable else n.opdef().num_outputs(n.parsed_attrs())))
    doc = {
        "nodes": out_nodes,
        "arg_nodes": [i for i, n in enumerate(nodes) if n.is_variable],
        "node_row_ptr": row_ptr,
        "heads": [[index[id(n)], i, 0] for n, i in sym.entries],
        "attrs": {"mxnet_version": ["int", MXNET_VERSION]},
    }
    return json.dumps(doc, indent=2)


def _fail(where: str, msg: str):
    raise Error(f"symbol JSON{where}: {msg}")


def load_json(text: str, source: str = "") -> Symbol:
    """Symbol from MXNet symbol JSON text; Error naming the node at fault on bad input."""
    where = f" '{source}'" if source else ""
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, TypeError) as e:
        _fail(where, f"not valid JSON: {e}")
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list) or "heads" not in doc:
        _fail(where, "expected an object with 'nodes' and 'heads' (an MXNet symbol file)")
    nodes: List[Node] = []
    for i, raw in enumerate(doc["nodes"]):
        if not isinstance(raw, dict) or "op" not in raw or "name" not in raw:
            _fail(where, f"node #{i} lacks 'op' or 'name'")
        attrs = raw.get("attrs", raw.get("attr", raw.get("param"))) or {}
        if not isinstance(attrs, dict):
            _fail(where, f"node '{raw['name']}' has attributes that are not an object")
        inputs = []
        for inp in raw.get("inputs", []):
            if not isinstance(inp, list) or len(inp) < 2 or not all(isinstance(v, int) for v in inp[:2]):
                _fail(where, f"node '{raw['name']}' has a malformed input {inp!r}")
            src, idx = inp[0], inp[1]
            if not 0 <= src < i:
                _fail(where, f"node '{raw['name']}' reads node #{src}, which is not an earlier node")
            inputs.append((nodes[src], idx))
        nodes.append(Node(str(raw["op"]), str(raw["name"]), {str(k): str(v) for k, v in attrs.items()}, inputs))
    heads = []
    for h in doc["heads"]:
        if not isinstance(h, list) or len(h) < 2 or not isinstance(h[0], int) or not 0 <= h[0] < len(nodes):
            _fail(where, f"malformed head {h!r}")
        heads.append((nodes[h[0]], h[1]))
    sym = Symbol(heads)
    for n in sym.topo_nodes():
        if not n.is_variable:
            n.parsed_attrs()  # validates op name and attributes now, naming the node
    return sym


def load(fname: str) -> Symbol:
    """Symbol from an MXNet ``-symbol.json`` file."""
    try:
        with open(fname) as f:
            text = f.read()
    except OSError as e:
        raise Error(f"cannot read symbol file '{fname}': {e}") from None
    return load_json(text, fname)
