"""MXNet's default initialisation (training_init) and what it fixes in ``autotile run``: the
Xavier half-width is MXNet's formula worked by hand, BatchNorm statistics start at mean 0 /
variance 1, and an MLP's loss falls from step to step (it rose with N(0, 0.05^2) weights)."""
import math
import re

import numpy as np
import pytest

import autotile as at
from autotile import cli
from autotile.errors import Error
from autotile.training_init import init_params, init_value, xavier_scale


def test_xavier_scale_is_mxnets_avg_uniform_formula():
    # FullyConnected weight (128 out, 64 in): fan_in 64, fan_out 128, avg 96 -> sqrt(3 / 96)
    assert xavier_scale((128, 64)) == pytest.approx(math.sqrt(3 / 96))
    # Convolution (16 filters, 1 channel, 3x3): receptive 9, fan_in 9, fan_out 144 -> sqrt(3 / 76.5)
    assert xavier_scale((16, 1, 3, 3)) == pytest.approx(math.sqrt(3 / 76.5))


def test_weights_uniform_within_the_scale_and_constants_by_name():
    rng = np.random.default_rng(0)
    w = init_value("fc1_weight", (512, 256), rng)
    s = math.sqrt(3 / 384)
    assert w.dtype == np.float32 and np.abs(w).max() <= s
    # U(-s, s) has standard deviation s / sqrt(3); 131072 draws pin it to well under 1%
    assert w.std() == pytest.approx(s / math.sqrt(3), rel=0.01)
    for name, value in (("fc1_bias", 0), ("bn1_beta", 0), ("bn1_gamma", 1), ("bn1_moving_mean", 0),
                        ("bn1_moving_var", 1)):
        assert np.array_equal(init_value(name, (7,), rng), np.full(7, value, np.float32)), name
    assert np.abs(init_value("w_weight", (1000,), rng, "normal")).max() < 0.01 * 6
    assert np.abs(init_value("w_weight", (1000,), rng, "uniform")).max() <= 0.07
    with pytest.raises(Error, match="unknown initializer 'he'"):
        init_value("w_weight", (3, 3), rng, "he")


def test_init_params_is_seeded_and_skips():
    a = init_params({"a_weight": (4, 4), "b_bias": (4,), "data": (2, 4)}, seed=3, skip=["data"])
    b = init_params({"a_weight": (4, 4), "b_bias": (4,), "data": (2, 4)}, seed=3, skip=["data"])
    assert set(a) == {"a_weight", "b_bias"} and np.array_equal(a["a_weight"], b["a_weight"])


def test_synthetic_inputs_batchnorm_statistics():
    x = at.sym.Variable("data", shape=(4, 3, 8, 8))
    x = at.sym.Convolution(x, num_filter=6, kernel=(3, 3), name="conv")
    x = at.sym.BatchNorm(x, name="bn")
    x = at.sym.Flatten(x)
    x = at.sym.FullyConnected(x, num_hidden=5, name="fc")
    sym = at.sym.SoftmaxOutput(x, at.sym.Variable("softmax_label", shape=(4,)), name="softmax")
    values = cli.synthetic_inputs(sym, seed=0)
    assert np.all(values["bn_moving_var"] == 1) and np.all(values["bn_moving_mean"] == 0)
    assert np.all(values["bn_gamma"] == 1) and np.all(values["bn_beta"] == 0)
    assert np.all(values["conv_bias"] == 0) and np.all(values["fc_bias"] == 0)
    assert np.abs(values["conv_weight"]).max() <= xavier_scale((6, 3, 3, 3))
    assert set(np.unique(values["softmax_label"])) <= set(range(5))
    # the data do not depend on the initializer
    other = cli.synthetic_inputs(sym, seed=0, init="normal")
    assert np.array_equal(values["data"], other["data"]) and not np.array_equal(values["fc_weight"],
                                                                                 other["fc_weight"])


def _losses(capsys, *argv):
    assert cli.main(list(argv)) == 0
    out = capsys.readouterr().out
    return [float(v) for v in re.findall(r"step \d+/\d+: loss (\d+\.\d+)", out)]


def test_run_loss_decreases_on_four_devices_and_equals_one(capsys):
    args = ["run", "mlp-3-256", "--batch", "64", "--steps", "3"]
    four = _losses(capsys, *args, "--devices", "4")
    assert len(four) == 3 and four[0] > four[1] > four[2]
    # Xavier keeps the logits O(1): the first loss is near ln(256), the loss of a uniform guess
    assert abs(four[0] - math.log(256)) < 0.5
    assert four == pytest.approx(_losses(capsys, *args, "--devices", "1"), rel=1e-5)
    # a bigger learning rate takes a bigger first step down (the same first loss: same init)
    fast = _losses(capsys, *args, "--devices", "4", "--lr", "0.5")
    assert fast[0] == pytest.approx(four[0], rel=1e-6) and fast[1] < four[1]


def test_run_init_and_lr_errors(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "mlp-2-16", "--init", "he"])
    assert e.value.code == 2 and "invalid choice: 'he'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:  # a bad flag value: usage error, before any model is built
        cli.main(["run", "mlp-2-16", "--lr", "-1"])
    assert e.value.code == 2 and "argument --lr: expected a positive finite number, got '-1'" in capsys.readouterr().err
