"""Inputs that used to give a wrong result without a word (issue #25): token ids outside the
vocabulary or negative under ONNX Gather semantics (checked against onnxruntime), float ids
for an integer input, a plan for another batch, a repeated mesh axis, a plan JSON whose mesh
or cut_axes do not match its cuts, an empty schedule order, an unknown export granularity."""
import json

import numpy as np
import pytest

import autotile as at
from autotile.planner.plan import Plan
from hostile_util import raises_naming
from subprocess_util import run_cli

VOCAB, WIDTH = 5, 3
TABLE = np.arange(VOCAB * WIDTH, dtype=np.float32).reshape(VOCAB, WIDTH)


def _ort_gather(ids, table_is_input=False):
    """onnxruntime's Gather(axis 0) of TABLE at `ids` (the table an initializer, or a graph input)."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    inputs = [helper.make_tensor_value_info("ids", TensorProto.INT64, list(ids.shape))]
    init = [numpy_helper.from_array(TABLE, "w")]
    if table_is_input:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, list(TABLE.shape)))
        init = []
    graph = helper.make_graph([helper.make_node("Gather", ["w", "ids"], ["y"], axis=0)], "gather", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {"ids": ids, **({"w": TABLE} if table_is_input else {})}
    return model, sess.run(None, feeds)[0]


def _gather_symbol(op):
    ids = at.sym.Variable("ids", shape=(2, 3), dtype="int64")
    w = at.sym.Variable("w", shape=TABLE.shape)
    if op == "Embedding":
        return at.sym.Embedding(ids, w, input_dim=VOCAB, output_dim=WIDTH, mode="raise", name="emb")
    return at.sym.take(w, ids, axis=0, mode="raise", name="emb")


VALID = np.array([[0, -1, 4], [-5, 2, 1]], dtype=np.int64)  # -1 is the last row, -5 the first


@pytest.mark.parametrize("op", ["Embedding", "take"])
@pytest.mark.parametrize("devices", [1, 2])
def test_onnx_gather_ids_match_onnxruntime(op, devices):
    _, ref = _ort_gather(VALID)
    res = at.backend.run(_gather_symbol(op), devices=devices, inputs={"ids": VALID}, params={"w": TABLE})
    np.testing.assert_array_equal(res.outputs[0], ref)
    # the gradient scatters to the rows read: -1 and 4 are both row 4, -5 and 0 both row 0
    res = at.backend.run(_gather_symbol(op), devices=devices, inputs={"ids": VALID}, params={"w": TABLE},
                         train=True, head_grads=[np.ones(ref.shape, np.float32)])
    counts = np.bincount(np.where(VALID < 0, VALID + VOCAB, VALID).ravel(), minlength=VOCAB)
    np.testing.assert_array_equal(res.grads["w"], np.repeat(counts[:, None], WIDTH, 1).astype(np.float32))


@pytest.mark.parametrize("op", ["Embedding", "take"])
@pytest.mark.parametrize("bad", [5, -6, 1000])
def test_onnx_gather_out_of_range_ids_are_errors_as_in_onnxruntime(op, bad):
    ids = VALID.copy()
    ids[1, 2] = bad
    with pytest.raises(Exception, match="out of data bounds|out of range|invalid"):
        _ort_gather(ids)  # onnxruntime refuses it too
    raises_naming(lambda: at.backend.run(_gather_symbol(op), devices=2, inputs={"ids": ids}, params={"w": TABLE}),
                  "input 'ids'", str(bad), "emb", f"[-{VOCAB}, {VOCAB})")


@pytest.mark.parametrize("op", ["Embedding", "take"])
def test_float_ids_that_are_not_integers_are_errors(op):
    ids = VALID.astype(np.float64)
    ids[0, 1] = 3.5
    raises_naming(lambda: at.backend.run(_gather_symbol(op), devices=1, inputs={"ids": ids}, params={"w": TABLE}),
                  "'ids'", "3.5", "not an integer")
    ids[0, 1] = np.nan
    raises_naming(lambda: at.backend.run(_gather_symbol(op), devices=1, inputs={"ids": ids}, params={"w": TABLE}),
                  "'ids'", "nan")
    # integral floats are the ids they spell
    _, ref = _ort_gather(VALID)
    res = at.backend.run(_gather_symbol(op), devices=2, inputs={"ids": VALID.astype(np.float32)}, params={"w": TABLE})
    np.testing.assert_array_equal(res.outputs[0], ref)


def test_computed_out_of_range_ids_are_refused_by_the_kernel():
    """Ids that are not a model input (computed) reach the kernel, which names the op and value."""
    ids = at.sym.Variable("ids", shape=(2, 3))
    shifted = at.sym.Embedding(ids + 10, at.sym.Variable("w", shape=TABLE.shape), input_dim=VOCAB,
                               output_dim=WIDTH, mode="raise", name="emb")
    raises_naming(lambda: at.backend.run(shifted, inputs={"ids": np.zeros((2, 3), np.float32)}, params={"w": TABLE}),
                  "Embedding", "index 10", "out of range")


def _onnx_file(tmp_path, table_is_input):
    onnx = pytest.importorskip("onnx")
    model, _ = _ort_gather(VALID, table_is_input)
    path = tmp_path / "gather.onnx"
    onnx.save(model, str(path))
    return str(path)


def _importer_follows_onnx_semantics(sym) -> bool:
    return all(n.parsed_attrs().get("mode") == "raise" for n in sym.topo_nodes() if n.op in ("Embedding", "take"))


@pytest.mark.parametrize("table_is_input", [False, True])
def test_imported_onnx_gather_follows_onnxruntime(tmp_path, table_is_input):
    path = _onnx_file(tmp_path, table_is_input)
    sym = at.onnx.load(path)
    if not _importer_follows_onnx_semantics(sym):
        pytest.xfail("the ONNX importer (frontend/onnx_ops.py, Gather) does not yet pass mode='raise' "
                     "to Embedding/take (issue #25; the kernels support it)")
    feeds = {"ids": VALID, **({"w": TABLE} if table_is_input else {})}
    _, ref = _ort_gather(VALID, table_is_input)
    np.testing.assert_array_equal(at.backend.run(sym, devices=2, inputs=feeds).outputs[0], ref)
    bad = {**feeds, "ids": np.where(VALID == 4, VOCAB, VALID)}
    raises_naming(lambda: at.backend.run(sym, devices=2, inputs=bad), "'ids'", str(VOCAB))


# ----------------------------------------------------------------------------- plans

def _fc(batch=None):
    data = at.sym.Variable("data", shape=(batch, 6)) if batch else at.sym.Variable("data")
    label = at.sym.Variable("softmax_label", shape=(batch,)) if batch else at.sym.Variable("softmax_label")
    return at.sym.SoftmaxOutput(at.sym.FullyConnected(data, num_hidden=4, name="fc"), label, name="softmax")


@pytest.fixture(scope="module")
def doc():
    return json.loads(at.plan(_fc(), devices=4, shapes={"data": (8, 6), "softmax_label": (8,)}).to_json())


def test_a_plan_for_batch_64_is_refused_for_the_model_at_batch_32():
    plan = at.plan(_fc(64), devices=2)
    assert at.transform(_fc(64), plan).devices == 2
    raises_naming(lambda: at.transform(_fc(32), plan), "another batch", "'data'", "(64, 6)", "(32, 6)")
    # the zoo's model built for one batch and a plan for another
    p64 = at.plan("mlp-2-16", devices=2, batch=64)
    raises_naming(lambda: at.transform(at.models.get("mlp-2-16", batch=32), p64), "another batch", "64", "32")
    # ... and what at.plan(batch=) overrides stays allowed: the plan remembers the declared shape
    p16 = at.plan(_fc(32), devices=2, batch=16)
    assert at.transform(_fc(32), p16).devices == 2
    assert at.transform(_fc(32), Plan.from_json(p16.to_json())).devices == 2


def test_a_repeated_mesh_axis_is_refused():
    raises_naming(lambda: at.plan(_fc(8), mesh="batch=2,batch=4"), "batch", "twice")
    proc = run_cli("plan", "mlp-2-16", "--mesh", "batch=2,batch=4")
    assert proc.returncode == 2 and "batch" in proc.stderr and "twice" in proc.stderr, proc.stderr
    raises_naming(lambda: Plan.from_json(json.dumps({"format": "autotile-plan-1"})[:-1]
                                         + ', "mesh": {"batch": 2, "batch": 4}}'), "batch", "twice")
    raises_naming(lambda: at.planner.layout_rules.parse_rule("fc_weight:0=batch,0=model"), "dimension 0", "twice")


def test_plan_json_whose_mesh_does_not_multiply_to_its_devices(doc):
    raises_naming(lambda: Plan.from_json(json.dumps({**doc, "mesh": {"batch": 3}})), "mesh", "3", "devices=4")
    two_axes = {**doc, "mesh": {"batch": 2, "model": 2}, "cut_axes": ["batch", "batch"]}
    raises_naming(lambda: Plan.from_json(json.dumps(two_axes)), "batch", "multiply to 4", "size 2")


def test_plan_json_with_more_devices_than_autotile_plans_for(doc):
    huge = 2 ** 61 - 1
    raises_naming(lambda: Plan.from_json(json.dumps({**doc, "devices": huge, "factors": [huge],
                                                     "mesh": {"devices": huge}, "cut_axes": ["devices"]})),
                  "devices", "4096", str(huge))


def test_plan_json_whose_cut_axes_is_shorter_than_its_cuts(doc):
    raises_naming(lambda: Plan.from_json(json.dumps({**doc, "cut_axes": ["devices"]})), "cut_axes", "2 cuts")


def test_an_empty_schedule_order_is_refused(doc):
    plan = Plan.from_json(json.dumps(doc))
    raises_naming(lambda: at.transform(_fc(), plan, order=[]), "order", "0 nodes given")


def test_an_unknown_export_granularity_is_refused(doc):
    plan = Plan.from_json(json.dumps(doc))
    for export in (plan.to_dtensor, plan.to_jax):
        raises_naming(lambda: export(granularity="bogus"), "granularity", "'bogus'")
    assert plan.to_dtensor(granularity="cut")["mesh"]["shape"] == [2, 2]
