"""Swapped plans (exec/swap_plan.h) on the GPU runtime: swap-outs and swap-ins run on each
worker's swap stream between the arena and a pinned host pool, ordered by events. On the CPU
stand-in (SimDevices: every stream deferred, random interleavings) a plan at half the memory
its tensors need gives the single-device step; on a real GPU (``pytest -m gpu``, skipped
without one) the same, with the host pool really page-locked."""
import numpy as np
import pytest

import autotile as at
from autotile.backend.gpu_runtime import run_gpu
from autotile.execgraph import transform
from sim_devices import SimDevices


def swapped_plan(swap_models, name, workers):
    """(sym, shapes, classes, plan at half its need, budget, swap ops in its graph)."""
    sym, shapes, classes = swap_models.MODELS[name]()
    plan = at.plan(sym, devices=workers, shapes=shapes)
    need = max(transform(sym, plan).peak_memory(d) for d in range(workers))
    plan.swap_budget = need // 2
    eg = transform(sym, plan)
    n_swaps = sum(o["kind"] in ("swap_out", "swap_in") for o in eg.ops)
    assert n_swaps > 0, f"{name}: half the memory must need swapping"
    return sym, shapes, classes, plan, need // 2, n_swaps


@pytest.mark.parametrize("name", ["mlp", "cnn", "lstm"])
@pytest.mark.parametrize("workers,n_gpus,seed", [(1, 1, 0), (2, 2, 1), (2, 1, 2)])
def test_swapped_step_matches_single_device(exec_models, swap_models, fetch_emulation, name, workers, n_gpus, seed):
    sym, shapes, classes, plan, budget, n_swaps = swapped_plan(swap_models, name, workers)
    vals = exec_models.values(sym, shapes, classes)
    ref = exec_models.reference_step(sym, shapes, vals)
    dev = SimDevices(workers, fetch_emulation, n_gpus=n_gpus, seed=seed)
    res = run_gpu(sym, workers, vals, plan=plan, gpu_devices=dev)
    exec_models.assert_same_step(res, ref, f"{name} x{workers} swapped at {budget} bytes")
    assert dev.swap_copies == n_swaps and res.stats["swap_bytes"] > 0
    assert dev.pinned_bytes == sum(res.stats["host_pool_bytes"]) > 0
    assert max(res.stats["arena_bytes"]) <= budget


def test_stand_in_catches_a_missing_swap_wait(exec_models, swap_models, fetch_emulation, monkeypatch):
    """The stand-in has teeth for swaps too: with the swap streams' waits dropped (a swap-out
    may copy before its tensor is written), some interleaving gives a wrong step."""
    sym, shapes, classes, plan, _, _ = swapped_plan(swap_models, "mlp", 1)
    vals = exec_models.values(sym, shapes, classes)
    ref = exec_models.reference_step(sym, shapes, vals)
    wait = SimDevices.wait
    monkeypatch.setattr(SimDevices, "wait",
                        lambda self, worker, stream, event: None if stream.name.startswith("swap")
                        else wait(self, worker, stream, event))
    wrong = 0
    for seed in range(6):
        try:
            exec_models.assert_same_step(run_gpu(sym, 1, vals, plan=plan, gpu_devices=SimDevices(1, fetch_emulation,
                                                                                                  seed=seed)),
                                         ref, "swap waits dropped")
        except AssertionError:
            wrong += 1
    assert wrong > 0


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["mlp", "cnn", "lstm"])
def test_swapped_step_on_a_gpu(exec_models, swap_models, name):
    from test_gpu_device import _gpu_or_skip

    cupy = _gpu_or_skip()
    from autotile.backend.gpu_runtime import CupyDevices, GpuRuntime

    sym, shapes, classes, plan, budget, _ = swapped_plan(swap_models, name, 1)
    vals = exec_models.values(sym, shapes, classes)
    ref = exec_models.reference_step(sym, shapes, vals)
    res = run_gpu(sym, 1, vals, plan=plan)
    exec_models.assert_same_step(res, ref, f"{name} swapped on a GPU")
    assert res.stats["swap_bytes"] > 0 and max(res.stats["arena_bytes"]) <= budget
    rt = GpuRuntime(transform(sym, plan), devices=CupyDevices(1))
    pool = rt.host_pools[0]
    attrs = cupy.cuda.runtime.pointerGetAttributes(int(pool.ctypes.data))
    assert attrs.type == cupy.cuda.runtime.memoryTypeHost, "the host pool is page-locked"
    assert isinstance(pool, np.ndarray)


def carried_steps(exec_models, workers, make_devices, what):
    """A weight-heavy MLP at half its need (tests/execgraph/test_swap_steps.py): its weights and
    momenta are loaded into the pinned host pools and swapped in at first use, its results stay
    there and are gathered from there; three steps on the devices `make_devices(step)` gives,
    each fed the last one's params and states, are bit for bit the unconstrained plan's steps."""
    import test_swap_steps as steps

    sym, shapes, classes = steps.wide_mlp()
    free, half, budget = steps.half_need_plan(sym, shapes, workers, "momentum")
    vals = exec_models.values(sym, shapes, classes)
    eg = transform(sym, half)
    assert any(eg.buffers[eg.core.tile(eg.tensor_id[n], 0)]["host"] for n in eg.training.updated_names)
    runs = []
    for plan in (half, free):
        params = {k: v for k, v in vals.items() if k not in shapes}
        states, got = {}, []
        for step in range(3):
            res = run_gpu(sym, workers, {**{k: vals[k] for k in shapes}, **params, **states}, plan=plan,
                          optimizer="momentum", optimizer_args={"lr": 0.05}, seed=step, gpu_devices=make_devices(step))
            params, states = res.params, res.states
            got.append(res)
        runs.append(got)
    for step, (got, want) in enumerate(zip(*runs)):
        assert max(got.stats["arena_bytes"]) <= budget and got.stats["swap_bytes"] > 0
        steps.assert_bit_equal(got, want, f"x{workers} step {step + 1} {what} at half the need")


@pytest.mark.parametrize("workers,n_gpus,seed", [(1, 1, 3), (2, 2, 4), (4, 2, 5)])
def test_results_kept_on_the_host_carry_over_steps(exec_models, swap_models, fetch_emulation, workers, n_gpus, seed):
    """carried_steps on the stand-in, random stream interleavings."""
    carried_steps(exec_models, workers, lambda step: SimDevices(workers, fetch_emulation, n_gpus=n_gpus,
                                                                seed=seed + step), "on the stand-in")


@pytest.mark.gpu
def test_results_kept_on_the_host_carry_over_steps_on_a_gpu(exec_models, swap_models):
    """carried_steps on a real GPU, one worker."""
    from test_gpu_device import _gpu_or_skip

    _gpu_or_skip()
    carried_steps(exec_models, 1, lambda step: None, "on a GPU")
