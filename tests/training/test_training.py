"""``autotile train`` / ``autotile.train``: the curve on k devices is the curve on one device
step by step, the digits models learn (test accuracy against the held-out split), checkpoints
reload into the same predictions, and bad requests are autotile Errors."""
import builtins
import re
import subprocess
import sys

import numpy as np
import pytest

import autotile as at
from autotile import cli
from autotile.errors import Error
from autotile.training import evaluate, softmax_loss

pytest.importorskip("sklearn")


@pytest.mark.parametrize("model,devices", [("mlp", 4), ("cnn", 2)])
def test_k_devices_equal_one_device_step_by_step(model, devices):
    one = at.train(model, data="digits", devices=1, epochs=1, batch=32, out=False)
    k = at.train(model, data="digits", devices=devices, epochs=1, batch=32, out=False)
    assert len(one.step_losses) == len(k.step_losses) == 1347 // 32  # 1797 * 3/4 training images
    np.testing.assert_allclose(k.step_losses, one.step_losses, rtol=1e-5, atol=1e-6)
    for name, value in one.params.items():
        np.testing.assert_allclose(k.params[name], value, rtol=1e-4, atol=1e-5, err_msg=name)
    assert k.epochs[0].test_accuracy == pytest.approx(one.epochs[0].test_accuracy, abs=1 / 450)


def test_softmax_loss_against_hand_values():
    probs = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]], np.float32)
    loss, acc = softmax_loss(probs, np.array([0, 1]))
    assert loss == pytest.approx(-(np.log(0.7) + np.log(0.1)) / 2) and acc == 0.5


def test_mlp_digits_reaches_95_percent_and_checkpoint_reloads(tmp_path, capsys):
    plot, params = tmp_path / "curve.png", tmp_path / "digits.params"
    assert cli.main(["train", "mlp", "--data", "digits", "--devices", "2", "--epochs", "5",
                     "--plot", str(plot), "--save", str(params)]) == 0
    out = capsys.readouterr().out
    lines = re.findall(r"epoch (\d)/5: train loss (\S+) acc (\S+)%  test loss (\S+) acc (\S+)%", out)
    assert [int(e[0]) for e in lines] == [1, 2, 3, 4, 5]
    test_acc = [float(e[4]) for e in lines]
    assert test_acc[-1] >= 95.0, out
    train_loss = [float(e[1]) for e in lines]
    assert train_loss[-1] < train_loss[0] / 4
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the checkpoint is an MXNet .params file (arg: names) that reproduces the test accuracy
    loaded = at.nd.load(str(params))
    assert sorted(loaded) == sorted(f"arg:{n}" for n in ("fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias",
                                                           "fc3_weight", "fc3_bias"))
    from autotile.training_data import digits

    ds = digits((64,), 10)
    sym = at.models.get("mlp-digits", batch=32)
    args, _ = at.nd.split_params(loaded)
    _, acc = evaluate(sym, ds.x_test, ds.y_test, args, {}, "data", "softmax_label", 32)
    assert 100 * acc == pytest.approx(test_acc[-1], abs=0.1)


def test_synthetic_data_is_learnt():
    hist = at.train("mlp-2-32", data="synthetic", epochs=3, batch=16, out=False)
    assert hist.epochs[-1].test_loss < hist.epochs[0].test_loss
    # 32 clusters in 32 dimensions: chance is 1/32; 3 short epochs get most of the way
    assert hist.epochs[-1].test_accuracy > 0.5  # 16x chance


def test_errors():
    with pytest.raises(Error, match=r"8x8 images \(64 values per sample\); the model's data input takes \(32,\)"):
        at.train("mlp-2-32", data="digits", epochs=1, out=False)
    with pytest.raises(Error, match="unknown data set 'mnist'"):
        at.train("mlp", data="mnist", out=False)
    with pytest.raises(Error, match="epochs must be a positive integer"):
        at.train("mlp", epochs=0, out=False)
    with pytest.raises(Error, match="one class label per sample"):
        at.train("rnn-1-16", data="synthetic", out=False)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the overflow that makes the loss infinite
def test_divergence_names_the_learning_rate():
    with pytest.raises(Error, match=r"diverged at epoch 1 step \d+ .*lower --lr \(now 10000(\.0)?\)"):
        at.train("mlp", epochs=1, lr=1e4, out=False)


def test_missing_scikit_learn_is_a_clear_error(monkeypatch):
    real_import = builtins.__import__

    def no_sklearn(name, *args, **kwargs):
        if name.startswith("sklearn"):
            raise ImportError(f"No module named '{name}'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_sklearn)
    with pytest.raises(Error, match=r"needs scikit-learn.*pip install scikit-learn \(autotile's 'train' extra"):
        at.train("mlp", data="digits", out=False)


def test_cli_usage_errors():
    proc = subprocess.run([sys.executable, "-m", "autotile.cli", "train", "mlp", "--data", "mnist"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "invalid choice: 'mnist'" in proc.stderr


def test_progress_bar_draws_on_stderr(capsys):
    at.train("mlp-2-64", data="digits", epochs=1, batch=256, progress=True, out=False)
    err = capsys.readouterr().err
    # 1347 // 256 = 5 steps, each redrawn in place, then the line is cleared
    steps = re.findall(r"\repoch 1/1 \[([#.]{30})\] (\d)/5 loss \d+\.\d{4}", err)
    assert [int(n) for _, n in steps] == [1, 2, 3, 4, 5]
    assert steps[-1][0] == "#" * 30 and err.endswith("\r\033[K")
