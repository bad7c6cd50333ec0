"""autotile.torch.plan on a module with a tied weight read two ways (an embedding gather and
the LM head's transposed matmul) and a BatchNorm buffer: one name per tensor, and the planned
step's gradients on 2 devices equal ``loss.backward()``'s on the plain module."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
pytest.importorskip("onnx", reason="onnx is not installed")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import autotile as at  # noqa: E402
import autotile.torch as att  # noqa: E402


class TiedLM(nn.Module):
    def __init__(self, vocab=32, d=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.norm = nn.BatchNorm1d(d)
        self.fc = nn.Linear(d, d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.emb.weight  # tied: read by a gather and by a transposed matmul

    def forward(self, ids):
        h = self.norm(self.emb(ids).transpose(1, 2)).transpose(1, 2)
        return self.head(torch.relu(self.fc(h)))


def test_tied_weight_read_two_ways_and_a_buffer():
    torch.manual_seed(0)
    module = TiedLM()
    ids, y = torch.randint(0, 32, (8, 6)), torch.randint(0, 32, (8, 6))

    def loss(out, t):
        return F.cross_entropy(out.reshape(-1, 32), t.reshape(-1))

    plan = att.plan(module, ids, loss=loss, target=y, devices=2)
    assert plan.torch_params["head.weight"] == plan.torch_params["emb.weight"] == "emb.weight"
    weights = {plan.torch_params[k]: v.detach().numpy() for k, v in module.named_parameters()}
    res = at.backend.run(plan.torch_model, devices=2, inputs={"ids": ids.numpy(), "target": y.numpy()},
                         params={**plan.torch_model.params, **weights}, train=True, optimizer_args={"lr": 0.1})
    module.eval()  # the plan is of the module in eval mode (BatchNorm by its running statistics)
    loss(module(ids), y).backward()
    for name, p in module.named_parameters():
        np.testing.assert_allclose(res.grads[plan.torch_params[name]], p.grad.numpy(), rtol=1e-4, atol=1e-6,
                                   err_msg=name)
