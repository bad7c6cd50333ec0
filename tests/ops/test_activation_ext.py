import math

import numpy as np
import pytest

import autotile as at
from gradcheck import check_gradient, forward, single_op
from tdl_op_checks import check_tdl


erf = np.vectorize(math.erf, otypes=[np.float64])  # no SciPy needed (the kernel uses it if present)


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


# oracles written from the definitions (the standard library's erf, NumPy's log1p/tanh)
ORACLES = {
    ("erf", ()): lambda x: erf(x),
    ("gelu", ()): lambda x: 0.5 * x * (1.0 + erf(x / math.sqrt(2.0))),
    ("gelu", (("approximate", "tanh"),)):
        lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))),
    ("silu", ()): lambda x: x * _sig(x),
    ("mish", ()): lambda x: x * np.tanh(np.log1p(np.exp(x))),
    ("hard_sigmoid", ()): lambda x: np.maximum(0.0, np.minimum(1.0, 0.2 * x + 0.5)),
    ("hard_sigmoid", (("alpha", 0.5), ("beta", 0.25))): lambda x: np.maximum(0.0, np.minimum(1.0, 0.5 * x + 0.25)),
    ("hard_swish", ()): lambda x: x * np.maximum(0.0, np.minimum(1.0, x / 6.0 + 0.5)),
}
CASES = [(op, dict(attrs)) for op, attrs in ORACLES]
IDS = [f"{op}-{'-'.join(str(v) for v in a.values())}" for op, a in CASES]


def _input(shape, seed):
    # spans the clipped and linear parts of hard_sigmoid/hard_swish, away from their kinks
    x = np.random.default_rng(seed).uniform(-5.0, 5.0, shape)
    for kink in (-3.0, 3.0, -2.5, 2.5, -1.0, 1.5):
        x[np.abs(x - kink) < 0.05] += 0.2
    return x


@pytest.mark.parametrize("op,attrs", CASES, ids=IDS)
def test_forward_matches_oracle(op, attrs):
    x = _input((4, 6), 0)
    (y,) = forward(single_op(op, ["data"], **attrs), {"data": x})
    np.testing.assert_allclose(y, ORACLES[(op, tuple(attrs.items()))](x), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("op,attrs", CASES, ids=IDS)
def test_gradient_matches_finite_differences(op, attrs):
    check_gradient(op, {"data": _input((3, 4), 1)}, attrs)


@pytest.mark.parametrize("op,attrs", CASES, ids=IDS)
def test_float32_in_float32_out(op, attrs):
    x = _input((2, 3), 2).astype(np.float32)
    (y,) = forward(single_op(op, ["data"], **attrs), {"data": x})
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, ORACLES[(op, tuple(attrs.items()))](x.astype(np.float64)), rtol=1e-5, atol=1e-6)
    s = single_op(op, ["data"], **attrs)
    assert s.infer_type(data="float32")[1] == ["float32"]


def test_mish_and_silu_are_finite_for_large_inputs():
    x = np.array([-800.0, 0.0, 800.0])
    for op in ("mish", "silu"):
        (y,) = forward(single_op(op, ["data"]), {"data": x})
        np.testing.assert_allclose(y, [0.0, 0.0, 800.0], err_msg=op)


def test_gelu_rejects_unknown_approximation():
    with pytest.raises(at.Error) as e:
        at.sym.gelu(at.sym.Variable("x"), approximate="fast", name="g1")
    assert "g1" in str(e.value) and "approximate" in str(e.value)


def test_shape_mismatch_of_backward_names_op_and_shapes():
    dy, x = at.sym.Variable("dy"), at.sym.Variable("x")
    with pytest.raises(at.Error) as e:
        at.sym._backward_gelu(dy, x, name="bg").infer_shape(dy=(2, 3), x=(3, 2))
    msg = str(e.value)
    assert "bg" in msg and "_backward_gelu" in msg and "(2, 3)" in msg and "(3, 2)" in msg


@pytest.mark.parametrize("op,attrs", CASES, ids=IDS)
def test_tdl(op, attrs):
    x = _input((4, 6), 3)
    check_tdl(op, [x], attrs)
    check_tdl(f"_backward_{op}", [np.random.default_rng(4).standard_normal((4, 6)), x], attrs)
