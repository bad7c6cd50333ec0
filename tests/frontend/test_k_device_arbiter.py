"""The fixture tests' k-devices-equal-1 check and its float64 arbiter (issue 31, section 5):
a float32 rounding flip at a ReLU kink fails the float32 comparison on a correct plan, and the
arbiter (float64, strict) passes it; a wrong k-device step still fails, in float64 too."""
import copy

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import autotile as at
from k_device_arbiter import assert_k_equals_1, compare_step

K = 4
#: first rows of x whose ReLU input is float32(3e-8) > 0 exactly and 0 or 3e-8 in float32,
#: depending on the order of the sum (BLAS on 1 device, a partial sum per device on 4)
KINK_ROWS = ([1, 0, 3e-8, -1], [0.5, 0.5, 3e-8, -1], [1, 3e-8, -1, 0], [1, -1, 3e-8, 0])


@pytest.fixture(scope="module")
def kink_model(tmp_path_factory):
    """x (2, K) @ w1 (K, 1) -> Relu -> @ w2 (1, 1): one ReLU whose input is 3e-8 exactly."""
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["z"], name="fc1"), helper.make_node("Relu", ["z"], ["a"], name="relu"),
         helper.make_node("MatMul", ["a", "w2"], ["y"], name="fc2")],
        "kink", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1])],
        initializer=[numpy_helper.from_array(np.ones((K, 1), np.float32), "w1"),
                     numpy_helper.from_array(np.full((1, 1), 2.0, np.float32), "w2")])
    path = tmp_path_factory.mktemp("kink") / "kink.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return at.onnx.load(str(path))


def _runner(sym, row, devices=4, corrupt=False):
    # the plan sums the ReLU input over the devices (w1 split along K): another order than BLAS
    plan = at.plan(sym, devices=devices, layout={sym.onnx_names["w1"]: {1: "devices"}})
    x = np.array([row, [1.0] * K], np.float32)

    def run(float64):
        dtype = np.float64 if float64 else np.float32
        params = {k: np.asarray(v, dtype) for k, v in sym.params.items()}
        inputs = {"x": x.astype(dtype)}
        ref = at.backend.run(sym, inputs=inputs, params=params, train=True)
        res = at.backend.run(sym, devices=devices, inputs=inputs, params=params, train=True,
                             plan=plan)
        if corrupt:  # a k-device step that is wrong in any precision (a lost partial sum)
            res = copy.copy(res)
            res.grads = dict(res.grads, **{p: g * 0.5 for p, g in res.grads.items()})
        return ref, res
    return run


def _flipping_row(sym):
    for row in KINK_ROWS:
        ref, res = _runner(sym, row)(False)
        try:
            compare_step(ref, res, "float32")
        except AssertionError:
            return row
    pytest.skip("no float32 kink flip with this machine's BLAS summation order")


def test_float32_kink_flip_is_settled_in_float64(kink_model):
    row = _flipping_row(kink_model)  # the float32 comparison alone fails this correct plan
    ref, res = _runner(kink_model, row)(True)
    compare_step(ref, res, "float64", float64=True)  # 4 devices equal 1 in float64
    assert assert_k_equals_1(_runner(kink_model, row), "kink") == "float64"


def test_agreeing_float32_steps_need_no_arbiter(kink_model):
    assert assert_k_equals_1(_runner(kink_model, [1.0, 2.0, 3.0, 4.0]), "no kink") == "float32"


def test_a_wrong_step_fails_in_float64_too(kink_model):
    with pytest.raises(AssertionError, match="differ from 1 in float64 too"):
        assert_k_equals_1(_runner(kink_model, [1.0, 2.0, 3.0, 4.0], corrupt=True), "wrong")
    with pytest.raises(AssertionError, match="float64 too"):
        assert_k_equals_1(_runner(kink_model, _flipping_row(kink_model), corrupt=True), "wrong at a kink")
