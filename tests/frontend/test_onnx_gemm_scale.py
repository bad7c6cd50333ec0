"""Gemm's alpha (and beta on a weight C) scales at run time; the weight trains as one tensor.

The importer used to fold ``alpha`` into a copy of B (``W_Tscaled`` = alpha * W^T) and ``beta``
into a copy of C: the copy was the Variable that trained, so its gradient was the gradient of
the copy (off by alpha), an SGD step moved alpha * W, and a W also read by a MatMul trained as
two tensors (issue 31). Now a weight's scaled reader multiplies the weight's one Variable by
alpha at run time. Oracles: a hand NumPy gradient and SGD step, 2 devices equal to 1
(float64), onnxruntime's forward and finite differences of onnxruntime's forward.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import autotile as at  # noqa: E402

RNG = np.random.default_rng(3131)


def _oriented(value: np.ndarray, shape: tuple) -> np.ndarray:
    return value.reshape(shape) if value.shape == shape or value.ndim == 1 else value.T


# ----------------------------------------------------------------------------- alpha + MatMul

def _shared_model(w: np.ndarray, c: np.ndarray):
    """h = 0.5 * X W^T + 0.75 * C (Gemm transB=1), Y = tanh(h) W (MatMul); float64."""
    nodes = [helper.make_node("Gemm", ["X", "W", "C"], ["h"], alpha=0.5, beta=0.75, transB=1),
             helper.make_node("Tanh", ["h"], ["t"]), helper.make_node("MatMul", ["t", "W"], ["Y"])]
    graph = helper.make_graph(nodes, "gemm_alpha_shared",
                              [helper.make_tensor_value_info("X", TensorProto.DOUBLE, [2, 4])],
                              [helper.make_tensor_value_info("Y", TensorProto.DOUBLE, [2, 4])],
                              [numpy_helper.from_array(w, "W"), numpy_helper.from_array(c, "C")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("c_shape", [(3,), (1, 3), (1,)])
def test_gemm_alpha_and_matmul_share_one_weight(c_shape):
    w = RNG.standard_normal((3, 4))
    c = RNG.standard_normal(c_shape)
    x = RNG.standard_normal((2, 4))
    sym = at.onnx.load(_shared_model(w, c))
    assert len([v for v in sym.params.values() if v.size == w.size]) == 1, sorted(sym.params)
    assert len([v for v in sym.params.values() if v.size == c.size]) == 1, sorted(sym.params)
    wname = next(k for k, v in sym.params.items() if v.size == w.size)
    cname = next(k for k, v in sym.params.items() if v.size == c.size)
    # the Variables hold the model's values, not alpha * W or beta * C
    np.testing.assert_array_equal(_oriented(sym.params[wname], w.shape), w)
    np.testing.assert_array_equal(sym.params[cname].reshape(c.shape), c)

    # by hand: d sum(Y) / dW through both readers, d sum(Y) / dC through beta
    h = 0.5 * x @ w.T + 0.75 * c.reshape(1, -1)  # C (1,) broadcasts over the 3 outputs
    t = np.tanh(h)
    y = t @ w
    dy = np.ones_like(y)
    dh = (dy @ w.T) * (1 - t ** 2)
    dw = t.T @ dy + 0.5 * dh.T @ x
    dc = 0.75 * (dh.sum(axis=0) if c.size == 3 else dh.sum(keepdims=True)).reshape(c.shape)

    lr = 0.1
    res = at.backend.run(sym, inputs={"X": x}, train=True, optimizer="sgd", optimizer_args={"lr": lr})
    np.testing.assert_allclose(res.outputs[0], y, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_oriented(res.grads[wname], w.shape), dw, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(res.grads[cname].reshape(c.shape), dc, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_oriented(res.params[wname], w.shape), w - lr * dw, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(res.params[cname].reshape(c.shape), c - lr * dc, rtol=1e-10, atol=1e-12)

    two = at.backend.run(sym, devices=2, inputs={"X": x}, train=True, optimizer="sgd", optimizer_args={"lr": lr})
    np.testing.assert_allclose(two.outputs[0], res.outputs[0], rtol=1e-12, atol=1e-12)
    for name in (wname, cname):
        np.testing.assert_allclose(two.grads[name], res.grads[name], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(two.params[name], res.params[name], rtol=1e-12, atol=1e-12)


def test_matmul_first_then_gemm_alpha_share_one_weight():
    """The MatMul reads W first (its Variable holds W^T); Gemm(alpha=0.5, transB=1) then gets
    transpose + _mul_scalar of it."""
    w, x = RNG.standard_normal((3, 4)), RNG.standard_normal((2, 3))
    nodes = [helper.make_node("MatMul", ["X", "W"], ["h"]), helper.make_node("Tanh", ["h"], ["t"]),
             helper.make_node("Gemm", ["t", "W"], ["Y"], alpha=0.5, transB=1)]
    graph = helper.make_graph(nodes, "matmul_then_gemm", [helper.make_tensor_value_info("X", TensorProto.DOUBLE, [2, 3])],
                              [helper.make_tensor_value_info("Y", TensorProto.DOUBLE, [2, 3])],
                              [numpy_helper.from_array(w, "W")])
    sym = at.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert len([v for v in sym.params.values() if v.size == w.size]) == 1, sorted(sym.params)
    name = next(k for k, v in sym.params.items() if v.size == w.size)
    t = np.tanh(x @ w)
    dy = np.ones((2, 3))
    dh = (0.5 * dy @ w) * (1 - t ** 2)
    dw = 0.5 * dy.T @ t + x.T @ dh
    res = at.backend.run(sym, inputs={"X": x}, train=True, optimizer="sgd", optimizer_args={"lr": 0.1})
    np.testing.assert_allclose(res.outputs[0], 0.5 * t @ w.T, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_oriented(res.grads[name], w.shape), dw, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_oriented(res.params[name], w.shape), w - 0.1 * dw, rtol=1e-10, atol=1e-12)
    two = at.backend.run(sym, devices=2, inputs={"X": x}, train=True, optimizer="sgd", optimizer_args={"lr": 0.1})
    np.testing.assert_allclose(two.params[name], res.params[name], rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------- alpha alone

def _alpha_model(w: np.ndarray, elem):
    """Y = tanh(2 * X W) (Gemm alpha=2, transB=0)."""
    nodes = [helper.make_node("Gemm", ["X", "W"], ["h"], alpha=2.0), helper.make_node("Tanh", ["h"], ["Y"])]
    graph = helper.make_graph(nodes, "gemm_alpha", [helper.make_tensor_value_info("X", elem, [3, 4])],
                              [helper.make_tensor_value_info("Y", elem, [3, 5])], [numpy_helper.from_array(w, "W")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _ort(model, x: np.ndarray) -> np.ndarray:
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"X": x})[0]


def test_gemm_alpha_forward_equals_onnxruntime():
    w = RNG.standard_normal((4, 5)).astype(np.float32) * 0.5
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    model = _alpha_model(w, TensorProto.FLOAT)
    res = at.backend.run(at.onnx.load(model), inputs={"X": x}, train=False)
    np.testing.assert_allclose(res.outputs[0], _ort(model, x), rtol=1e-5, atol=1e-6)


def test_gemm_alpha_weight_gradient_equals_finite_differences():
    w = RNG.standard_normal((4, 5)) * 0.5
    x = RNG.standard_normal((3, 4))
    sym = at.onnx.load(_alpha_model(w, TensorProto.DOUBLE))
    name = next(k for k, v in sym.params.items() if v.size == w.size)
    assert len([v for v in sym.params.values() if v.size == w.size]) == 1, sorted(sym.params)
    np.testing.assert_array_equal(_oriented(sym.params[name], w.shape), w)  # W (as W^T), not 2 * W^T
    res = at.backend.run(sym, inputs={"X": x}, train=True)
    eps = 1e-6
    fd = np.zeros_like(w)
    for idx in np.ndindex(*w.shape):  # central differences of sum(Y) on onnxruntime's forward
        up, down = w.copy(), w.copy()
        up[idx] += eps
        down[idx] -= eps
        fd[idx] = (_ort(_alpha_model(up, TensorProto.DOUBLE), x).sum()
                   - _ort(_alpha_model(down, TensorProto.DOUBLE), x).sum()) / (2 * eps)
    np.testing.assert_allclose(_oriented(res.grads[name], w.shape), fd, rtol=1e-6, atol=1e-8)
