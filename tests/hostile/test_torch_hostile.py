"""Hostile inputs to autotile.torch (issue 31): tied parameters (an LM head sharing the
embedding's weight), one weight read in two orientations, buffers, ranks that raise, exit,
are killed or segfault under ``run_local``, arguments of the wrong kind.

Oracle: the plain (unparallelized) module's own SGD step in this process; every
parallelized step runs on 2 gloo ranks (``run_local``)."""
import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'autotile[torch]'; CI installs it)")
pytest.importorskip("onnx", reason="onnx is not installed (autotile.torch.export needs it)")
pytest.importorskip("torch.distributed.tensor", reason="this torch has no torch.distributed.tensor")

import torch.nn as nn  # noqa: E402

import autotile as at  # noqa: E402
import autotile.torch as att  # noqa: E402
from hostile_util import raises_naming  # noqa: E402

TOL = 1e-5  # relative to the plain step's largest magnitude


class TiedLM(nn.Module):
    """An embedding, a hidden layer and an LM head whose weight is the embedding's."""

    def __init__(self, vocab=16, d=8):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.mid = nn.Linear(d, d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(torch.relu(self.mid(self.emb(ids))))


class TwoWays(nn.Module):
    """One weight read as stored and transposed (``x @ W`` then ``h @ W.T``)."""

    def __init__(self, d=8):
        super().__init__()
        self.w = nn.Parameter(torch.randn(d, d) / d ** 0.5)
        self.b = nn.Parameter(torch.randn(d) / d)

    def forward(self, x):
        return torch.relu(x @ self.w + self.b) @ self.w.t()


def _plain_step(module, inputs, lr=0.1):
    """{parameter name (every owner): (gradient, updated value)} of the plain module's step."""
    ref = copy.deepcopy(module)
    att.sgd_step(ref, inputs, lr)
    return {n: (p.grad.numpy().copy(), p.detach().numpy().copy())
            for n, p in ref.named_parameters(remove_duplicate=False)}


def _parallel_step(rank, module, plan, sym, inputs, lr=0.1):
    """The same step of `module` parallelized by `plan`: every owner's gradient and update
    (gathered), which owners share one tensor, and each parameter's placements and local shape."""
    mod = att.parallelize(copy.deepcopy(module), plan, sym)
    att.sgd_step(mod, inputs, lr)
    named = list(mod.named_parameters(remove_duplicate=False))
    return {"step": {n: (p.grad.full_tensor().numpy(), p.full_tensor().detach().numpy()) for n, p in named},
            "shared": sorted(sorted(n for n, q in named if q is p) for _, p in named),
            "layout": {n: ([str(x) for x in p.placements], tuple(p.to_local().shape)) for n, p in named}}


def _check_against_plain(module, plan, sym, inputs, got):
    want = _plain_step(module, inputs)
    for rank_result in got:
        assert sorted(rank_result["step"]) == sorted(want)
        for name, (grad, value) in want.items():
            g, v = rank_result["step"][name]
            scale = max(1.0, float(np.abs(grad).max()))
            assert np.abs(g - grad).max() <= TOL * scale, (name, float(np.abs(g - grad).max()), scale)
            assert np.abs(v - value).max() <= TOL * max(1.0, float(np.abs(value).max())), name


def test_tied_parameters_stay_one_tensor_and_train_on_the_summed_gradient():
    """The LM head's weight is the embedding's: parallelized, both owners hold one DTensor
    whose gradient is both uses' (was: two parameters, each on its own share: off by ~10
    where the gradient's scale is 13.5). compare_step reports both owners."""
    torch.manual_seed(0)
    m, ids = TiedLM(), torch.randint(0, 16, (4, 6))
    sym = att.export(m, ids)
    plan = at.plan(sym, devices=2, shapes={"ids": (4, 6)})
    assert "emb.weight" in plan.param_names and "head.weight" not in plan.param_names

    def job(rank):
        return _parallel_step(rank, m, plan, sym, (ids,)), att.compare_step(rank, m, plan, sym, (ids,))

    results = att.run_local(job, 2, timeout=120)
    got = [r[0] for r in results]
    for r in got:
        assert ["emb.weight", "head.weight"] in r["shared"]
    _check_against_plain(m, plan, sym, (ids,), got)
    for _, report in results:
        for k in ("output", "grad", "param"):
            assert report["diff"][k] <= TOL * max(1.0, report["scale"][k]), (k, report["diff"])


def test_compare_step_reports_an_untied_parameter_rather_than_failing_on_its_name():
    """A parallelizer that unties ``head.weight`` from ``emb.weight`` (as parallelize did)
    must show in compare_step's gradient difference, by the owner's name."""
    torch.manual_seed(0)
    m, ids = TiedLM(), torch.randint(0, 16, (4, 6))
    sym = att.export(m, ids)
    plan = at.plan(sym, devices=2, shapes={"ids": (4, 6)})

    def job(rank):
        import autotile.torch.parallel as par

        real = par.parallelize

        def untying(module, *args, **kwargs):
            out = real(module, *args, **kwargs)
            w = module.head.weight
            module.head.weight = nn.Parameter(w.detach().clone())  # its own tensor now
            return out

        par.parallelize = untying
        try:
            return att.compare_step(rank, m, plan, sym, (ids,))
        finally:
            par.parallelize = real

    report = att.run_local(job, 2, timeout=120)[0]
    assert report["diff"]["grad"] > 0.1 * report["scale"]["grad"], report
    assert report["worst"]["grad"] in ("emb.weight", "head.weight"), report["worst"]
