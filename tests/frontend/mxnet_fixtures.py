"""Access to tests/fixtures/mxnet (written by MXNet, see generate.py there)."""
import importlib.util
import json
import os

FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "mxnet")


def path(name: str) -> str:
    return os.path.join(FIX, name)


def _load_models():
    spec = importlib.util.spec_from_file_location("mxnet_fixture_models", path("models.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: the builders shared with generate.py (same code for mxnet.sym and autotile.sym)
models = _load_models()

with open(path("meta.json")) as _f:
    #: what MXNet said about every symbol file (lists, inferred shapes)
    META = json.load(_f)


def read_json(name: str) -> dict:
    with open(path(name)) as f:
        return json.load(f)


def without_mkldnn_workspace(doc: dict) -> dict:
    """`doc` with node_row_ptr as a build of MXNet without MKLDNN writes it.

    The MXNet that wrote the fixtures uses MKLDNN, whose max Pooling has a second, hidden
    workspace output; autotile's Pooling (like MXNet's own kernel) has one output. This is
    the one difference from MXNet's files that autotile cannot avoid."""
    out = dict(doc)
    counts = [b - a for a, b in zip(doc["node_row_ptr"], doc["node_row_ptr"][1:])]
    for i, node in enumerate(doc["nodes"]):
        if node["op"] == "Pooling" and node.get("attrs", {}).get("pool_type", "max") == "max" and counts[i] == 2:
            counts[i] = 1
    row_ptr = [0]
    for c in counts:
        row_ptr.append(row_ptr[-1] + c)
    out["node_row_ptr"] = row_ptr
    return out
