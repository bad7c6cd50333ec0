import numpy as np
import pytest

from gradcheck import analytic_gradient, forward, numeric_gradient, single_op
from tdl_op_checks import check_tdl

ORACLES = {"sign": np.sign, "floor": np.floor, "ceil": np.ceil}


def _input(shape, seed):
    x = np.random.default_rng(seed).uniform(-3.0, 3.0, shape)
    x[np.abs(x - np.round(x)) < 0.01] += 0.1  # no integer within finite-difference reach
    return x


@pytest.mark.parametrize("op", sorted(ORACLES))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_forward_matches_numpy_and_keeps_dtype(op, dtype):
    x = np.concatenate([_input((10,), 0), [0.0, -0.0, 2.0, -2.0]]).astype(dtype)
    (y,) = forward(single_op(op, ["data"]), {"data": x})
    assert y.dtype == dtype
    np.testing.assert_array_equal(y, ORACLES[op](x))


@pytest.mark.parametrize("op", sorted(ORACLES))
def test_no_gradient_flows_and_finite_differences_are_zero(op):
    x = _input((2, 3), 1)
    sym = single_op(op, ["data"])
    dy = np.random.default_rng(2).standard_normal((2, 3))
    (g,) = analytic_gradient(sym, {"data": x}, [dy])
    assert g is None
    np.testing.assert_array_equal(numeric_gradient(sym, {"data": x}, [dy], "data", eps=1e-4), 0.0)


@pytest.mark.parametrize("op", sorted(ORACLES))
def test_tdl(op):
    check_tdl(op, [_input((4, 6), 3)])
