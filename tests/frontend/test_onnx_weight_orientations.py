"""One ONNX initializer read in two orientations trains as one weight (issue 31, section 2).

``Gemm(transB=1)`` reads W (out, in) as stored; ``MatMul`` reads it as (in, out), which the
importer turns into a FullyConnected weight W^T. Before, the importer made W^T a second
Variable (``W_T``): two tensors, each trained on its own part of the gradient. Now the later
reader's orientation is an op on the first reader's Variable, so one weight gets the summed
gradient. Oracle: the hand-written NumPy gradient of sum(Y), one SGD step, and 2 devices
equal to 1.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import autotile as at  # noqa: E402

RNG = np.random.default_rng(31)
W = RNG.standard_normal((3, 4)).astype(np.float32)


def _model(order: str, reshape: bool = False):
    """gemm_first: h = X W^T (Gemm transB=1), Y = tanh(h) W (MatMul).
    matmul_first: h = X W (MatMul), Y = tanh(h) W^T (Gemm transB=1).
    With `reshape`, a third reader sees W through Reshape to (12,) then (4, 3)."""
    if order == "gemm_first":
        nodes = [helper.make_node("Gemm", ["X", "W"], ["h"], transB=1), helper.make_node("Tanh", ["h"], ["t"]),
                 helper.make_node("MatMul", ["t", "W"], ["Y"])]
        x, y = [2, 4], [2, 4]
    else:
        nodes = [helper.make_node("MatMul", ["X", "W"], ["h"]), helper.make_node("Tanh", ["h"], ["t"]),
                 helper.make_node("Gemm", ["t", "W"], ["Y"], transB=1)]
        x, y = [2, 3], [2, 3]
    graph = helper.make_graph(nodes, "orient", [helper.make_tensor_value_info("X", TensorProto.FLOAT, x)],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, y)],
                              [numpy_helper.from_array(W, "W")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _numpy_grad(order: str, x: np.ndarray):
    """d sum(Y) / dW (3, 4), both readers summed, computed by hand."""
    w = W.astype(np.float64)
    x = x.astype(np.float64)
    if order == "gemm_first":
        t = np.tanh(x @ w.T)                      # (2, 3)
        dy = np.ones((2, 4))
        dt = dy @ w.T
        dh = dt * (1 - t ** 2)
        return t.T @ dy + dh.T @ x, t @ w
    t = np.tanh(x @ w)                            # (2, 4)
    dy = np.ones((2, 3))
    dt = dy @ w
    dh = dt * (1 - t ** 2)
    return dy.T @ t + x.T @ dh, t @ w.T


def _as_w(value: np.ndarray) -> np.ndarray:
    """The trained tensor in W's (3, 4) orientation (it may be stored as W^T)."""
    return value if value.shape == W.shape else value.T


@pytest.mark.parametrize("order", ["gemm_first", "matmul_first"])
def test_one_weight_trains_once_on_the_summed_gradient(order):
    sym = at.onnx.load(_model(order))
    trained = [k for k, v in sym.params.items() if v.size == W.size]
    assert len(trained) == 1, sorted(sym.params)  # not W and a derived W_T
    x = RNG.standard_normal((2, 4 if order == "gemm_first" else 3)).astype(np.float32)
    dw, y = _numpy_grad(order, x)
    lr = 0.1
    res = at.backend.run(sym, inputs={"X": x}, train=True, optimizer="sgd", optimizer_args={"lr": lr})
    np.testing.assert_allclose(res.outputs[0], y, rtol=1e-5, atol=1e-5)
    (name,) = trained
    np.testing.assert_allclose(_as_w(res.grads[name]), dw, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(_as_w(res.params[name]), W - lr * dw, rtol=1e-4, atol=1e-5)
    two = at.backend.run(sym, devices=2, inputs={"X": x}, train=True, optimizer="sgd", optimizer_args={"lr": lr})
    np.testing.assert_allclose(two.grads[name], res.grads[name], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(two.params[name], res.params[name], rtol=1e-5, atol=1e-6)
