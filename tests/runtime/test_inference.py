"""Partitioned inference: ``backend.run(model, devices=k, train=False)`` plans the forward graph
alone and runs it on the host runtime; its outputs equal the single-device forward (and
onnxruntime's, for ONNX models) on 2, 4 and 8 devices."""
import os
import sys

import numpy as np
import pytest

import autotile as at

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "frontend"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "models"))
from test_transformer_zoo import TINY as TRANSFORMERS  # noqa: E402  (the zoo's tiny Transformer sizes)

DEVICES = (2, 4, 8)


def _values(sym, seed=0):
    """Random inputs for every argument and aux state: labels and token ids in range, BatchNorm
    moving variances positive, weights scaled by fan-in so activations stay O(1)."""
    rng = np.random.default_rng(seed)
    arg_shapes, out_shapes, aux_shapes = sym.infer_shape()
    vocab = {n.inputs[0][0].name: n.parsed_attrs()["input_dim"] for n in sym.topo_nodes()
             if n.op == "Embedding" and n.inputs[0][0].is_variable}
    vals = {}
    for name, shape in zip(sym.list_arguments() + sym.list_auxiliary_states(), arg_shapes + aux_shapes):
        if name.endswith("label"):
            vals[name] = rng.integers(0, out_shapes[0][-1], size=shape).astype(np.float32)
        elif name in vocab:
            vals[name] = rng.integers(0, vocab[name], size=shape).astype(np.float32)
        elif name.endswith("moving_var"):
            vals[name] = rng.uniform(0.5, 1.5, shape).astype(np.float32)
        else:
            fan_in = int(np.prod(shape[1:])) if len(shape) > 1 and name != "data" else 1
            vals[name] = (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)
    return vals


def _bn_cnn(batch=8):
    x = at.sym.Variable("data", shape=(batch, 3, 8, 8))
    h = at.sym.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=8, name="conv1")
    h = at.sym.BatchNorm(h, fix_gamma=False, name="bn1")
    h = at.sym.Activation(h, act_type="relu", name="relu1")
    h = at.sym.Dropout(h, p=0.5, name="drop1")  # identity in inference
    h = at.sym.Pooling(h, kernel=(2, 2), stride=(2, 2), pool_type="avg", name="pool1")
    h = at.sym.FullyConnected(at.sym.Flatten(h, name="flat"), num_hidden=5, name="fc")
    return at.sym.SoftmaxOutput(h, at.sym.Variable("softmax_label", shape=(batch,)), name="softmax")


MODELS = {
    "mlp": lambda: at.models.mlp(16, layers=3, hidden=64, classes=10),
    "alexnet-small": lambda: at.models.alexnet(8, classes=10, image=67),
    "rnn": lambda: at.models.rnn(2, 16, steps=3, batch=8, vocab=20),
    "bn-cnn": _bn_cnn,
}


def _assert_forward_only(plan):
    assert plan.train is False
    bwd = [n for n, op in plan.node_ops.items() if op.startswith("_backward") or op.endswith("_update")]
    assert not bwd, f"an inference plan holds backward/update nodes {bwd[:5]}"
    assert not any(t.endswith("_grad") for t in plan.tensor_tilings)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_partitioned_inference_equals_one_device(name):
    sym = MODELS[name]()
    vals = _values(sym)
    ref = at.backend.run(sym, inputs=vals)
    for devices in DEVICES:
        res = at.backend.run(sym, devices=devices, inputs=vals)
        _assert_forward_only(res.plan)
        assert len(res.outputs) == len(ref.outputs)
        for got, want in zip(res.outputs, ref.outputs):
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6, err_msg=f"{name} on {devices} devices")
        # inference leaves the BatchNorm statistics as they were, on one device and on k
        assert sorted(res.aux) == sorted(ref.aux)
        for k in ref.aux:
            np.testing.assert_array_equal(res.aux[k], vals[k])
        assert not res.grads and not res.params
        assert res.stats["bytes"] == pytest.approx(res.plan.comm_bytes)


@pytest.mark.parametrize("name", sorted(TRANSFORMERS))
def test_transformer_inference_equals_one_device(name):
    sym = at.models.get(name, **TRANSFORMERS[name])
    vals = _values(sym)
    want = at.backend.run(sym, inputs=vals).outputs
    for devices in DEVICES:
        res = at.backend.run(sym, devices=devices, inputs=vals)
        _assert_forward_only(res.plan)
        assert len(res.outputs) == len(want)
        for got, w in zip(res.outputs, want):
            np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-6, err_msg=f"{name} on {devices} devices")


def test_inference_plan_is_the_forward_graph_and_round_trips():
    sym = MODELS["alexnet-small"]()
    infer = at.plan(sym, devices=4, train=False)
    train = at.plan(sym, devices=4)
    _assert_forward_only(infer)
    assert set(infer.node_strategies) < set(train.node_strategies)
    assert "inference" in infer.summary().splitlines()[0]
    again = at.Plan.from_json(infer.to_json())
    assert again.train is False
    vals = _values(sym)
    res = at.backend.run(sym, devices=4, inputs=vals, plan=again)
    np.testing.assert_allclose(res.outputs[0], at.backend.run(sym, inputs=vals).outputs[0], rtol=1e-4, atol=1e-6)


def test_plan_made_for_the_other_mode_is_refused():
    sym = MODELS["mlp"]()
    vals = _values(sym)
    with pytest.raises(at.Error, match=r"made for training .*train=False"):
        at.backend.run(sym, devices=2, inputs=vals, plan=at.plan(sym, devices=2))
    with pytest.raises(at.Error, match=r"made for inference .*train=True"):
        at.backend.run(sym, devices=2, inputs=vals, train=True, plan=at.plan(sym, devices=2, train=False))


def _onnx_cnn(batch=4):
    """Conv -> BatchNormalization -> Relu -> MaxPool -> Flatten -> Gemm -> Softmax with its
    own weights (an ONNX classifier as exporters write one)."""
    from onnx import helper
    from onnx_models import make_model

    rng = np.random.default_rng(1)
    inits = {
        "w": (rng.standard_normal((6, 3, 3, 3)) / np.sqrt(27)).astype(np.float32),
        "b": rng.standard_normal(6).astype(np.float32) * 0.1,
        "scale": rng.uniform(0.5, 1.5, 6).astype(np.float32), "shift": rng.standard_normal(6).astype(np.float32),
        "mean": rng.standard_normal(6).astype(np.float32) * 0.1, "var": rng.uniform(0.5, 1.5, 6).astype(np.float32),
        "fc_w": (rng.standard_normal((7, 6 * 4 * 4)) / np.sqrt(96)).astype(np.float32),
        "fc_b": rng.standard_normal(7).astype(np.float32) * 0.1,
    }
    nodes = [
        helper.make_node("Conv", ["input", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["n"], name="bn"),
        helper.make_node("Relu", ["n"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], transB=1, name="fc"),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=1, name="softmax"),
    ]
    return make_model(nodes, {"input": (batch, 3, 8, 8)}, ["probs"], inits, opset=13)


def test_onnx_model_partitioned_inference_equals_onnxruntime():
    pytest.importorskip("onnxruntime")
    from onnx_models import run_ort

    model = _onnx_cnn()
    x = np.random.default_rng(2).standard_normal((4, 3, 8, 8)).astype(np.float32)
    want = run_ort(model, {"input": x})[0]
    sym = at.onnx.load(model)
    inputs = {sym.onnx_names["input"]: x}
    one = at.backend.run(sym, inputs=inputs).outputs[0]
    np.testing.assert_allclose(one, want, rtol=1e-4, atol=1e-6)
    for devices in DEVICES:
        res = at.backend.run(sym, devices=devices, inputs=inputs)  # the model's own weights
        _assert_forward_only(res.plan)
        np.testing.assert_allclose(res.outputs[0], want, rtol=1e-4, atol=1e-6, err_msg=f"{devices} devices")
        np.testing.assert_allclose(res.outputs[0], one, rtol=1e-5, atol=1e-7)
