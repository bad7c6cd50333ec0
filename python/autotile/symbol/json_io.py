"""MXNet 1.x symbol JSON: read and write what ``Symbol.save()`` / ``tojson()`` and gluon's
``HybridBlock.export()`` write, and read older files.

The file is NNVM's graph JSON (nnvm/src/pass/saveload_json.cc)::

    {"nodes": [{"op": "null" | OpName, "name": ..., "attrs": {str: str}, "inputs": [[node, output, version], ...]}, ...],
     "arg_nodes": [indices of the variable nodes],
     "node_row_ptr": [prefix sums of every node's output count, hidden outputs included],
     "heads": [[node, output, version], ...],
     "attrs": {"mxnet_version": ["int", 10901]}}

Nodes come in NNVM's DFS post-order (inputs in order, before their users), which is the
order :meth:`Symbol.topo_nodes` gives, so a saved file lists nodes as MXNet would. The
``version`` of an entry counts how often an op has mutated a variable (BatchNorm's moving
statistics get 1); versions read from a file are kept for the round trip, others are
computed as NNVM does on compose.

Older files are upgraded as MXNet's legacy_json_util.cc does: op parameters under ``param``
and attributes under ``attr`` (MXNet < 0.9), two-element entries, unprefixed hidden keys
(``lr_mult`` -> ``__lr_mult__``, ``weight_lr_mult`` on an op -> ``__lr_mult__`` on its weight
variable), missing auxiliary-state variables (< 0.9.0), initializer hints on BatchNorm's
statistics (< 0.9.4) and argmax/argmin's ``axis=-1`` (< 0.9.5).
"""
from __future__ import annotations

import json
import os
import weakref
from typing import Dict, List, Tuple

from ..errors import Error
from ..ops import registry
from .symbol import Node, Symbol, implements, topo_sort

MXNET_VERSION = 10901  # what we write: MXNet 1.9.1, MXNET_MAKE_VERSION(1, 9, 1)
LEGACY_VERSION = 800  # a file without mxnet_version is from MXNet 0.8.0

#: Attribute keys MXNet < 1.0 wrote without underscores (c_api_common.h kHiddenKeys).
HIDDEN_KEYS = ("ctx_group", "lr_mult", "wd_mult", "force_mirroring", "mirror_stage")

_ZERO_INIT = '["zero", {}]'
_ONE_INIT = '["one", {}]'
#: MXNet's FSetInputVarAttrOnCompose: op -> {input index: {attr: value}}, set on a variable
#: input that has no ``__init__`` yet when the op is composed.
COMPOSE_VAR_ATTRS: Dict[str, Dict[int, Dict[str, str]]] = {
    "BatchNorm": {3: {"__init__": _ZERO_INIT}, 4: {"__init__": _ONE_INIT}},
    "_contrib_SyncBatchNorm": {3: {"__init__": _ZERO_INIT}, 4: {"__init__": _ONE_INIT}},
    "LeakyReLU": {1: {"__init__": '["Constant", {"value": 0.25}]'}},
}

# Entry versions read from a file, kept for the round trip: node -> one version per input,
# symbol -> one version per head.
_INPUT_VERSIONS: "weakref.WeakKeyDictionary[Node, Tuple[int, ...]]" = weakref.WeakKeyDictionary()
_HEAD_VERSIONS: "weakref.WeakKeyDictionary[Symbol, Tuple[int, ...]]" = weakref.WeakKeyDictionary()


def apply_compose_var_attrs(op_name: str, inputs: List[Tuple[Node, int]]) -> None:
    """Set the attributes MXNet sets on variable inputs when composing `op_name` (BatchNorm's
    moving_mean/moving_var get ``__init__``), unless a variable has an ``__init__`` already."""
    table = COMPOSE_VAR_ATTRS.get(op_name)
    if not table:
        return
    for index, (src, _) in enumerate(inputs):
        if index in table and src.is_variable and "__init__" not in src.attrs:
            src.attrs.update(table[index])


def _num_outputs(node: Node) -> int:
    return 1 if node.is_variable else node.opdef().num_outputs(node.parsed_attrs())


def _mutated_inputs(node: Node) -> range:
    """Input positions an op mutates (its auxiliary states, MXNet's FMutateInputs)."""
    if node.is_variable:
        return range(0)
    op = node.opdef()
    attrs = node.parsed_attrs()
    n_args = len(op.arguments(attrs))
    return range(n_args, n_args + len(op.aux(attrs)))


# ----------------------------------------------------------------------------- writing

def to_dict(sym: Symbol) -> dict:
    """The symbol as the JSON object MXNet's ``tojson()`` writes (before text encoding)."""
    nodes = sym.topo_nodes()
    index = {id(n): i for i, n in enumerate(nodes)}
    var_version: Dict[int, int] = {}
    out_nodes = []
    row_ptr = [0]
    for n in nodes:
        versions = _INPUT_VERSIONS.get(n)
        if versions is None or len(versions) != len(n.inputs):
            computed = []
            mutated = _mutated_inputs(n)
            for pos, (src, _) in enumerate(n.inputs):
                if pos in mutated and src.is_variable:  # NNVM bumps the variable's version
                    var_version[id(src)] = var_version.get(id(src), 0) + 1
                    computed.append(var_version[id(src)])
                else:
                    computed.append(0)
            versions = tuple(computed)
        entry = {"op": n.op, "name": n.name}
        if n.attrs:
            entry["attrs"] = dict(n.attrs)
        entry["inputs"] = [[index[id(src)], i, v] for (src, i), v in zip(n.inputs, versions)]
        out_nodes.append(entry)
        row_ptr.append(row_ptr[-1] + _num_outputs(n))
    head_versions = _HEAD_VERSIONS.get(sym)
    if head_versions is None or len(head_versions) != len(sym.entries):
        head_versions = (0,) * len(sym.entries)
    return {
        "nodes": out_nodes,
        "arg_nodes": [i for i, n in enumerate(nodes) if n.is_variable],
        "node_row_ptr": row_ptr,
        "heads": [[index[id(n)], i, v] for (n, i), v in zip(sym.entries, head_versions)],
        "attrs": {"mxnet_version": ["int", MXNET_VERSION]},
    }


@implements("to_json")
def to_json(sym: Symbol) -> str:
    """MXNet 1.x symbol JSON text of `sym` (what ``Symbol.tojson()`` returns)."""
    return json.dumps(to_dict(sym), indent=2)


# ----------------------------------------------------------------------------- reading

class _Loader:
    def __init__(self, source: str):
        self.where = f" '{source}'" if source else ""

    def fail(self, msg: str):
        raise Error(f"symbol JSON{self.where}: {msg}")

    def entry(self, raw, what: str, nodes: List[Node], limit: int) -> Tuple[Node, int, int]:
        """(node, output index, version) of a [node, index(, version)] entry."""
        if (not isinstance(raw, list) or len(raw) not in (2, 3)
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in raw)):
            self.fail(f"{what} has a malformed entry {raw!r} (expected [node, output, version])")
        src, idx = raw[0], raw[1]
        version = raw[2] if len(raw) == 3 else 0
        if not 0 <= src < limit:
            self.fail(f"{what} references node #{src}, which is not an earlier node "
                      f"(nodes must come before their users; there are {limit} before it)")
        if idx < 0 or version < 0:
            self.fail(f"{what} has a negative output index or version in {raw!r}")
        return nodes[src], idx, version

    def check_output(self, node: Node, idx: int, what: str) -> None:
        n_out = _num_outputs(node)
        if idx >= n_out:
            self.fail(f"{what} reads output {idx} of node '{node.name}' (op {node.op}), "
                      f"which has {n_out} output(s)")

    def attrs(self, raw: dict, name: str) -> Dict[str, str]:
        """NNVM's reading: 'attrs' and 'attr' fill one dict (the later key replaces it),
        'param' (MXNet < 0.9) adds keys not already there."""
        out: Dict[str, str] = {}
        param: Dict[str, str] = {}
        for key in ("attrs", "attr", "param"):
            if key not in raw:
                continue
            value = raw[key]
            if not isinstance(value, dict):
                self.fail(f"node '{name}' has '{key}' that is not an object: {value!r}")
            for k, v in value.items():
                if not isinstance(v, str):
                    self.fail(f"node '{name}' has attribute '{k}' with a non-string value {v!r} "
                              f"(MXNet writes every attribute as a string)")
        for key, value in raw.items():  # in file order, as NNVM's reader sees them
            if key in ("attrs", "attr"):
                out = dict(value)
            elif key == "param":
                param = dict(value)
        for k, v in param.items():
            out.setdefault(k, v)
        return out


def _fix_hidden_keys(node: Node) -> None:
    """MXNet's UpgradeJSON_FixParsing: unprefixed hidden keys become ``__key__``; an op's
    ``<arg>_<key>`` moves to the variable feeding that argument."""
    if not any(h in k for k in node.attrs for h in HIDDEN_KEYS):
        return
    kept: Dict[str, str] = {}
    for key, value in node.attrs.items():
        for h in HIDDEN_KEYS:
            pos = key.rfind(h)
            if pos == 0 or (pos > 0 and pos == len(key) - len(h)):
                break
        else:
            kept[key] = value
            continue
        placed = False
        for h in HIDDEN_KEYS:
            pos = key.rfind(h)
            if pos == 0 and len(h) == len(key):
                kept[f"__{h}__"] = value
                placed = True
                break
            if pos > 1 and pos == len(key) - len(h):
                if not node.is_variable and registry.exists(node.op):
                    op = node.opdef()
                    attrs = registry.parse_attrs(op, {k: v for k, v in node.attrs.items()
                                                      if not any(x in k for x in HIDDEN_KEYS)}, node.name)
                    names = op.arguments(attrs) + op.aux(attrs)
                    arg = key[:pos - 1]
                    if arg in names and names.index(arg) < len(node.inputs):
                        src = node.inputs[names.index(arg)][0]
                        if src.is_variable:
                            src.attrs[f"__{h}__"] = value
                            placed = True
                break
        if not placed:
            kept[key] = value
    node.attrs = kept


def _add_missing_aux(node: Node) -> None:
    """MXNet < 0.9 did not store auxiliary-state variables: add ``<node>_<aux>`` variables
    carrying a copy of the node's attributes (UpgradeJSON_000800_000900)."""
    if node.is_variable:
        return
    op = node.opdef()
    attrs = node.parsed_attrs()
    names = op.arguments(attrs) + op.aux(attrs)
    added = len(names) - len(node.inputs)
    for i in range(len(node.inputs), len(names)):
        var_name = f"{node.name}_{names[i]}" if node.name else names[i]
        node.inputs.append((Node("null", var_name, dict(node.attrs)), 0))
    if added > 0 and node in _INPUT_VERSIONS:  # MXNet's upgrade leaves these at version 0
        _INPUT_VERSIONS[node] = _INPUT_VERSIONS[node] + (0,) * added


def _upgrade(nodes: List[Node], version: int) -> None:
    order = topo_sort([(n, 0) for n in nodes])
    if version < MXNET_VERSION:
        for n in order:
            _fix_hidden_keys(n)
    if version < 900:
        for n in order:
            _add_missing_aux(n)
    if version < 904:
        for n in order:
            if not n.is_variable:
                apply_compose_var_attrs(n.op, n.inputs)
    if version < 905:
        for n in order:
            if n.op in ("argmax", "argmin") and n.attrs.get("axis") == "-1":
                del n.attrs["axis"]


def _version_of(doc: dict, ld: _Loader) -> int:
    attrs = doc.get("attrs", {})
    if not isinstance(attrs, dict):
        ld.fail(f"top-level 'attrs' is not an object: {attrs!r}")
    raw = attrs.get("mxnet_version")
    if raw is None:
        return LEGACY_VERSION
    if (not isinstance(raw, list) or len(raw) != 2 or raw[0] != "int"
            or not isinstance(raw[1], int)):
        ld.fail(f"bad mxnet_version {raw!r} (expected [\"int\", N])")
    return raw[1]


#: Integer attributes beyond int64 cannot reach the core (num_hidden=2**70).
_INT64_MAX = 2 ** 63 - 1


def _too_big(value) -> bool:
    if isinstance(value, int) and not isinstance(value, bool):
        return abs(value) > _INT64_MAX
    if isinstance(value, (tuple, list)):
        return any(_too_big(v) for v in value)
    return False


def _check_node_attrs(n: Node, ld: "_Loader") -> None:
    """Validate a node's attributes now, naming the node and the attribute: an op's attributes
    must parse and fit int64, a variable's ``__shape__`` must be a shape of int64 dims."""
    if n.is_variable:
        text = n.attrs.get("__shape__")
        if text is None:
            return
        try:
            shape = registry._parse_shape(text)
        except (ValueError, RecursionError, MemoryError, TypeError):
            shape = None
        if shape is None or _too_big(shape) or any(d is not None and d < -1 for d in shape):  # -1: unknown
            ld.fail(f"variable '{n.name}': attribute __shape__={str(text)[:80]!r} is not a shape "
                    f"(a tuple of non-negative int64 dims)")
        return
    try:
        attrs = n.parsed_attrs()  # raises Error naming the node, op and attribute
    except (RecursionError, MemoryError):
        ld.fail(f"node '{n.name}' (op {n.op}): an attribute is nested too deeply to parse")
    for key, value in attrs.items():
        if _too_big(value):
            ld.fail(f"node '{n.name}' (op {n.op}): attribute {key}={str(n.attrs.get(key, value))[:80]} "
                    f"does not fit int64")


def from_dict(doc, source: str = "") -> Symbol:
    """Symbol from the parsed JSON object of an MXNet symbol file."""
    ld = _Loader(source)
    try:
        return _from_dict(doc, ld)
    except Error as e:  # errors from attribute parsing name the node; add the file
        msg = str(e)
        if msg.startswith("symbol JSON"):
            raise
        raise Error(f"symbol JSON{ld.where}: {msg}") from None


def _from_dict(doc, ld: _Loader) -> Symbol:
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list) or "heads" not in doc:
        ld.fail("expected an object with 'nodes' and 'heads' (an MXNet symbol file)")
    version = _version_of(doc, ld)
    nodes: List[Node] = []
    for i, raw in enumerate(doc["nodes"]):
        if not isinstance(raw, dict) or not isinstance(raw.get("op"), str) or not isinstance(raw.get("name"), str):
            ld.fail(f"node #{i} lacks a string 'op' or 'name'")
        name, op = raw["name"], raw["op"]
        for key in ("control_deps", "subgraphs"):
            if raw.get(key):
                ld.fail(f"node '{name}' (op {op}) has {key}, which autotile does not support")
        if op != "null" and not registry.exists(op):
            ld.fail(f"node '{name}': unknown operator '{op}'")
        raw_inputs = raw.get("inputs", [])
        if not isinstance(raw_inputs, list):
            ld.fail(f"node '{name}' has 'inputs' that is not a list")
        if op == "null" and raw_inputs:
            ld.fail(f"variable node '{name}' has inputs")
        entries = [ld.entry(e, f"node '{name}' input #{k}", nodes, i) for k, e in enumerate(raw_inputs)]
        node = Node(op, name, ld.attrs(raw, name), [(src, idx) for src, idx, _ in entries])
        _INPUT_VERSIONS[node] = tuple(v for _, _, v in entries)
        nodes.append(node)
    if not isinstance(doc["heads"], list) or not doc["heads"]:
        ld.fail("'heads' must be a non-empty list of [node, output, version] entries")
    heads = [ld.entry(h, f"head #{k}", nodes, len(nodes)) for k, h in enumerate(doc["heads"])]
    arg_nodes = doc.get("arg_nodes", [])
    if not isinstance(arg_nodes, list):
        ld.fail("'arg_nodes' is not a list")
    for a in arg_nodes:
        if not isinstance(a, int) or not 0 <= a < len(nodes) or not nodes[a].is_variable:
            ld.fail(f"arg_nodes entry {a!r} is not the index of a variable node")
    _upgrade(nodes, version)
    for n in nodes:
        _check_node_attrs(n, ld)
    for n in nodes:
        for k, (src, idx) in enumerate(n.inputs):
            ld.check_output(src, idx, f"node '{n.name}' input #{k}")
    for k, (src, idx, _) in enumerate(heads):
        ld.check_output(src, idx, f"head #{k}")
    for n in nodes:
        if not n.is_variable:
            op = n.opdef()
            attrs = n.parsed_attrs()
            names = op.arguments(attrs) + op.aux(attrs)
            if len(n.inputs) != len(names):
                ld.fail(f"node '{n.name}' (op {n.op}) has {len(n.inputs)} inputs, expected "
                        f"{len(names)} ({', '.join(names)})")
    sym = Symbol([(n, i) for n, i, _ in heads])
    if any(v for _, _, v in heads):
        _HEAD_VERSIONS[sym] = tuple(v for _, _, v in heads)
    return sym


def load_json(text: str, source: str = "") -> Symbol:
    """Symbol from MXNet symbol JSON text; Error naming the node at fault on bad input."""
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, TypeError) as e:
        raise Error(f"symbol JSON{' ' + repr(source) if source else ''}: not valid JSON: {e}") from None
    except RecursionError:  # the decoder recurses once per nesting level
        raise Error(f"symbol JSON{' ' + repr(source) if source else ''}: nested too deeply "
                    "(a symbol file is a flat list of nodes)") from None
    return from_dict(doc, source)


def load(fname: str) -> Symbol:
    """Symbol from an MXNet ``-symbol.json`` file (``Symbol.save`` / gluon ``export`` output),
    a path or an open file descriptor (left open: it is the caller's)."""
    if isinstance(fname, bool) or not isinstance(fname, (str, bytes, int, os.PathLike)):
        raise Error(f"sym.load needs a file path, got {type(fname).__name__}")
    from ..file_read import read_regular_file

    data = read_regular_file(fname, "symbol file")  # not a FIFO or /dev/zero: no hang, no unbounded read
    source = str(fname) if isinstance(fname, int) else os.fsdecode(fname)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Error(f"cannot read symbol file '{source}': {e}") from None
    return load_json(text, source)


@implements("save")
def save(sym: Symbol, fname: str) -> None:
    """Write `sym` as an MXNet symbol JSON file."""
    if isinstance(fname, bool) or not isinstance(fname, (str, bytes, os.PathLike)):
        raise Error(f"sym.save needs a file path, got {type(fname).__name__}")
    try:
        with open(fname, "w", encoding="utf-8") as f:
            f.write(to_json(sym))
    except OSError as e:
        raise Error(f"cannot write symbol file '{fname}': {e}") from None
