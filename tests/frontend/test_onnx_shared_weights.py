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
