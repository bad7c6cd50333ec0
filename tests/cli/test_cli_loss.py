"""ONNX training with a loss: ``autotile train/run --loss --label`` and ``backend.run(loss=)``,
and the one gradient convention (the mean over the batch, as torch's losses), against torch's
own losses and autograd on the same weights and inputs."""
import re

import numpy as np
import pytest

import importlib

import autotile as at
from autotile import cli

with_loss = importlib.import_module("autotile.backend.run").with_loss  # the module, not at.backend.run

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
nn = torch.nn

VOCAB, DIM, BATCH, POSITIONS = 50, 16, 2, 6


class _LM(nn.Module):
    """A tiny language model: ids -> tanh(embedding) -> logits over the vocabulary."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.out = nn.Linear(DIM, VOCAB)

    def forward(self, ids):
        return self.out(torch.tanh(self.emb(ids)))


class _CNN(nn.Module):
    """A digits-sized classifier ending in its logits (no loss, as exports are)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))


def _export(module, example, path, input_name):
    torch.manual_seed(0)
    module = module()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (example,), str(path), input_names=[input_name], output_names=["logits"],
                          dynamo=False)
    return module


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    path = tmp_path_factory.mktemp("lm") / "lm.onnx"
    module = _export(_LM, torch.zeros(BATCH, POSITIONS, dtype=torch.long), path, "ids")
    return str(path), module


def _steps(out):
    return [float(v) for v in re.findall(r"step \d+/\d+: loss (-?\d+\.\d+)", out)]


def _torch_reference(module, ids, label, lr, steps):
    """Losses of `steps` SGD steps of torch's mean cross-entropy, and the first gradients
    (on a copy of `module`: the exported weights stay as they are)."""
    import copy

    module = copy.deepcopy(module)
    grads = None
    losses = []
    opt = torch.optim.SGD(module.parameters(), lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        logits = module(torch.as_tensor(ids, dtype=torch.long))
        loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), torch.as_tensor(label).reshape(-1).long())
        loss.backward()
        losses.append(float(loss.detach()))
        if grads is None:
            grads = {"emb.weight": module.emb.weight.grad.numpy().copy(),
                     "out.weight": module.out.weight.grad.numpy().copy(),
                     "out.bias": module.out.bias.grad.numpy().copy()}
        opt.step()
    return losses, grads


def test_run_language_model_optimises_the_loss_not_the_logit_sum(lm, capsys):
    """`autotile run lm.onnx --loss cross_entropy`: each step's printed loss is torch's mean
    cross-entropy after the same SGD steps on the same ids, labels and weights."""
    path, module = lm
    lr, steps = 0.5, 3
    assert cli.main(["run", path, "--loss", "cross_entropy", "--steps", str(steps), "--lr", str(lr), "-q"]) == 0
    out = capsys.readouterr().out
    assert "objective: cross-entropy on output" in out and "the mean over the batch" in out
    sym = with_loss(at.onnx.load(path), "cross_entropy", None)
    values = cli.synthetic_inputs(sym, 0)
    want, _ = _torch_reference(module, values["ids"], values["label"], lr, steps)
    assert _steps(out) == pytest.approx(want, abs=2e-5)
    assert want[-1] < want[0]  # it trains the loss


def test_run_without_a_loss_says_it_trains_the_sum(lm, capsys):
    path, _ = lm
    assert cli.main(["run", path, "--steps", "1", "-q"]) == 0
    out = capsys.readouterr().out
    assert "objective: the sum of the model's outputs" in out and "--loss cross_entropy" in out


@pytest.mark.parametrize("devices", [1, 2])
def test_backend_run_loss_gradients_are_torchs_mean(lm, devices):
    """backend.run(loss='cross_entropy'): res.grads equal torch autograd of the mean loss."""
    path, module = lm
    rng = np.random.default_rng(3)
    ids = rng.integers(0, VOCAB, size=(BATCH, POSITIONS))
    label = rng.integers(0, VOCAB, size=(BATCH, POSITIONS)).astype(np.float32)
    sym = at.onnx.load(path)
    res = at.backend.run(sym, devices=devices, inputs={"ids": ids, "label": label}, train=True,
                         loss="cross_entropy", optimizer_args={"lr": 0.0})
    _, grads = _torch_reference(module, ids, label, 0.0, 1)
    # the exporter renames the Linear's weight (a MatMul's transposed initializer): the other
    # parameter of its shape
    renamed = [k for k in res.grads if k not in grads and k != "out.bias"]
    assert len(renamed) == 1 and res.grads[renamed[0]].shape == (VOCAB, DIM)
    for name, want in grads.items():
        got = res.grads[name if name in res.grads else renamed[0]]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_cli_and_backend_run_take_the_same_step(lm, capsys):
    """The convention test: the CLI's second-step loss equals the loss after one
    backend.run(loss=) step with the same lr on the same batch (no hidden 1/batch either side)."""
    path, _ = lm
    lr = 0.5
    assert cli.main(["run", path, "--loss", "mse", "--steps", "2", "--lr", str(lr), "-q"]) == 0
    cli_losses = _steps(capsys.readouterr().out)
    sym = with_loss(at.onnx.load(path), "mse", None)
    values = cli.synthetic_inputs(sym, 0)
    values.update({k: np.asarray(v) for k, v in sym.params.items() if k in values})
    inputs = {k: values[k] for k in ("ids", "label")}
    params = {k: v for k, v in values.items() if k not in inputs}
    first = at.backend.run(at.onnx.load(path), inputs=inputs, params=params, train=True, loss="mse",
                           optimizer_args={"lr": lr})
    after = at.backend.run(at.onnx.load(path), inputs=inputs, params=first.params, train=False, loss="mse")
    from autotile.losses import loss_value

    assert cli_losses[0] == pytest.approx(loss_value("mse", first.outputs[0], inputs["label"]), abs=1e-5)
    assert cli_losses[1] == pytest.approx(loss_value("mse", after.outputs[0], inputs["label"]), abs=1e-5)
    assert cli_losses[1] < cli_losses[0]


def test_train_cnn_export_with_cross_entropy(tmp_path, capsys):
    """An exported CNN (logits, no loss): refused without --loss, trained with it."""
    path = tmp_path / "cnn.onnx"
    _export(_CNN, torch.randn(32, 1, 8, 8), path, "image")
    assert cli.main(["train", str(path), "--epochs", "1", "-q"]) == 1
    assert "--loss cross_entropy" in capsys.readouterr().err
    assert cli.main(["train", str(path), "--epochs", "2", "--loss", "cross_entropy", "--label", "y", "-q"]) == 0
    out = capsys.readouterr().out
    accuracy = float(re.search(r"test accuracy (\d+\.\d)%", out).group(1))
    assert accuracy > 60.0, out  # ten classes: chance is 10%


def test_loss_options_refused_where_they_mean_nothing(lm, capsys):
    path, _ = lm
    assert cli.main(["run", path, "--label", "y", "-q"]) == 1
    assert "--label y names the target of --loss" in capsys.readouterr().err
    assert cli.main(["run", path, "--loss", "mse", "--inference", "-q"]) == 1
    assert "--loss trains a loss: leave out --inference" in capsys.readouterr().err
    assert cli.main(["run", "mlp-2-16", "--loss", "mse", "-q"]) == 1  # the zoo model has its own loss head
    assert "already ends in a loss head" in capsys.readouterr().err
    assert cli.main(["train", path, "--loss", "mse", "-q"]) == 1
    assert "train fits a classifier to class labels" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["run", path, "--loss", "hinge"])
    with pytest.raises(at.Error, match="label='y' names the target of a loss"):
        at.backend.run(path, label="y")
    with pytest.raises(at.Error, match="loss must be one of"):
        at.backend.run(path, loss="hinge")
