"""The bring-your-own-PyTorch-model holes, each through autotile.torch.plan (which did not
exist before these tests):

1. torch 2.13's default ONNX exporter (dynamo) needs onnxscript: the ``torch`` extra declares
   it (and onnx), and plan(..., exporter="dynamo") works where it is installed.
2. A small Transformer's parameters all come back under their module names, and LayerNorm
   weights of equal values (all ones) stay separate plan tensors; a tied weight is one plan
   tensor under both names.
3. A loss attached: a CNN and a small language model train the loss, not the sum of their
   logits: the planned step's gradients (at.backend.run on 2 devices) equal the plain
   module's ``loss.backward()`` (and differ from the sum-of-logits gradients).

Oracles: pyproject.toml's text; module.named_parameters(); torch autograd."""
import pathlib
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'autotile[torch]')")
pytest.importorskip("onnx", reason="onnx is not installed (pip install 'autotile[torch]')")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import autotile as at  # noqa: E402
import autotile.torch as att  # noqa: E402
from test_torch_plan import MLP, assert_grads_equal, plain_grads, planned_grads  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _extra(name):
    text = (ROOT / "pyproject.toml").read_text()
    line = re.search(rf"^{name} = \[(.*)\]$", text, re.M)
    assert line, f"no '{name}' extra in pyproject.toml"
    return {re.split(r"[<>=!~ \[]", d.strip().strip('"'))[0] for d in line.group(1).split(",") if d.strip()}


def test_torch_extra_declares_what_the_exporters_need():
    assert {"torch", "onnx", "onnxscript"} <= _extra("torch")


@pytest.mark.slow
def test_dynamo_exporter_plans_with_module_names():
    pytest.importorskip("onnxscript", reason="onnxscript is not installed")
    torch.manual_seed(0)
    module = MLP()
    x, y = torch.randn(8, 8), torch.randint(0, 5, (8,))
    plan = att.plan(module, x, loss="cross_entropy", target=y, devices=2, exporter="dynamo")
    assert sorted(plan.torch_params) == sorted(n for n, _ in module.named_parameters())
    got = planned_grads(module, plan, {"x": x.numpy(), "target": y.numpy().astype(np.float32)})
    assert_grads_equal(got, plain_grads(module, F.cross_entropy, x, y))


class TinyLM(nn.Module):
    """Embedding, one Transformer encoder layer, an LM head tied to the embedding."""

    def __init__(self, vocab=11, d=8, heads=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=16, dropout=0.0, batch_first=True)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        return self.head(self.norm(self.layer(self.embed(tokens))))


def _lm_loss(logits, target):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


@pytest.fixture(scope="module")
def lm_plan():
    torch.manual_seed(0)
    module = TinyLM()
    tokens = torch.randint(0, 11, (4, 6))
    target = torch.randint(0, 11, (4, 6))
    return module, tokens, target, att.plan(module, tokens, loss=_lm_loss, target=target, devices=2)


def test_transformer_parameters_keep_their_module_names_and_ties(lm_plan):
    module, _tokens, _target, plan = lm_plan
    names = [n for n, _ in module.named_parameters(remove_duplicate=False)]
    assert sorted(plan.torch_params) == sorted(names)
    assert plan.torch_params["head.weight"] == plan.torch_params["embed.weight"] == "embed.weight"
    untied = [n for n in names if n != "head.weight"]
    assert all(plan.torch_params[n] == n for n in untied)
    for n in untied:
        plan.tiling(n)
    # the LayerNorms' weights are all ones and their biases zeros: still one tensor each
    ln = [n for n in names if re.search(r"norm\d?\.(weight|bias)$", n)]
    assert len(ln) == 6 and len({plan.torch_params[n] for n in ln}) == 6


def _sum_grads(module, x):
    import copy

    ref = copy.deepcopy(module)
    ref(x).sum().backward()
    return {n: p.grad.numpy() for n, p in ref.named_parameters()}


def test_language_model_trains_its_loss(lm_plan):
    module, tokens, target, plan = lm_plan
    got = planned_grads(module, plan, {"tokens": tokens.numpy(), "target": target.numpy()})
    want = plain_grads(module, _lm_loss, tokens, target)
    assert_grads_equal(got, want)
    summed = _sum_grads(module, tokens)
    assert not np.allclose(got["norm.weight"], summed["norm.weight"], rtol=1e-2)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(torch.relu(self.conv(x))), 1))


@pytest.mark.parametrize("loss", ["cross_entropy", "callable"])
def test_cnn_trains_its_loss(loss):
    torch.manual_seed(2)
    module = CNN()
    x = torch.randn(4, 3, 8, 8)
    y = torch.randint(0, 5, (4,))
    plan = att.plan(module, x, loss=F.cross_entropy if loss == "callable" else loss, target=y, devices=2)
    feed_y = y.numpy() if loss == "callable" else y.numpy().astype(np.float32)
    got = planned_grads(module, plan, {"x": x.numpy(), "target": feed_y})
    assert_grads_equal(got, plain_grads(module, F.cross_entropy, x, y))
    assert not np.allclose(got["fc.bias"], _sum_grads(module, x)["fc.bias"], rtol=1e-2)


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["cross_entropy", "callable"])
def test_gpt2_needs_the_dynamo_exporter_and_keeps_its_names(loss, caplog):
    """transformers' GPT-2 calls aten::diff, which the TorchScript exporter refuses: the plan
    comes from the dynamo exporter (onnxscript), with every parameter name (the tied LM head
    included) and the gradients of the plain model's loss.backward(). Plan tensors the importer
    keeps transposed (Conv1D weights, '_T') are compared transposed."""
    pytest.importorskip("onnxscript", reason="onnxscript is not installed")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=50, n_positions=16, n_embd=16, n_layer=1, n_head=2, use_cache=False,
                                  bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    ids, target = torch.randint(0, 50, (2, 8)), torch.randint(0, 50, (2, 8))

    def lm_loss(out, t):
        return F.cross_entropy(out.logits.reshape(-1, 50), t.reshape(-1))

    with caplog.at_level("WARNING", logger="autotile"):
        plan = att.plan(model, ids, loss=lm_loss if loss == "callable" else loss, target=target, devices=2)
    assert re.search(r"TorchScript ONNX exporter refused GPT2LMHeadModel .*aten::diff.*dynamo exporter", caplog.text)
    names = [n for n, _ in model.named_parameters(remove_duplicate=False)]
    assert sorted(plan.torch_params) == sorted(names)
    assert plan.torch_params["lm_head.weight"] == plan.torch_params["transformer.wte.weight"]
    flip = {n: plan.torch_params[n].endswith("_T") for n in names}
    sym = plan.torch_model
    params = dict(sym.params)
    params.update({plan.torch_params[n]: (p.detach().numpy().T if flip[n] else p.detach().numpy())
                   for n, p in model.named_parameters()})
    feed = target.numpy() if loss == "callable" else target.numpy().astype(np.float32)
    res = at.backend.run(sym, devices=2, inputs={"input_ids": ids.numpy(), "target": feed}, params=params,
                         train=True, optimizer_args={"lr": 0.0})
    want = plain_grads(model, lm_loss, ids, target)
    for n in names:
        g = res.grads[plan.torch_params[n]]
        np.testing.assert_allclose(g.T if flip[n] else g, want[n], rtol=1e-4, atol=1e-6, err_msg=n)
