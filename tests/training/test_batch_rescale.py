"""The update of a model whose ONNX export returns its own (mean) loss: one SGD step with
``sgd_args(lr, batch, sym)`` (what ``autotile run``/``train`` use) moves the weights as torch's
SGD step on the same loss does, not 1/batch as far; MXNet's summing heads keep 1/batch."""
import numpy as np
import pytest

import autotile as at
from autotile.training import batch_rescale, sgd_args

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")


def _exported_loss_model(tmp_path, batch=8):
    import torch.nn.functional as F

    class WithLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 3)

        def forward(self, x, t):
            return F.mse_loss(self.fc(x), t)

    torch.manual_seed(0)
    module = WithLoss()
    x, t = torch.randn(batch, 4), torch.randn(batch, 3)
    path = str(tmp_path / "with_loss.onnx")
    torch.onnx.export(module, (x, t), path, input_names=["x", "t"], dynamo=False)
    return module, x, t, at.onnx.load(path)


@pytest.mark.parametrize("devices", [1, 2])
def test_a_model_returning_its_mean_loss_steps_as_torch_does(tmp_path, devices):
    module, x, t, sym = _exported_loss_model(tmp_path)
    assert batch_rescale(sym, 8) == 1.0
    lr = 0.1
    res = at.backend.run(sym, devices=devices, inputs={"x": x.numpy(), "t": t.numpy()},
                         params={k: v.detach().numpy() for k, v in module.named_parameters()},
                         train=True, optimizer_args=sgd_args(lr, 8, sym))
    loss = torch.nn.functional.mse_loss(module.fc(x), t)
    loss.backward()
    for name, p in module.named_parameters():
        expected = (p - lr * p.grad).detach().numpy()
        np.testing.assert_allclose(res.params[name], expected, rtol=1e-5, atol=1e-6, err_msg=name)


def test_mxnet_summing_heads_keep_one_over_batch():
    sym = at.models.get("mlp-digits")
    assert batch_rescale(sym, 16) == pytest.approx(1 / 16)
