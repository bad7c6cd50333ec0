import numpy as np
import pytest

from gradcheck import check_gradient, forward, single_op


def test_fully_connected_forward_matches_numpy():
    rng = np.random.default_rng(1)
    x, w, b = rng.standard_normal((4, 2, 3)), rng.standard_normal((5, 6)), rng.standard_normal(5)
    sym = single_op("FullyConnected", ["data", "weight", "bias"], num_hidden=5)
    (y,) = forward(sym, {"data": x, "weight": w, "bias": b})
    np.testing.assert_allclose(y, x.reshape(4, 6) @ w.T + b, rtol=1e-12)


@pytest.mark.parametrize("flatten", [True, False])
def test_fully_connected_gradient(flatten):
    rng = np.random.default_rng(2)
    check_gradient("FullyConnected", {"data": rng.standard_normal((3, 2, 4)), "weight": rng.standard_normal((5, 8 if flatten else 4)),
                                      "bias": rng.standard_normal(5)}, attrs={"num_hidden": 5, "flatten": flatten})


@pytest.mark.parametrize("act", ["relu", "sigmoid", "tanh", "softrelu", "softsign"])
def test_activation_gradient(act):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 4))
    x[np.abs(x) < 0.05] = 0.3  # keep away from relu's kink
    check_gradient("Activation", {"data": x}, attrs={"act_type": act})
