"""Data parallelism as users know it (algorithm="data"): every zoo model with BatchNorm
plans without replicate_fallback, BatchNorm splits along the batch with its statistics
all-reduced (synchronous BatchNorm, ops/sync_batchnorm.py), the ops that cannot split run
replicated and the plan says which, and a step equals the single-device step."""
import numpy as np
import pytest

import autotile as at
from autotile.backend.multi_device import run_multi_device

BN_ZOO = ["vgg11_bn", "vgg16_bn", "resnet50", "wresnet-50-2"]


def _sizes(sym):
    args, _, _ = sym.infer_shape()
    return dict(zip(sym.list_arguments(), args))


@pytest.mark.parametrize("devices", [2, 4])
@pytest.mark.parametrize("model", BN_ZOO)
def test_zoo_models_with_batchnorm_plan_as_data_parallelism(model, devices):
    sym = at.models.get(model, batch=16)
    plan = at.plan(model, devices=devices, batch=16, algorithm="data")
    sizes = _sizes(sym)
    weights = sum(int(np.prod(s)) for n, s in sizes.items() if n not in ("data", "softmax_label"))
    channels = sum(sizes[f"{n.name}_gamma"][0] for n in sym.topo_nodes() if n.op == "BatchNorm")
    # Every cut all-reduces what data parallelism all-reduces: each weight's gradient, and per
    # BatchNorm 4 per-channel vectors (E[x] and E[x^2] forward, the gradients of the mean and
    # inverse std backward). A 2-way cut of an all-reduce moves 2 x the bytes; cut i runs in
    # 2^(i-1) groups, so d devices move (d - 1) x 2 x 4 bytes per number.
    expected = (devices - 1) * 2 * 4 * (weights + 4 * channels)
    assert plan.comm_bytes == pytest.approx(expected, rel=1e-5)
    for node, op in plan.node_ops.items():
        if op in ("_bn_moments", "_bn_apply", "_backward_bn_apply") and node not in plan.replicated_nodes():
            assert set(plan.node_strategies[node]) <= {"n"}, (node, plan.node_strategies[node])
    # ResNet's first BatchNorm normalises the 3 image channels: its statistics (3 numbers) cannot
    # split 2 ways and run replicated, which the summary reports.
    want = {"bn_data_stats", "bn_data_gamma_update", "bn_data_beta_update"} if "resnet" in model else set()
    assert set(plan.replicated_nodes()) == want
    if want:
        assert "replicated ops" in plan.summary() and "bn_data_stats (_bn_stats)" in plan.summary()
    else:
        assert "replicated ops" not in plan.summary()


def test_data_parallel_batchnorm_is_far_cheaper_than_replicating_it():
    sync = at.plan("vgg16_bn", devices=4, batch=32, algorithm="data")
    replicated = at.plan("vgg16_bn", devices=4, batch=32, algorithm="data", replicate_fallback=True)
    assert replicated.comm_bytes == pytest.approx(sync.comm_bytes)  # the fallback is never needed now
    assert not replicated.replicated_nodes()


def test_ops_that_cannot_split_along_the_batch_run_replicated_and_are_named():
    # The unrolled RNN concatenates its timesteps along dim 0 (step-major): no batch split. What
    # follows it (the prediction layer, the loss and their gradients) holds the batch in no
    # dim, so it runs replicated too rather than split along the steps (issue 31).
    plan = at.plan("rnn-2-64", devices=4, batch=8, algorithm="data")
    assert plan.replicated_nodes() == ["concat", "pred", "softmax", "softmax_backward0", "pred_backward0",
                                       "concat_backward0"]
    assert "replicated ops (no split allowed in some cut): 6: concat (Concat)" in plan.summary()


def _small_models():
    return {
        "resnet": at.models.wresnet(50, 1, 8, classes=10, image=32, units=(1, 1, 1, 1)),
        "vgg11_bn": at.models.vgg(11, 8, batch_norm=True, classes=10, image=32),
    }


def _values(sym, seed=0):
    rng = np.random.default_rng(seed)
    args, _, aux = sym.infer_shape()
    vals = {}
    for name, shape in zip(sym.list_arguments() + sym.list_auxiliary_states(), args + aux):
        if name.endswith("label"):
            vals[name] = rng.integers(0, 10, size=shape).astype(np.float32)
        elif name.endswith("moving_var"):
            vals[name] = (rng.random(shape) + 0.5).astype(np.float32)
        else:
            vals[name] = (rng.standard_normal(shape) * 0.3).astype(np.float32)
    return vals


def _close(got, want, what, scale=None):
    # float32 through up to 17 BatchNorms: compare at the scale of each tensor (elementwise
    # rtol fails on entries near zero whose absolute error is at float32 noise)
    scale = scale or float(np.max(np.abs(want))) or 1.0
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * scale, err_msg=what)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["resnet", "vgg11_bn"])
def test_data_parallel_step_equals_single_device(model):
    sym = _small_models()[model]
    vals = _values(sym)
    inputs = {k: vals[k] for k in ("data", "softmax_label")}
    params = {k: v for k, v in vals.items() if k in set(sym.list_arguments()) and k not in inputs}
    aux = {k: vals[k] for k in sym.list_auxiliary_states()}
    ref = at.backend.run(sym, inputs=inputs, params=params, aux=aux, train=True)
    for devices in (2, 4):
        plan = at.plan(sym, devices=devices, shapes={k: v.shape for k, v in inputs.items()}, algorithm="data")
        res = run_multi_device(sym, devices, vals, plan=plan)
        what = f"{model} data x{devices}"
        for got, want in zip(res.outputs, ref.outputs):
            _close(got, want, f"{what}: output")
        for p in ref.grads:
            # A bias added right before a BatchNorm has gradient 0 in exact arithmetic (BatchNorm
            # subtracts the channel mean): both sides hold float32 noise, at the scale of the
            # layer's weight gradient.
            before_bn = p.endswith("_bias") and f"bn{p[4:-5]}_gamma" in ref.grads
            scale = float(np.max(np.abs(ref.grads[p[:-5] + "_weight"]))) if before_bn else None
            _close(res.grads[p], ref.grads[p], f"{what}: grad of {p}", scale)
            if not before_bn:  # (their update moves by lr x noise)
                _close(res.params[p], ref.params[p], f"{what}: update of {p}")
        for name, want in (getattr(res, "aux", None) or {}).items():  # moving statistics, where returned
            _close(want, ref.aux[name], f"{what}: aux {name}")
        assert res.stats["bytes"] == pytest.approx(plan.comm_bytes)
