"""autotile.torch.plan: an nn.Module, its example inputs and its loss in, a plan out, with the
module's parameter names; autotile.torch.parallelize(module, plan) runs it.

Oracles: the plain module's own ``loss(module(x), y).backward()`` in this process: the planned
step's gradients (at.backend.run of plan.torch_model on 2 devices) and the parallelized step's
on 2 gloo ranks must equal them; torch's own error for the bad inputs (the message must name
the op, the module path, the shapes)."""
import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'autotile[torch]')")
pytest.importorskip("onnx", reason="onnx is not installed (pip install 'autotile[torch]')")
pytest.importorskip("torch.distributed.tensor", reason="this torch has no torch.distributed.tensor")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import autotile as at  # noqa: E402
import autotile.torch as att  # noqa: E402

RTOL, ATOL = 1e-4, 1e-6


class MLP(nn.Module):
    def __init__(self, n_in=8, hidden=16, n_out=5):
        super().__init__()
        self.fc1 = nn.Linear(n_in, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.fc2 = nn.Linear(hidden, n_out)

    def forward(self, x):
        return self.fc2(self.norm(torch.relu(self.fc1(x))))


def _data(batch=8, n_in=8, n_out=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, n_in, generator=g), torch.randint(0, n_out, (batch,), generator=g)


def plain_grads(module, loss, x, y):
    """{parameter name: gradient} of loss(module(x), y).backward() on a copy (each owner of a
    tied parameter by its own name)."""
    ref = copy.deepcopy(module)
    loss(ref(x), y).backward()
    return {n: p.grad.numpy() for n, p in ref.named_parameters(remove_duplicate=False)}


def planned_grads(module, plan, feeds, devices=2):
    """{parameter name: gradient} of the planned step (at.backend.run of plan.torch_model)."""
    sym = plan.torch_model
    params = dict(sym.params)
    params.update({plan.torch_params[n]: p.detach().numpy() for n, p in module.named_parameters()})
    res = at.backend.run(sym, devices=devices, inputs=feeds, params=params, train=True, optimizer_args={"lr": 0.0})
    return {n: res.grads[t] for n, t in plan.torch_params.items()}


def assert_grads_equal(got, want):
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=RTOL, atol=ATOL, err_msg=name)


@pytest.fixture(scope="module")
def mlp_plan():
    torch.manual_seed(0)
    module = MLP()
    x, y = _data()
    return module, x, y, att.plan(module, x, loss=F.cross_entropy, target=y, devices=2)


def test_callable_loss_trains_the_loss_under_module_names(mlp_plan):
    module, x, y, plan = mlp_plan
    names = [n for n, _ in module.named_parameters()]
    assert plan.torch_params == {n: n for n in names}
    for n in names:
        plan.tiling(n)  # every parameter is a plan tensor under its module name
    assert plan.torch_loss == "cross_entropy"
    got = planned_grads(module, plan, {"x": x.numpy(), "target": y.numpy()})
    assert_grads_equal(got, plain_grads(module, F.cross_entropy, x, y))


@pytest.mark.parametrize("kind", ["cross_entropy", "mse"])
def test_string_loss_equals_torch_loss(kind):
    torch.manual_seed(1)
    module = MLP()
    x, y = _data(seed=1)
    if kind == "mse":
        y = torch.randn(8, 5)
    plan = att.plan(module, x, loss=kind, target=y, devices=2)
    assert plan.torch_model.loss == (kind, "output_output", "target")
    fn = F.cross_entropy if kind == "cross_entropy" else F.mse_loss
    got = planned_grads(module, plan, {"x": x.numpy(), "target": y.numpy().astype(np.float32)})
    assert_grads_equal(got, plain_grads(module, fn, x, y))


def _parallel_step(rank, module, plan, x, y, lr):
    """One SGD step of `module` parallelized by `plan` (two-argument form) with the loss on
    the gathered output; every parameter's gradient and new value, gathered."""
    from torch.distributed.tensor import DTensor

    mod = att.parallelize(copy.deepcopy(module), plan)
    out = mod(x)
    out = out.full_tensor() if isinstance(out, DTensor) else out
    loss = F.cross_entropy(out, y)
    loss.backward()
    torch.optim.SGD(mod.parameters(), lr=lr).step()
    full = (lambda t: t.full_tensor() if isinstance(t, DTensor) else t)
    return {n: (full(p.grad).numpy(), full(p.detach()).numpy()) for n, p in mod.named_parameters()}


def _parallel_steps(rank, module, plans, x, y, lr):
    return [_parallel_step(rank, module, plan, x, y, lr) for plan in plans]


def test_parallelize_with_the_plan_alone_trains_as_the_plain_module(mlp_plan):
    """The callable-loss plan, a string-loss plan and a loss-free plan of the same module, each
    run by parallelize(module, plan) on 2 gloo ranks."""
    module, x, y, plan = mlp_plan
    plans = [plan, att.plan(module, x, loss="cross_entropy", target=y, devices=2), att.plan(module, x, devices=2)]
    assert plans[2].torch_loss is None and plans[2].torch_model.list_outputs() == ["output_output"]
    ranks = att.run_local(_parallel_steps, 2, module, plans, x, y, 0.1, timeout=300)
    ref = copy.deepcopy(module)
    F.cross_entropy(ref(x), y).backward()
    torch.optim.SGD(ref.parameters(), lr=0.1).step()
    for per_plan in ranks:
        for got in per_plan:
            for n, p in ref.named_parameters():
                np.testing.assert_allclose(got[n][0], p.grad.numpy(), rtol=RTOL, atol=ATOL, err_msg=n)
                np.testing.assert_allclose(got[n][1], p.detach().numpy(), rtol=RTOL, atol=ATOL, err_msg=n)


def _parallelize_only(rank, module, plan):
    att.parallelize(copy.deepcopy(module), plan)
    return rank


def test_mesh_of_another_size_than_the_group_is_refused_on_every_rank(mlp_plan):
    """A plan for 2 devices on 3 ranks: each rank's parallelize raises; run_local returns
    within its timeout with that error (every rank exits)."""
    module, _x, _y, plan = mlp_plan
    import time

    start = time.monotonic()
    with pytest.raises(at.Error, match=r"rank \d of 3 raised Error: the plan is for 2 devices but the process "
                                       r"group has 3 ranks"):
        att.run_local(_parallelize_only, 3, module, plan, timeout=120)
    assert time.monotonic() - start < 120


def _one_rank_fails(rank):
    import torch.distributed as dist

    if rank == 1:
        raise ValueError("rank one's own failure")
    t = torch.ones(3)
    dist.all_reduce(t)  # rank 0 waits here for a peer that has gone
    return float(t.sum())


def test_a_failing_rank_ends_every_rank_with_its_error():
    import time

    start = time.monotonic()
    with pytest.raises(at.Error, match=r"rank 1 of 2 raised ValueError: rank one's own failure") as info:
        att.run_local(_one_rank_fails, 2, timeout=60)
    assert time.monotonic() - start < 60
    assert "rank 0 of 2 raised" not in str(info.value).splitlines()[0]


class TwoOutputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        return self.fc(x).unsqueeze(1).expand(-1, 3, -1)


def test_bad_loss_and_target_are_refused_before_export():
    torch.manual_seed(0)
    module = MLP()
    x, y = _data()
    with pytest.raises(at.Error, match=r"must return a scalar tensor.*shape \(8,\) for an output of shape \(8, 5\)"):
        att.plan(module, x, loss=lambda out, t: F.cross_entropy(out, t, reduction="none"), target=y, devices=2)
    with pytest.raises(at.Error, match=r"label 'target' has shape \(8, 2\), but output 'output' of shape \(8, 5\) "
                                       r"needs class indices of shape \(8,\)"):
        att.plan(module, x, loss="cross_entropy", target=torch.zeros(8, 2, dtype=torch.long), devices=2)
    with pytest.raises(at.Error, match=r"label 'target' has shape \(8, 4\), but output 'output' of shape \(8, 5\) "
                                       r"needs a target of shape \(8, 5\)"):
        att.plan(module, x, loss="mse", target=torch.zeros(8, 4), devices=2)
    with pytest.raises(at.Error, match=r"target has shape \(4,\) but the output of MLP has shape \(8, 5\)"):
        att.plan(module, x, loss=F.cross_entropy, target=y[:4], devices=2)
    with pytest.raises(at.Error, match=r"loss mse_loss\(output of shape \(8, 5\), target of shape \(8, 1\)\) failed"):
        att.plan(module, x, loss=F.mse_loss, target=torch.zeros(8, 1), devices=2)
    with pytest.raises(at.Error, match=r"needs target="):
        att.plan(module, x, loss="mse", devices=2)
    with pytest.raises(at.Error, match=r"'cross_entropy', 'mse'.*'hinge'"):
        att.plan(module, x, loss="hinge", target=y, devices=2)


class QR(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return torch.linalg.qr(self.fc(x))[0]


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(8, 8)
        self.layers = nn.ModuleList([nn.Identity(), QR()])

    def forward(self, x):
        return self.layers[1](self.layers[0](self.embed(x)))


def test_a_module_the_exporter_cannot_take_names_the_op_and_module_path():
    with pytest.raises(at.Error, match=r"Encoder cannot be exported to ONNX at op aten::linalg_qr in module "
                                       r"'layers.1': torchscript exporter: .*linalg_qr"):
        att.plan(Encoder(), torch.randn(4, 8), devices=2, exporter="torchscript")


def test_mesh_and_layout_take_the_modules_parameter_names():
    """layout= rules name tensors by the module's own parameter names, and the plan honours
    each of two opposite rules (so neither is the search's own choice by chance)."""
    torch.manual_seed(0)
    module = MLP(n_out=4)
    x, y = _data(n_out=4)
    for rows, cols in (("split(0)", "split(1)"), ("split(1)", "split(0)")):
        dims = {"split(0)": 0, "split(1)": 1}
        plan = att.plan(module, x, loss=F.cross_entropy, target=y, mesh={"model": 2},
                        layout={"fc1.weight": {dims[rows]: "model"}, "fc2.weight": {dims[cols]: "model"}})
        assert plan.devices == 2
        assert (plan.tiling("fc1.weight"), plan.tiling("fc2.weight")) == (rows, cols)


@pytest.mark.slow
def test_auto_exporter_keeps_the_error_that_names_the_op():
    """Both exporters fail on linalg_qr: the message is TorchScript's, which names the op,
    with the module path; dynamo's first line follows."""
    pytest.importorskip("onnxscript", reason="onnxscript is not installed")
    with pytest.raises(at.Error, match=r"at op aten::linalg_qr in module 'layers.1': torchscript exporter: .*"
                                       r"linalg_qr.*\(also tried dynamo: "):
        att.plan(Encoder(), torch.randn(4, 8), devices=2)


def test_planning_leaves_the_module_as_it_was():
    """plan runs the module (recording calls, checking the loss, exporting): its BatchNorm
    statistics, its parameters and its train/eval mode are as before."""
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(8, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 3))
    module.train()
    before = {k: v.clone() for k, v in module.state_dict().items()}
    x, y = torch.randn(8, 8) * 3 + 1, torch.randint(0, 3, (8,))
    att.plan(module, x, loss=F.cross_entropy, target=y, devices=2)
    assert module.training and all(m.training for m in module.modules())
    after = module.state_dict()
    for k, v in before.items():
        assert torch.equal(after[k], v), k


@pytest.mark.parametrize("kwargs", [{}, {"reduction": "sum"}, {"reduction": "none"}, {"ignore_index": 2},
                                    {"weight": "w"}, {"weight": "w", "ignore_index": 1}])
@pytest.mark.parametrize("shape", [(6, 4), (3, 4, 5)])
def test_exported_cross_entropy_form_equals_torchs(kwargs, shape, monkeypatch):
    """The form F.cross_entropy / F.nll_loss take for the export (log_softmax, gather, mean):
    values and input gradients equal torch's own, class dim 1, ignore_index and weights."""
    from autotile.torch import loss as loss_module
    from autotile.torch.loss import exportable_losses

    calls = []
    nll = loss_module._nll
    monkeypatch.setattr(loss_module, "_nll", lambda *a, **k: calls.append(1) or nll(*a, **k))

    g = torch.Generator().manual_seed(3)
    x = torch.randn(*shape, generator=g, dtype=torch.float64)
    t = torch.randint(0, shape[1], (shape[0],) + shape[2:], generator=g)
    kw = dict(kwargs)
    if kw.get("weight") == "w":
        kw["weight"] = torch.rand(shape[1], generator=g, dtype=torch.float64) + 0.5
    for fn in (F.cross_entropy, lambda a, b, **k: F.nll_loss(torch.log_softmax(a, 1), b, **k)):
        want_x = x.clone().requires_grad_()
        want = fn(want_x, t, **kw)
        want.sum().backward()
        got_x = x.clone().requires_grad_()
        with exportable_losses():
            with torch.enable_grad():
                got = fn(got_x, t, **kw)
        got.sum().backward()
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(got_x.grad, want_x.grad)
    assert len(calls) == 2  # both went through the exported form


@pytest.mark.parametrize("kwargs", [{"label_smoothing": 0.2}, {"label_smoothing": 0.1, "reduction": "sum"},
                                    {"label_smoothing": 0.1, "reduction": "none", "ignore_index": 2},
                                    {"label_smoothing": 0.3, "weight": "w", "ignore_index": 1},
                                    {"probabilities": True}, {"probabilities": True, "label_smoothing": 0.2},
                                    {"probabilities": True, "weight": "w", "reduction": "sum"},
                                    {"probabilities": True, "reduction": "none"}])
@pytest.mark.parametrize("shape", [(6, 4), (3, 4, 5)])
def test_exported_cross_entropy_with_smoothing_or_soft_targets_equals_torchs(kwargs, shape, monkeypatch):
    """F.cross_entropy's label_smoothing and class-probability targets in the export's form:
    torch's own values and input gradients (the exporter would emit SoftmaxCrossEntropyLoss,
    which the importer refuses); torch's fused op is not called inside the block."""
    from autotile.torch.loss import exportable_losses

    g = torch.Generator().manual_seed(5)
    x = torch.randn(*shape, generator=g, dtype=torch.float64)
    kw = dict(kwargs)
    if kw.pop("probabilities", False):
        t = torch.softmax(torch.randn(*shape, generator=g, dtype=torch.float64), 1)
    else:
        t = torch.randint(0, shape[1], (shape[0],) + shape[2:], generator=g)
    if kw.get("weight") == "w":
        kw["weight"] = torch.rand(shape[1], generator=g, dtype=torch.float64) + 0.5
    want_x = x.clone().requires_grad_()
    want = F.cross_entropy(want_x, t, **kw)
    want.sum().backward()
    got_x = x.clone().requires_grad_()

    def fused(*args, **kwargs):
        raise AssertionError("torch's fused cross_entropy_loss was called: the form was not decomposed")

    monkeypatch.setattr(torch._C._nn, "cross_entropy_loss", fused)
    with exportable_losses():
        with torch.enable_grad():
            got = F.cross_entropy(got_x, t, **kw)
    monkeypatch.undo()
    got.sum().backward()
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_x.grad, want_x.grad)


@pytest.mark.parametrize("soft", [False, True])
def test_label_smoothing_and_soft_targets_plan_and_train_torchs_loss(soft):
    """A callable F.cross_entropy with label_smoothing (class ids) or with class probabilities
    as the target plans (it was refused: 'operators autotile does not support:
    SoftmaxCrossEntropyLoss') and the planned step's gradients are loss.backward()'s."""
    torch.manual_seed(2)
    module = MLP()
    x, y = _data(seed=2)
    if soft:
        y = torch.softmax(torch.randn(8, 5), 1)

    def loss(out, t):
        return F.cross_entropy(out, t, label_smoothing=0.1)

    plan = att.plan(module, x, loss=loss, target=y, devices=2)
    got = planned_grads(module, plan, {"x": x.numpy(), "target": y.numpy()})
    assert_grads_equal(got, plain_grads(module, loss, x, y))


def test_a_torchscript_refusal_prints_no_ir_graph(capfd):
    """TorchScript refuses F.l1_loss (no ONNX form at opset 17) and dumps its IR graph on the
    process's stdout from C++; plan's auto exporter falls back to dynamo and stdout stays clean,
    as it does when exporter='torchscript' fails with an Error."""
    pytest.importorskip("onnxscript", reason="onnxscript is not installed")
    torch.manual_seed(0)
    module = MLP()
    x = _data()[0]
    t = torch.randn(8, 5)
    capfd.readouterr()
    plan = att.plan(module, x, loss=F.l1_loss, target=t, devices=2)
    assert plan.torch_loss == "l1_loss"
    with pytest.raises(at.Error, match=r"l1_loss"):
        att.plan(module, x, loss=F.l1_loss, target=t, devices=2, exporter="torchscript")
    out = capfd.readouterr().out
    assert "Torch IR graph" not in out and "aten::" not in out, out[:500]
