"""MXNet symbol JSON: files written by MXNet 1.9 (Symbol.save, gluon export, an upgraded
0.8 file) load, round-trip exactly, and symbols built by the same code match MXNet's tojson."""
import copy
import json

import numpy as np
import pytest

import autotile as at
from autotile.errors import Error
from mxnet_fixtures import META, models, path, read_json, without_mkldnn_workspace

SYMBOL_FILES = ["mlp", "cnn", "cnn-train", "resblock", "lstm", "gluon", "shared"]


@pytest.mark.parametrize("name", SYMBOL_FILES)
def test_round_trip_is_exact(name, tmp_path):
    ref = read_json(f"{name}-symbol.json")
    sym = at.sym.load(path(f"{name}-symbol.json"))
    ours = json.loads(sym.tojson())
    want = without_mkldnn_workspace(ref)
    assert ours["nodes"] == want["nodes"]  # names, ops, attrs, inputs with versions, in order
    assert ours["heads"] == want["heads"]
    assert ours["arg_nodes"] == want["arg_nodes"]
    assert ours["node_row_ptr"] == want["node_row_ptr"]
    assert ours["attrs"] == want["attrs"]
    assert ours == want
    sym.save(str(tmp_path / "again-symbol.json"))
    again = at.sym.load(str(tmp_path / "again-symbol.json"))
    assert json.loads(again.tojson()) == ours


@pytest.mark.parametrize("name", sorted(models.BUILDERS) + ["cnn-train"] + sorted(models.JSON_ONLY))
def test_same_code_gives_mxnets_json(name):
    base, _, train = name.partition("-")
    build = {**models.BUILDERS, **models.JSON_ONLY}[base]
    sym = build(at.sym, train=bool(train))
    want = without_mkldnn_workspace(read_json(f"{name}-symbol.json"))
    ours = json.loads(sym.tojson())
    assert ours["nodes"] == want["nodes"]  # NNVM's DFS post-order, created variables' attrs
    assert ours == want


@pytest.mark.parametrize("name", sorted(META))
def test_lists_and_shapes_match_mxnet(name):
    meta = META[name]
    sym = at.sym.load(path(f"{name}-symbol.json"))
    assert sym.list_arguments() == meta["arguments"]
    assert sym.list_auxiliary_states() == meta["aux_states"]
    assert sym.list_outputs() == meta["outputs"]
    assert sym.get_internals().list_outputs() == meta["internals"]
    args, outs, aux = sym.infer_shape(**{k: tuple(v) for k, v in meta["input_shapes"].items()})
    assert [list(s) for s in args] == meta["arg_shapes"]
    assert [list(s) for s in outs] == meta["out_shapes"]
    assert [list(s) for s in aux] == meta["aux_shapes"]


def test_legacy_file_is_upgraded_as_mxnet_does():
    # param/attr keys, two-element entries, lr_mult -> __lr_mult__, weight_lr_mult moved to
    # fc1_weight, BatchNorm's missing moving_mean/moving_var added with __init__ hints
    sym = at.sym.load(path("legacy-symbol.json"))
    assert json.loads(sym.tojson()) == read_json("legacy-upgraded.json")


def test_hidden_outputs_are_counted_and_entry_versions_kept():
    doc = json.loads(at.sym.load(path("cnn-symbol.json")).tojson())
    counts = {n["name"]: b - a for n, a, b in zip(doc["nodes"], doc["node_row_ptr"], doc["node_row_ptr"][1:])}
    assert counts["bn1"] == 3 and counts["bn2"] == 3  # output, mean, var; one visible
    assert counts["drop"] == 2  # output, mask
    bn1 = next(n for n in doc["nodes"] if n["name"] == "bn1")
    assert [e[2] for e in bn1["inputs"]] == [0, 0, 0, 1, 1]  # mutated moving stats: version 1
    shared = json.loads(at.sym.load(path("shared-symbol.json")).tojson())
    bn_b = next(n for n in shared["nodes"] if n["name"] == "bn_b")
    assert [e[2] for e in bn_b["inputs"]][3:] == [2, 2]  # second mutation of the shared stats


def test_gluon_dtype_flags_and_variable_dtype():
    sym = at.sym.load(path("gluon-symbol.json"))
    _, out_types, _ = sym.infer_type(data="float32")
    assert [np.dtype(t) for t in out_types] == [np.float32]
    v = at.sym.Variable("x", shape=(2,), dtype="float16")
    assert v.list_attr()["__dtype__"] == "2"  # MXNet's flag for float16 (mshadow kFloat16)
    y = at.sym.Activation(v, act_type="relu", name="r")
    _, out_types, _ = y.infer_type()
    assert np.dtype(out_types[0]) == np.float16


# ----------------------------------------------------------------------------- errors

def small_doc():
    return {
        "nodes": [
            {"op": "null", "name": "data", "inputs": []},
            {"op": "null", "name": "fc1_weight", "inputs": []},
            {"op": "null", "name": "fc1_bias", "inputs": []},
            {"op": "FullyConnected", "name": "fc1", "attrs": {"num_hidden": "4"},
             "inputs": [[0, 0, 0], [1, 0, 0], [2, 0, 0]]},
            {"op": "Activation", "name": "relu1", "attrs": {"act_type": "relu"}, "inputs": [[3, 0, 0]]},
        ],
        "arg_nodes": [0, 1, 2],
        "node_row_ptr": [0, 1, 2, 3, 4, 5],
        "heads": [[4, 0, 0]],
        "attrs": {"mxnet_version": ["int", 10901]},
    }


def load_doc(doc):
    return at.sym.load_json(json.dumps(doc), "m-symbol.json")


def test_small_doc_loads():
    sym = load_doc(small_doc())
    assert sym.list_outputs() == ["relu1_output"]
    assert json.loads(sym.tojson()) == small_doc()


def mutated(fn):
    doc = copy.deepcopy(small_doc())
    fn(doc)
    return doc


@pytest.mark.parametrize("change, message", [
    (lambda d: d["nodes"][3].update(inputs=[[4, 0, 0], [1, 0, 0], [2, 0, 0]]),
     r"node 'fc1' input #0 references node #4, which is not an earlier node"),
    (lambda d: d["nodes"][4].update(op="NoSuchOp"), r"node 'relu1': unknown operator 'NoSuchOp'"),
    (lambda d: d["nodes"][3]["attrs"].update(num_hidden="four"),
     r"node 'fc1' \(op FullyConnected\): attribute 'num_hidden' has bad value 'four'"),
    (lambda d: d["nodes"][4]["attrs"].update(act_type="wiggle"), r"node 'relu1' \(op Activation\): attribute 'act_type'"),
    (lambda d: d["nodes"][3]["attrs"].update(bogus="1"), r"node 'fc1' \(op FullyConnected\): unknown attribute 'bogus'"),
    (lambda d: d["nodes"][3]["attrs"].update(num_hidden=4), r"node 'fc1' has attribute 'num_hidden' with a non-string"),
    (lambda d: d["nodes"][3].update(attrs=["num_hidden"]), r"node 'fc1' has 'attrs' that is not an object"),
    (lambda d: d["nodes"][4].update(inputs=[[3, 1, 0]]), r"node 'relu1' input #0 reads output 1 of node 'fc1'"),
    (lambda d: d["nodes"][4].update(inputs=[[3, 0]] * 2), r"node 'relu1' \(op Activation\) has 2 inputs, expected 1"),
    (lambda d: d["nodes"][3].update(inputs=[[0, 0, 0]]), r"node 'fc1' \(op FullyConnected\) has 1 inputs, expected 3"),
    (lambda d: d["nodes"][3].update(inputs=[[0, "a", 0]]), r"node 'fc1' input #0 has a malformed entry"),
    (lambda d: d["nodes"][1].update(inputs=[[0, 0, 0]]), r"variable node 'fc1_weight' has inputs"),
    (lambda d: d["nodes"][4].update(control_deps=[3]), r"node 'relu1' \(op Activation\) has control_deps"),
    (lambda d: d["nodes"][2].pop("name"), r"node #2 lacks a string 'op' or 'name'"),
    (lambda d: d.update(heads=[[9, 0, 0]]), r"head #0 references node #9"),
    (lambda d: d.update(heads=[]), r"'heads' must be a non-empty list"),
    (lambda d: d.update(arg_nodes=[3]), r"arg_nodes entry 3 is not the index of a variable node"),
    (lambda d: d.update(attrs={"mxnet_version": ["str", "1.9"]}), r"bad mxnet_version"),
    (lambda d: d.pop("nodes"), r"expected an object with 'nodes' and 'heads'"),
])
def test_bad_files_raise_errors_naming_the_fault(change, message):
    with pytest.raises(Error, match=r"symbol JSON 'm-symbol.json': " + message):
        load_doc(mutated(change))


def test_not_json_and_missing_file(tmp_path):
    with pytest.raises(Error, match="not valid JSON"):
        at.sym.load_json("{nodes: ", "x.json")
    with pytest.raises(Error, match="cannot read symbol file"):
        at.sym.load(str(tmp_path / "missing-symbol.json"))
