"""The planned training step on k virtual devices equals the single-device step (outputs,
gradients, updated params), for each partition algorithm, on MLP, CNN, residual,
concat-branch and LSTM graphs; and the execution graph moves exactly the bytes the plan's
cost model predicts."""
import pytest

import autotile as at
from autotile.backend.multi_device import run_multi_device
from autotile.execgraph import transform
from autotile.planner import ALGORITHMS
from models import MODELS, assert_same_step, reference_step, values


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("devices", [2, 4, 6, 8])
@pytest.mark.parametrize("algorithm", ["tofu", "data"])
def test_planned_step_matches_single_device(model, devices, algorithm):
    sym, shapes, classes = MODELS[model]()
    vals = values(sym, shapes, classes)
    ref = reference_step(sym, shapes, vals)
    # Data parallelism cannot split the unrolled RNN's Concat of timesteps (step-major along
    # dim 0) by the batch: replicate_fallback runs that op replicated.
    plan = at.plan(sym, devices=devices, shapes=shapes, algorithm=algorithm,
                   replicate_fallback=model == "lstm" and algorithm == "data")
    res = run_multi_device(sym, devices, vals, plan=plan)
    assert_same_step(res, ref, f"{model} {algorithm} x{devices}")
    assert res.stats["bytes"] == pytest.approx(plan.comm_bytes)


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_exec_bytes_equal_plan_bytes(model):
    sym, shapes, _ = MODELS[model]()
    for devices in (2, 4, 6, 8):
        plan = at.plan(sym, devices=devices, shapes=shapes)
        stats = transform(sym, plan).stats()
        assert stats["bytes"] == pytest.approx(plan.comm_bytes)
        assert sum(stats["bytes_per_device"]) == stats["bytes"]


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_without_control_deps_same_result(model):
    # ASAP order (no control deps) changes the memory plan and the per-device order, never the result.
    sym, shapes, classes = MODELS[model]()
    vals = values(sym, shapes, classes)
    ref = reference_step(sym, shapes, vals)
    plan = at.plan(sym, devices=4, shapes=shapes)
    res = run_multi_device(sym, 4, vals, plan=plan, control_deps=False)
    assert_same_step(res, ref, f"{model} without control deps")


def test_bad_input_is_refused_before_running():
    sym, shapes, classes = MODELS["mlp"]()
    vals = values(sym, shapes, classes)
    plan = at.plan(sym, devices=4, shapes=shapes)
    with pytest.raises(at.Error, match="made for 4 devices"):
        run_multi_device(sym, 2, vals, plan=plan)
    with pytest.raises(at.Error, match="device_memory"):
        transform(sym, plan, device_memory=1000)
    bad = dict(vals, data=vals["data"][:, :5])
    with pytest.raises(at.Error, match="data"):
        at.backend.run(sym, devices=4, inputs={k: bad[k] for k in shapes},
                       params={k: v for k, v in bad.items() if k not in shapes}, train=True, plan=plan)
    other, other_shapes, _ = MODELS["residual"]()
    with pytest.raises(at.Error, match="another graph"):
        transform(other, plan)


def test_kernel_failure_stops_every_device_and_names_the_node():
    sym, shapes, classes = MODELS["mlp"]()
    vals = values(sym, shapes, classes)
    vals["softmax_label"] = vals["softmax_label"] + 100  # labels out of range: the loss kernel raises
    plan = at.plan(sym, devices=4, shapes=shapes)
    with pytest.raises(at.Error, match="softmax"):
        run_multi_device(sym, 4, vals, plan=plan)


@pytest.mark.parametrize("algorithm", [a for a in ALGORITHMS if a not in ("tofu", "data", "bruteforce")])
@pytest.mark.parametrize("model", ["mlp", "cnn", "residual"])
def test_every_baseline_plan_executes_correctly(model, algorithm):
    sym, shapes, classes = MODELS[model]()
    vals = values(sym, shapes, classes)
    ref = reference_step(sym, shapes, vals)
    plan = at.plan(sym, devices=4, shapes=shapes, algorithm=algorithm)
    res = run_multi_device(sym, 4, vals, plan=plan)
    assert_same_step(res, ref, f"{model} {algorithm} x4")
    assert res.stats["bytes"] == pytest.approx(plan.comm_bytes)
