"""A float64 run's head gradients are float64: a gradient computed from dy alone (sum's)
came back float32 on k devices, where the 1-device step gave float64."""
import numpy as np
import pytest

import autotile as at


@pytest.mark.parametrize("devices", [2, 4])
def test_float64_gradients_through_a_sum_head(devices):
    x = at.sym.Variable("data")
    y = at.sym.sum(at.sym.FullyConnected(x, num_hidden=4, name="fc"), axis=1, name="total")
    rng = np.random.default_rng(0)
    inputs = {"data": rng.standard_normal((8, 6))}
    params = {"fc_weight": rng.standard_normal((4, 6)), "fc_bias": rng.standard_normal(4)}
    ref = at.backend.run(y, inputs=inputs, params=params, train=True)
    res = at.backend.run(y, devices=devices, inputs=inputs, params=params, train=True)
    assert sorted(res.grads) == sorted(ref.grads)
    for p in ref.grads:
        assert ref.grads[p].dtype == np.float64 and res.grads[p].dtype == np.float64, p
        np.testing.assert_allclose(res.grads[p], ref.grads[p], rtol=1e-12, atol=1e-12, err_msg=p)
        np.testing.assert_allclose(res.params[p], ref.params[p], rtol=1e-12, atol=1e-12, err_msg=p)
