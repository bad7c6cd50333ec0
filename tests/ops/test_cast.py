"""Cast: dtype inference, kernel, gradient back to the input dtype."""
import numpy as np
import pytest

import autotile as at
from autotile.errors import Error
from gradcheck import analytic_gradient, check_gradient, forward, single_op
import mx_shape_fixtures
from tdl_interp import check_op_tdl


def test_infer_type_outputs_new_dtype():
    x = at.sym.Variable("x")
    y = at.sym.Cast(x, dtype="float16", name="c")
    args, outs, _ = y.infer_type(x="float32")
    assert args == ["float32"] and outs == ["float16"]
    z = at.sym.FullyConnected(at.sym.cast(y, dtype="int32"), num_hidden=2)
    assert z.infer_type(x="float32")[1] == ["int32"]


@pytest.mark.parametrize("dtype", ["float16", "float64", "int32", "uint8", "bool"])
def test_forward(dtype):
    x = np.array([[0.0, 1.7, -2.2], [3.0, 250.0, 0.4]], dtype=np.float32)
    (out,) = forward(single_op("Cast", ["data"], dtype=dtype), {"data": x})
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, x.astype(dtype))


def test_gradient_returns_input_dtype():
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    dy = np.ones((2, 3), dtype=np.float16)
    (g,) = analytic_gradient(single_op("Cast", ["data"], dtype="float16"), {"data": x}, [dy])
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g, 1.0)
    check_gradient("Cast", {"data": np.random.default_rng(1).standard_normal((2, 3))}, {"dtype": "float64"})


def test_unknown_dtype_is_an_error():
    with pytest.raises(Error, match=r"c2.*Cast.*dtype"):
        at.sym.Cast(at.sym.Variable("x"), dtype="complex64", name="c2")


@pytest.mark.parametrize("name", mx_shape_fixtures.names("cast"))
def test_matches_mxnet(name):
    mx_shape_fixtures.check(name, rtol=1e-6)


def test_tdl_is_elementwise():
    from autotile import _core

    text = check_op_tdl("Cast", [np.zeros((2, 3))], {"dtype": "float16"})
    assert _core.analyze_tdl(text, [(2, 3)], [(2, 3)], 2)["elementwise"]
    check_op_tdl("_backward_Cast", [np.zeros((2, 3)), np.zeros((2, 3))])
