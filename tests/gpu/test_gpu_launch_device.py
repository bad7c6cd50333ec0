"""The launch list on a CUDA GPU with CuPy (``pytest -m gpu``; deselected by default and
skipped without a GPU): the step captured as a CUDA graph and replayed over several training
steps equals the op-by-op GPU step and the host runtime's, on 1, 2, 4 and 8 workers sharing
the GPU(s), with a swapped plan and an accumulating fetch; host ops keep the step uncaptured
and are named."""
import numpy as np
import pytest

import autotile as at
from autotile.backend.gpu_launch import train_steps
from autotile.backend.gpu_runtime import CupyDevices, GpuRuntime
from autotile.backend.host_runtime import HostRuntime
from autotile.execgraph import transform
from test_gpu_device import _gpu_or_skip
from test_gpu_launch import HOST_ATOL, assert_steps_equal, new_batches

pytestmark = pytest.mark.gpu


def _steps(sym, plan, vals, steps=3, **kw):
    batches = new_batches(vals, steps)
    rt = GpuRuntime(transform(sym, plan), devices=CupyDevices(plan.devices), **kw)
    got = train_steps(rt, vals, steps, batches=batches)
    fresh = train_steps(GpuRuntime(transform(sym, plan), devices=CupyDevices(plan.devices), replay=False, **kw),
                        vals, steps, batches=batches)
    host = train_steps(HostRuntime(transform(sym, plan)), vals, steps, batches=batches)
    return rt, got, fresh, host


@pytest.mark.parametrize("model", ["mlp", "cnn", "bn", "residual", "lstm"])
@pytest.mark.parametrize("workers", [1, 2, 4, 8])
def test_captured_steps_on_a_gpu(exec_models, model, workers):
    _gpu_or_skip()
    sym, shapes, classes = exec_models.MODELS[model]()
    vals = exec_models.values(sym, shapes, classes)
    rt, got, fresh, host = _steps(sym, at.plan(sym, devices=workers, shapes=shapes), vals)
    what = f"{model} x{workers} on a GPU"
    assert_steps_equal(got, fresh, what + " (graph vs op by op)", rtol=1e-3, atol=1e-4)
    assert_steps_equal(got, host, what + " (graph vs host)", rtol=1e-3, atol=max(HOST_ATOL, 1e-4))
    cap = got[1][2]["capture"]
    if cap["n_blocked"] == 0:  # op types still on the host path (dispatch failed) keep it uncaptured
        assert cap["captured"], cap["reason"]
        assert [st["launch"]["mode"] for _, _, st in got] == ["ops", "graph", "graph"]
    else:
        assert got[2][2]["launch"]["mode"] == "replay" and cap["blocked_by"]


def test_swapped_and_accumulating_on_a_gpu(exec_models, swap_models):
    _gpu_or_skip()
    sym, shapes, classes = swap_models.MODELS["cnn"]()
    plan = at.plan(sym, devices=2, shapes=shapes)
    plan.swap_budget = max(transform(sym, plan).peak_memory(d) for d in range(2)) // 2
    vals = {k: v if k.endswith("label") or k == "data" else v * 0.3
            for k, v in exec_models.values(sym, shapes, classes).items()}
    rt, got, fresh, host = _steps(sym, plan, vals)
    assert rt.launch.describe("graph")["by_kind"].get("swap_out", 0) > 0
    assert_steps_equal(got, host, "cnn x2 swapped on a GPU (graph vs host)", rtol=1e-3, atol=1e-4)
    sym, shapes, classes = exec_models.MODELS["mlp"]()
    plan = at.plan(sym, devices=4, shapes=shapes)
    assert any(o["kind"] == "fetch" and o["accumulate"] for o in transform(sym, plan).ops)
    vals = exec_models.values(sym, shapes, classes)
    rt, got, fresh, host = _steps(sym, plan, vals)
    assert_steps_equal(got, host, "mlp x4 accumulating on a GPU (graph vs host)", rtol=1e-3, atol=1e-4)


def test_host_ops_stay_uncaptured_on_a_gpu(exec_models):
    _gpu_or_skip()
    sym, shapes, classes = exec_models.MODELS["cnn"]()
    vals = exec_models.values(sym, shapes, classes)
    rt, got, fresh, host = _steps(sym, at.plan(sym, devices=2, shapes=shapes), vals, host_ops={"Convolution"})
    cap = got[1][2]["capture"]
    assert not cap["captured"] and any("(Convolution)" in b for b in cap["blocked_by"])
    assert_steps_equal(got, host, "cnn x2 host convolutions on a GPU", rtol=1e-3, atol=1e-4)
    assert np.isfinite(got[-1][0][rt.eg.training.updated_names[0]]).all()
