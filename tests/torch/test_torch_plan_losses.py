"""autotile.losses.attach_loss: "cross_entropy" and "mse" on a model's output.

Oracle: torch.nn.functional.cross_entropy / mse_loss (reduction "mean", torch's default) on
the same logits and labels: the loss value (from the head's output by loss_value) and the
gradient of the loss with respect to the model's weight and bias (autograd), against the
autotile training step of the attached Symbol (at.backend.run, train=True) on 1 and 2 devices."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'autotile[torch]')")

import torch.nn.functional as F  # noqa: E402

import autotile as at  # noqa: E402
from autotile.losses import attach_loss, check_label, loss_value  # noqa: E402

RTOL, ATOL = 1e-4, 1e-6


def _dense_model(shape, out):
    """y = x @ w.T + b over the last axis of x (FullyConnected with flatten=False)."""
    x = at.sym.Variable("x", shape=shape)
    w = at.sym.Variable("w", shape=(out, shape[-1]))
    b = at.sym.Variable("b", shape=(out,))
    return at.sym.FullyConnected(x, weight=w, bias=b, num_hidden=out, flatten=False, name="fc")


def _torch_step(xv, wv, bv, lab, kind):
    x, w, b = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (xv, wv, bv))
    y = x @ w.T + b
    if kind == "cross_entropy":
        loss = F.cross_entropy(y.reshape(-1, y.shape[-1]), torch.tensor(lab).reshape(-1).long())
    else:
        loss = F.mse_loss(y, torch.tensor(lab, dtype=torch.float64))
    loss.backward()
    return loss.item(), y.detach().numpy(), {"x": x.grad.numpy(), "w": w.grad.numpy(), "b": b.grad.numpy()}


@pytest.mark.parametrize("kind,shape", [("cross_entropy", (6, 5)), ("cross_entropy", (4, 3, 5)),
                                        ("mse", (6, 5)), ("mse", (4, 3, 5))])
@pytest.mark.parametrize("devices", [1, 2])
def test_value_and_gradient_equal_torch(kind, shape, devices):
    rng = np.random.default_rng(0)
    out = 7
    xv = rng.standard_normal(shape).astype(np.float32)
    wv = rng.standard_normal((out, shape[-1])).astype(np.float32)
    bv = rng.standard_normal(out).astype(np.float32)
    oshape = shape[:-1] + (out,)
    if kind == "cross_entropy":
        lab = rng.integers(0, out, size=oshape[:-1]).astype(np.float32)
    else:
        lab = rng.standard_normal(oshape).astype(np.float32)
    sym = attach_loss(_dense_model(shape, out), kind)
    assert sym.loss == (kind, "fc_output", "label")
    assert "label" in sym.list_inputs()
    res = at.backend.run(sym, devices=devices, inputs={"x": xv, "label": lab}, params={"w": wv, "b": bv},
                         train=True, optimizer_args={"lr": 0.0})
    want_loss, want_y, want_grads = _torch_step(xv, wv, bv, lab, kind)
    assert loss_value(kind, res.outputs[0], lab) == pytest.approx(want_loss, rel=1e-5)
    for name in ("w", "b"):
        np.testing.assert_allclose(res.grads[name], want_grads[name], rtol=RTOL, atol=ATOL, err_msg=name)


def test_other_outputs_are_dropped_and_output_chosen():
    x = at.sym.Variable("x", shape=(4, 3))
    a = at.sym.FullyConnected(x, num_hidden=5, name="a")
    b = at.sym.FullyConnected(x, num_hidden=2, name="b")
    both = at.sym.Group([a, b])
    with pytest.raises(at.Error, match=r"2 outputs .*output="):
        attach_loss(both, "mse")
    sym = attach_loss(both, "cross_entropy", output="b_output", label="y")
    plan = at.plan(sym, devices=2)
    assert "y" not in plan.param_names and "y" in plan.input_shapes  # data, not a weight to train
    assert sym.list_outputs() == ["cross_entropy_loss_output"]
    assert sym.infer_shape()[0][sym.list_arguments().index("y")] == (4,)
    assert attach_loss(both, "mse", output=1).loss == ("mse", "b_output", "label")


def test_bad_input_names_output_and_shapes():
    x = at.sym.Variable("x", shape=(4,))
    one_d = at.sym.relu(x, name="act")
    with pytest.raises(at.Error, match=r"cross_entropy.*output 'act_output' has shape \(4,\)"):
        attach_loss(one_d, "cross_entropy")
    with pytest.raises(at.Error, match=r"'cross_entropy', 'mse'.*'nll'"):
        attach_loss(one_d, "nll")
    with pytest.raises(at.Error, match=r"label name 'x'"):
        attach_loss(one_d, "mse", label="x")
    with pytest.raises(at.Error, match=r"'nope' is not an output"):
        attach_loss(one_d, "mse", output="nope")
    with pytest.raises(at.Error, match=r"already ends in a loss"):
        attach_loss(attach_loss(one_d, "mse"), "mse")
    with pytest.raises(at.Error, match=r"label 'y' has shape \(4, 3\), but output 'logits' of shape \(4, 3, 9\) "
                                       r"needs class indices of shape \(4, 3\)|label 'y' has shape \(4, 2\)"):
        check_label("cross_entropy", "logits", (4, 3, 9), "y", (4, 2))
    check_label("mse", "out", (4, 2), "t", (4, 2))
