import math

import numpy as np
import pytest

import autotile as at
from gradcheck import check_gradient, forward, single_op


def _naive_softmax(x, axis, t=1.0, log=False):
    """Softmax by explicit loops over the lines along `axis` (math.exp, no max shift)."""
    x = np.moveaxis(x, axis, -1)
    out = np.empty_like(x)
    for idx in np.ndindex(*x.shape[:-1]):
        e = [math.exp(v / t) for v in x[idx]]
        s = sum(e)
        out[idx] = [math.log(v / s) if log else v / s for v in e]
    return np.moveaxis(out, -1, axis)


@pytest.mark.parametrize("axis", [-1, 0, 1, 2])
@pytest.mark.parametrize("temperature", [None, 2.5])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_forward_matches_loops(op, axis, temperature):
    x = np.random.default_rng(0).standard_normal((2, 3, 4))
    attrs = {"axis": axis} if temperature is None else {"axis": axis, "temperature": temperature}
    (y,) = forward(single_op(op, ["data"], **attrs), {"data": x})
    want = _naive_softmax(x, axis, temperature or 1.0, log=op == "log_softmax")
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("axis", [-1, 1])
@pytest.mark.parametrize("temperature", [None, 0.7])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_gradient(op, axis, temperature):
    attrs = {"axis": axis} if temperature is None else {"axis": axis, "temperature": temperature}
    check_gradient(op, {"data": np.random.default_rng(1).standard_normal((2, 3, 2))}, attrs)


def test_large_inputs_do_not_overflow():
    (y,) = forward(single_op("softmax", ["data"]), {"data": np.array([[1000.0, 1000.0, -1000.0]])})
    np.testing.assert_allclose(y, [[0.5, 0.5, 0.0]])


def test_dtype_attribute_sets_output_dtype():
    x = np.ones((2, 3), np.float32)
    sym = single_op("softmax", ["data"], dtype="float64")
    assert forward(sym, {"data": x})[0].dtype == np.float64
    assert sym.infer_type(data="float32")[1] == ["float64"]
    assert forward(single_op("softmax", ["data"]), {"data": x})[0].dtype == np.float32


def test_bad_axis_names_node_and_shape():
    with pytest.raises(at.Error) as e:
        at.sym.softmax(at.sym.Variable("x"), axis=3, name="sm").infer_shape(x=(2, 3))
    assert "sm" in str(e.value) and "axis 3" in str(e.value)


@pytest.mark.parametrize("mode,shape", [("instance", (2, 5)), ("instance", (2, 3, 2)), ("channel", (2, 3, 2, 2))])
def test_softmax_activation(mode, shape):
    x = np.random.default_rng(2).standard_normal(shape)
    (y,) = forward(single_op("SoftmaxActivation", ["data"], mode=mode), {"data": x})
    if mode == "instance":
        want = _naive_softmax(x.reshape(shape[0], -1), 1).reshape(shape)
    else:
        want = _naive_softmax(x, 1)
    np.testing.assert_allclose(y, want, rtol=1e-12)
    check_gradient("SoftmaxActivation", {"data": x}, {"mode": mode})


def test_softmax_activation_mxnet_doc_example():
    # the example in MXNet's SoftmaxActivation documentation
    x = np.array([[3., 0.5, -0.5, 2., 7.], [2., -.4, 7., 3., 0.2]])
    (y,) = forward(single_op("SoftmaxActivation", ["data"]), {"data": x})
    np.testing.assert_allclose(y, [[1.78322066e-02, 1.46375655e-03, 5.38485940e-04, 6.56010211e-03, 9.73605454e-01],
                                   [6.56221947e-03, 5.95310994e-04, 9.73919690e-01, 1.78379621e-02, 1.08472735e-03]],
                               rtol=1e-6)


def test_softmax_activation_channel_needs_rank3():
    with pytest.raises(at.Error) as e:
        at.sym.SoftmaxActivation(at.sym.Variable("x"), mode="channel", name="sa").infer_shape(x=(2, 3))
    assert "sa" in str(e.value) and "(2, 3)" in str(e.value)
