import math

import numpy as np
import pytest

import autotile as at
from gradcheck import analytic_gradient, check_gradient, forward, single_op

UNARY = {
    "negative": lambda x: -x,
    "exp": lambda x: np.array([[math.exp(v) for v in row] for row in x]),
    "log": lambda x: np.array([[math.log(v) for v in row] for row in x]),
    "sqrt": lambda x: np.array([[math.sqrt(v) for v in row] for row in x]),
    "square": lambda x: x * x,
    "abs": lambda x: np.where(x < 0, -x, x),
    "sigmoid": lambda x: np.array([[1 / (1 + math.exp(-v)) for v in row] for row in x]),
    "tanh": lambda x: np.array([[math.tanh(v) for v in row] for row in x]),
    "relu": lambda x: np.where(x > 0, x, 0.0),
    "reciprocal": lambda x: 1.0 / x,
    "zeros_like": lambda x: np.zeros(x.shape),
    "ones_like": lambda x: np.ones(x.shape),
    "_copy": lambda x: x,
    "identity": lambda x: x,
    "BlockGrad": lambda x: x,
    "stop_gradient": lambda x: x,
}
POSITIVE = {"log", "sqrt", "reciprocal"}


def _input(op, shape, seed):
    rng = np.random.default_rng(seed)
    if op in POSITIVE:
        return rng.uniform(0.5, 2.0, shape)
    x = rng.standard_normal(shape)
    x[np.abs(x) < 0.05] = 0.4  # away from abs/relu's kink at 0
    return x


@pytest.mark.parametrize("op", sorted(UNARY))
def test_forward_matches_formula(op):
    x = _input(op, (3, 4), 0)
    (y,) = forward(single_op(op, ["data"]), {"data": x})
    np.testing.assert_allclose(y, UNARY[op](x), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("op", ["negative", "exp", "log", "sqrt", "square", "abs", "sigmoid", "tanh", "relu",
                                "reciprocal", "_copy", "identity"])
def test_gradient(op):
    check_gradient(op, {"data": _input(op, (2, 3), 1)})


@pytest.mark.parametrize("op", ["zeros_like", "ones_like", "BlockGrad", "stop_gradient"])
def test_no_gradient(op):
    x = _input(op, (2, 3), 2)
    (g,) = analytic_gradient(single_op(op, ["data"]), {"data": x}, [np.ones((2, 3))])
    assert g is None


def test_sigmoid_is_finite_for_large_inputs():
    (y,) = forward(single_op("sigmoid", ["data"]), {"data": np.array([-800.0, 0.0, 800.0])})
    np.testing.assert_allclose(y, [0.0, 0.5, 1.0])


def test_clip_forward_and_gradient():
    x = np.array([[-2.0, -0.5, 0.3], [0.9, 1.5, 3.0]])
    (y,) = forward(single_op("clip", ["data"], a_min=-1.0, a_max=1.0), {"data": x})
    np.testing.assert_allclose(y, [[-1.0, -0.5, 0.3], [0.9, 1.0, 1.0]])
    check_gradient("clip", {"data": x}, {"a_min": -1.0, "a_max": 1.0})


def test_clip_gradient_at_bounds_passes_like_mxnet():
    # MXNet: grad where a_min <= x <= a_max (bounds included)
    x = np.array([-1.0, 0.0, 1.0, 1.5])
    (g,) = analytic_gradient(single_op("clip", ["data"], a_min=-1.0, a_max=1.0), {"data": x}, [np.ones(4)])
    np.testing.assert_array_equal(g, [1.0, 1.0, 1.0, 0.0])


def test_clip_requires_bounds():
    with pytest.raises(at.Error) as e:
        at.sym.clip(at.sym.Variable("x"), a_min=0.0, name="clipper")
    assert "clipper" in str(e.value) and "a_max" in str(e.value)


def test_float32_stays_float32():
    x = np.full((2,), 0.5, np.float32)
    for op in UNARY:
        assert forward(single_op(op, ["data"]), {"data": x})[0].dtype == np.float32, op
