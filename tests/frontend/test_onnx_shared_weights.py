"""An ONNX initializer read by several nodes is one weight: the importer's derived copy of it
(MatMul's constant B becomes a FullyConnected weight B^T) is made once and shared, so a training
step updates it once with the summed gradient. The dynamo exporter writes ALBERT's shared layer
this way (tests/fixtures/onnx_torch/albert_dynamo20); before, each MatMul trained its own copy."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import autotile as at  # noqa: E402


def _shared_matmul_model(w: np.ndarray):
    """Y = relu(X . W) . W with one initializer W."""
    nodes = [helper.make_node("MatMul", ["X", "W"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "W"], ["Y"])]
    graph = helper.make_graph(nodes, "shared", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 4])],
                              [numpy_helper.from_array(w, "W")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_one_initializer_two_matmuls_trains_one_weight(tmp_path):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 4)).astype(np.float32)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    path = str(tmp_path / "shared.onnx")
    onnx.save(_shared_matmul_model(w), path)
    sym = at.onnx.load(path)
    trained = [k for k in sym.params if k not in sym.list_auxiliary_states()]
    assert len(trained) == 1, trained
    res = at.backend.run(sym, inputs={"X": x}, train=True)
    (name,) = res.grads
    # NumPy oracle for d sum(Y) / dW, both uses of W summed; the trained weight holds W^T
    h = x @ w
    dy = np.ones((2, 4), np.float32)
    dh = (dy @ w.T) * (h > 0)
    dw = np.maximum(h, 0).T @ dy + x.T @ dh
    np.testing.assert_allclose(res.grads[name], dw.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(res.outputs[0], np.maximum(h, 0) @ w, rtol=1e-5, atol=1e-5)


def _two_layernorms(identity: bool):
    """Two LayerNorms with scales/biases of equal values: one initializer pair read by both,
    the second through Identity (as the TorchScript exporter writes parameters it found equal)
    when `identity`, else directly."""
    second = ["ln2.weight", "ln2.bias"] if identity else ["ln.weight", "ln.bias"]
    nodes = ([helper.make_node("Identity", ["ln.weight"], ["ln2.weight"]),
              helper.make_node("Identity", ["ln.bias"], ["ln2.bias"])] if identity else [])
    nodes += [helper.make_node("LayerNormalization", ["X", "ln.weight", "ln.bias"], ["h"], axis=-1),
              helper.make_node("Mul", ["h", "X"], ["hx"]),
              helper.make_node("LayerNormalization", ["hx"] + second, ["Y"], axis=-1)]
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "ln.weight"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "ln.bias")]
    graph = helper.make_graph(nodes, "ln2", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [3, 4])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [3, 4])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _two_matmuls(identity: bool):
    """ALBERT's TorchScript export: a shared layer's weight read by its first use directly and
    by the next through Identity (`identity`), or directly by both."""
    nodes = [helper.make_node("Identity", ["W"], ["W2"])] if identity else []
    nodes += [helper.make_node("MatMul", ["X", "W"], ["h"]), helper.make_node("Tanh", ["h"], ["t"]),
              helper.make_node("MatMul", ["t", "W2" if identity else "W"], ["Y"])]
    w = np.random.default_rng(4).standard_normal((4, 4)).astype(np.float32)
    graph = helper.make_graph(nodes, "mm2", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [3, 4])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [3, 4])],
                              [numpy_helper.from_array(w, "W")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("build", [_two_layernorms, _two_matmuls])
def test_identity_of_a_weight_is_the_weight(tmp_path, build):
    """Identity(W) is W: one weight (and one derived copy, MatMul's W^T) with the gradients of
    both uses, as the same file without the Identity (was: a constant copy of W that no step
    trained, so the second LayerNorm or ALBERT's second layer application kept its values)."""
    x = np.random.default_rng(0).standard_normal((3, 4))
    results, names = {}, {}
    for identity in (True, False):
        path = str(tmp_path / f"{build.__name__}_{identity}.onnx")
        onnx.save(build(identity), path)
        sym = at.onnx.load(path)
        names[identity] = sorted(sym.params)
        results[identity] = at.backend.run(sym, inputs={"X": x}, train=True,
                                           head_grads=[np.cos(np.arange(12.0)).reshape(3, 4)])
    assert names[True] == names[False]
    for name in names[True]:
        np.testing.assert_allclose(results[True].grads[name], results[False].grads[name], rtol=1e-6)
        np.testing.assert_allclose(results[True].params[name], results[False].params[name], rtol=1e-6)
