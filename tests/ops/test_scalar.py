import numpy as np
import pytest

import autotile as at
from gradcheck import check_gradient, forward, single_op

S = 1.7
SCALAR = {
    "_plus_scalar": lambda x: x + S,
    "_minus_scalar": lambda x: x - S,
    "_rminus_scalar": lambda x: S - x,
    "_mul_scalar": lambda x: x * S,
    "_div_scalar": lambda x: x / S,
    "_rdiv_scalar": lambda x: S / x,
    "_power_scalar": lambda x: x ** S,
    "_rpower_scalar": lambda x: S ** x,
    "_maximum_scalar": lambda x: np.where(x > S, x, S),
    "_minimum_scalar": lambda x: np.where(x < S, x, S),
}


def _positive_away_from(s, shape, seed):
    x = np.random.default_rng(seed).uniform(0.5, 3.0, shape)
    x[np.abs(x - s) < 0.05] = s + 0.3  # away from maximum/minimum's kink
    return x


@pytest.mark.parametrize("op", sorted(SCALAR))
def test_forward_matches_numpy(op):
    x = _positive_away_from(S, (3, 4), 0)
    (y,) = forward(single_op(op, ["data"], scalar=S), {"data": x})
    np.testing.assert_allclose(y, SCALAR[op](x), rtol=1e-12)


@pytest.mark.parametrize("op", sorted(SCALAR))
def test_gradient(op):
    check_gradient(op, {"data": _positive_away_from(S, (2, 3), 1)}, {"scalar": S})


def test_symbol_arithmetic_with_numbers():
    x = at.sym.Variable("x")
    net = 2.0 - (x + 1) * 3 / 4
    a = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(forward(net, {"x": a})[0], 2.0 - (a + 1) * 3 / 4)
    ops = [n.op for n in net.topo_nodes() if not n.is_variable]
    assert ops == ["_plus_scalar", "_mul_scalar", "_div_scalar", "_rminus_scalar"]


def test_negation_is_mul_scalar():
    x = at.sym.Variable("x")
    np.testing.assert_allclose(forward(-x, {"x": np.array([1.0, -2.0])})[0], [-1.0, 2.0])


def test_mxnet_json_attrs_and_legacy_names():
    # MXNet 1.9 writes is_int; older files use _PlusScalar etc.
    op = at.ops.get("_PlusScalar")
    assert op is at.ops.get("_plus_scalar")
    attrs = at.ops.parse_attrs(op, {"scalar": "2", "is_int": "False"}, "n")
    assert attrs["scalar"] == 2.0 and attrs["is_int"] is False


def test_bad_scalar_names_node_and_attribute():
    with pytest.raises(at.Error) as e:
        at.sym.create("_mul_scalar", at.sym.Variable("x"), name="scaler", scalar="abc")
    assert "scaler" in str(e.value) and "scalar" in str(e.value)


def test_float32_stays_float32():
    x = np.ones((2,), np.float32)
    for op in SCALAR:
        assert forward(single_op(op, ["data"], scalar=S), {"data": x})[0].dtype == np.float32, op
