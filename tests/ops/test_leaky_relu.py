import math

import numpy as np
import pytest

import autotile as at
from fixtures_ew import case
from gradcheck import analytic_gradient, check_gradient, forward, single_op

ALPHA = 1.6732632423543772848170429916717
LAMBDA = 1.0507009873554804934193349852946


def _naive(act, x, slope=0.25, gamma=None, lo=0.125, hi=0.334):
    out = np.empty_like(x)
    for idx in np.ndindex(*x.shape):
        v = x[idx]
        if act == "leaky":
            out[idx] = v if v > 0 else slope * v
        elif act == "elu":
            out[idx] = v if v > 0 else slope * (math.exp(v) - 1)
        elif act == "selu":
            out[idx] = LAMBDA * (v if v > 0 else ALPHA * (math.exp(v) - 1))
        elif act == "gelu":
            out[idx] = 0.5 * v * (1 + math.erf(v / math.sqrt(2)))
        elif act == "prelu":
            g = gamma[idx[1]] if gamma.size > 1 else gamma[0]
            out[idx] = v if v > 0 else g * v
        elif act == "rrelu":
            out[idx] = v if v > 0 else (lo + hi) / 2 * v
    return out


def _data(shape, seed):
    x = np.random.default_rng(seed).standard_normal(shape)
    x[np.abs(x) < 0.05] = 0.3  # away from the kink at 0
    return x


@pytest.mark.parametrize("act", ["leaky", "elu", "selu", "gelu"])
def test_forward_matches_formula(act):
    x = _data((2, 3, 4), 0)
    (y,) = forward(single_op("LeakyReLU", ["data"], act_type=act, slope=0.3), {"data": x})
    np.testing.assert_allclose(y, _naive(act, x, slope=0.3), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("act", ["leaky", "elu", "selu", "gelu"])
def test_gradient(act):
    check_gradient("LeakyReLU", {"data": _data((2, 3, 2), 1)}, {"act_type": act, "slope": 0.3})


@pytest.mark.parametrize("gamma_shape", [(3,), (1,)])
def test_prelu_forward_and_gradient_to_gamma(gamma_shape):
    rng = np.random.default_rng(2)
    x, gamma = _data((2, 3, 2, 2), 2), rng.uniform(-0.5, 0.5, gamma_shape)
    (y,) = forward(single_op("LeakyReLU", ["data", "gamma"], act_type="prelu"), {"data": x, "gamma": gamma})
    np.testing.assert_allclose(y, _naive("prelu", x, gamma=gamma), rtol=1e-12)
    check_gradient("LeakyReLU", {"data": x, "gamma": gamma}, {"act_type": "prelu"})


def test_prelu_infers_gamma_per_channel():
    x = at.sym.Variable("x")
    net = at.sym.LeakyReLU(x, act_type="prelu", name="pr")
    assert net.list_arguments() == ["x", "pr_gamma"]
    args, outs, _ = net.infer_shape(x=(4, 7, 5))
    assert args == [(4, 7, 5), (7,)] and outs == [(4, 7, 5)]


def test_prelu_bad_gamma_names_node_and_shapes():
    x, g = at.sym.Variable("x"), at.sym.Variable("g")
    with pytest.raises(at.Error) as e:
        at.sym.LeakyReLU(x, g, act_type="prelu", name="pr").infer_shape(x=(4, 7, 5), g=(5,))
    msg = str(e.value)
    assert "pr" in msg and "LeakyReLU" in msg and "(5,)" in msg and "(4, 7, 5)" in msg


def test_rrelu_inference_is_leaky_with_mean_slope():
    x = _data((3, 4), 3)
    sym = single_op("LeakyReLU", ["data"], act_type="rrelu", lower_bound=0.1, upper_bound=0.3)
    (y,) = forward(sym, {"data": x}, is_train=False)
    np.testing.assert_allclose(y, _naive("rrelu", x, lo=0.1, hi=0.3))
    assert len(sym.list_outputs()) == 1  # the mask is a hidden output
    check_gradient("LeakyReLU", {"data": x}, {"act_type": "rrelu", "lower_bound": 0.1, "upper_bound": 0.3},
                   is_train=False)


def test_rrelu_training_draws_slopes_in_bounds_and_gradient_uses_them():
    x = -np.abs(_data((50, 40), 4))  # all negative: every element uses its slope
    sym = single_op("LeakyReLU", ["data"], act_type="rrelu", lower_bound=0.1, upper_bound=0.3)
    (y,) = forward(sym, {"data": x}, is_train=True)
    slopes = y / x
    assert slopes.min() >= 0.1 and slopes.max() < 0.3 and slopes.std() > 0.03
    (g,) = analytic_gradient(sym, {"data": x}, [np.ones_like(x), np.zeros_like(x)], is_train=True)
    np.testing.assert_allclose(g, slopes)


def test_unknown_act_type_names_node_and_attribute():
    with pytest.raises(at.Error) as e:
        at.sym.LeakyReLU(at.sym.Variable("x"), act_type="swish", name="lr")
    msg = str(e.value)
    assert "lr" in msg and "LeakyReLU" in msg and "act_type" in msg and "swish" in msg


# MXNet 1.9.1's backward deviates from the forward's derivative for two kinds, so only the
# forward is compared there: selu's gradient for x < 0 is lambda * (y + alpha) instead of
# dy/dx = y + lambda * alpha; rrelu's inference-mode gradient reads an unset mask.
# (Our gradients for both are checked against finite differences above.)
_MXNET_BACKWARD_OK = {"leaky", "elu", "gelu", "prelu"}


@pytest.mark.parametrize("act", ["leaky", "elu", "selu", "gelu", "rrelu", "prelu"])
def test_matches_mxnet(act):
    attrs, arr = case(f"leaky_{act}")
    attrs.pop("op")
    names = ["data", "gamma"] if act == "prelu" else ["data"]
    values = {n: arr[n] for n in names}
    sym = single_op("LeakyReLU", names, **attrs)
    (y,) = forward(sym, values, is_train=False)
    np.testing.assert_allclose(y, arr["output"], rtol=1e-6, atol=1e-7)
    if act not in _MXNET_BACKWARD_OK:
        return
    grads = analytic_gradient(sym, values, [arr["head"]], is_train=False)
    np.testing.assert_allclose(grads[0], arr["grad"], rtol=1e-6, atol=1e-7)
    if act == "prelu":
        np.testing.assert_allclose(grads[1], arr["gamma_grad"], rtol=1e-6, atol=1e-7)
