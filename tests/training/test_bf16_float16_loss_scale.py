"""float16 mixed precision with static loss scaling (issue 32 item 3, second part): the same
autocast graph in float16, the loss gradient multiplied by ``loss_scale`` and the float32
weight gradients divided by it before the update. Without scaling small gradients flush
to zero in float16; with it they match float32; an overflow is an Error."""
import numpy as np
import pytest

import autotile as at
from autotile.errors import Error

from test_bf16 import BATCH, bn_cnn, rel, step_args, tanh_mlp

S = at.sym


def small_loss_mlp():
    """A loss weighted 1e-6 (a summed loss over many terms, say): gradients near 1e-7."""
    x = S.Variable("data", shape=(BATCH, 64))
    x = S.Activation(S.FullyConnected(x, num_hidden=48, name="fc1"), act_type="tanh", name="tanh1")
    x = S.FullyConnected(x, num_hidden=10, name="fc2")
    return S.SoftmaxOutput(x, S.Variable("softmax_label", shape=(BATCH,)), grad_scale=1e-6, name="softmax")


@pytest.mark.parametrize("build", [tanh_mlp, bn_cnn])
def test_float16_step_within_float16_of_float32_and_k_devices_equal_one(build):
    sym = build()
    kw = step_args(sym)
    f = at.backend.run(sym, 1, **kw)
    h = at.backend.run(sym, 1, dtype="float16", **kw)
    assert h.stats["loss_scale"] == 1024.0
    for name in f.grads:
        assert 1e-6 < rel(h.grads[name], f.grads[name]) <= 2 ** -8, name  # unscaled, float16-rounded
        assert h.params[name].dtype == h.grads[name].dtype == np.float32
    k = at.backend.run(sym, 2, dtype="float16", **kw)
    for name in h.grads:
        assert rel(k.grads[name], h.grads[name]) <= 2 ** -8, name
        assert rel(k.params[name], h.params[name]) <= 2 ** -10, name


def test_loss_scaling_keeps_small_gradients_from_flushing_to_zero():
    sym = small_loss_mlp()
    kw = step_args(sym)
    f = at.backend.run(sym, 1, **kw)
    unscaled = at.backend.run(sym, 1, dtype="float16", loss_scale=1, **kw)
    scaled = at.backend.run(sym, 1, dtype="float16", loss_scale=2 ** 16, **kw)
    assert max(rel(unscaled.grads[n], f.grads[n]) for n in f.grads) > 0.05  # subnormal float16: lost
    assert max(rel(scaled.grads[n], f.grads[n]) for n in f.grads) <= 2 ** -8
    # master weights moved by the unscaled gradient (sgd with momentum starting at zero)
    np.testing.assert_allclose(scaled.params["fc1_weight"], kw["params"]["fc1_weight"] - 0.1 * scaled.grads["fc1_weight"],
                               rtol=1e-6, atol=1e-12)


def test_overflow_and_bad_scales_are_errors():
    sym = tanh_mlp()
    kw = step_args(sym)
    with np.errstate(all="ignore"), pytest.raises(Error, match=r"overflowed float16 at loss_scale=1\.09951e\+12"):
        at.backend.run(sym, 1, dtype="float16", loss_scale=2.0 ** 40, **kw)
    for bad in (0, -4, float("inf"), "x"):
        with pytest.raises(Error, match="loss_scale must be a positive"):
            at.backend.run(sym, 1, dtype="float16", loss_scale=bad, **kw)
    with pytest.raises(Error, match="loss_scale is for mixed precision"):
        at.backend.run(sym, 1, loss_scale=8, **kw)
    feature = S.FullyConnected(S.Variable("data", shape=(BATCH, 64)), num_hidden=4, name="fc")
    with pytest.raises(Error, match="output 'fc' is op FullyConnected"):
        at.autodiff.autocast(feature, "float16", loss_scale=8)
