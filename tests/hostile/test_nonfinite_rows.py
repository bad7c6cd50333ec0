"""NaN/Inf in one data row (issue #18): on k devices it must stay confined to that row's
outputs, as on one device — a partitioned step must not smear it over rows that another
device computes, and the other rows must equal the single-device step."""
import numpy as np
import pytest

import autotile as at


def _mlp():
    data = at.sym.Variable("data")
    h = at.sym.Activation(at.sym.FullyConnected(data, num_hidden=16, name="fc1"), act_type="relu", name="relu1")
    out = at.sym.FullyConnected(h, num_hidden=8, name="fc2")
    return at.sym.SoftmaxOutput(out, name="softmax")


@pytest.mark.parametrize("devices,algorithm", [(2, None), (4, None), (8, None), (4, "model")])
def test_nan_and_inf_rows_stay_confined(devices, algorithm):
    rng = np.random.default_rng(5)
    batch = 16
    data = rng.standard_normal((batch, 12)).astype(np.float32)
    data[3, 2] = np.nan
    data[9, :] = np.inf
    data[12, 0] = -np.inf
    params = {"fc1_weight": (rng.standard_normal((16, 12)) * 0.3).astype(np.float32),
              "fc1_bias": np.zeros(16, np.float32),
              "fc2_weight": (rng.standard_normal((8, 16)) * 0.3).astype(np.float32),
              "fc2_bias": np.zeros(8, np.float32)}
    inputs = {"data": data, "softmax_label": np.zeros(batch, np.float32)}
    one = at.backend.run(_mlp(), inputs=inputs, params=params).outputs[0]
    # algorithm="model" splits the weights instead of the batch: rows meet on every device
    plan = at.plan(_mlp(), devices=devices, shapes={k: v.shape for k, v in inputs.items()}, algorithm=algorithm,
                   train=False) if algorithm else None
    many = at.backend.run(_mlp(), devices=devices, inputs=inputs, params=params, plan=plan).outputs[0]
    bad = {3, 9, 12}
    finite_rows = [r for r in range(batch) if np.isfinite(one[r]).all()]
    # the oracle: the clean rows alone on one device
    clean = [r for r in range(batch) if r not in bad]
    ref = at.backend.run(_mlp(), inputs={"data": data[clean], "softmax_label": np.zeros(len(clean), np.float32)},
                         params=params).outputs[0]
    assert set(finite_rows) >= set(clean)
    np.testing.assert_allclose(one[clean], ref, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(many[clean], ref, rtol=1e-5, atol=1e-7)
    # the poisoned rows come out the same (NaN where one device has NaN) on k devices as on one
    np.testing.assert_array_equal(np.isnan(many[sorted(bad)]), np.isnan(one[sorted(bad)]))
    assert np.isnan(one[3]).all()
