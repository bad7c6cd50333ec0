"""Steps that hand state to the next one on k devices equal the same steps on one device:
params, optimizer states (momentum, Adam; ``res.states`` fed back as ``states=``) and
BatchNorm moving statistics (``res.aux`` fed back as ``aux=``), with ``optimizer_args``.
Float64 models stay float64 on k devices."""
import os
import sys

import numpy as np
import pytest

import autotile as at

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "execgraph"))
from models import MODELS, assert_same_step, values  # noqa: E402


def _steps(sym, shapes, vals, devices, n, optimizer, optimizer_args, **kw):
    """`n` training steps, each fed the last one's params, optimizer states and aux."""
    inputs = {k: vals[k] for k in shapes}
    params = {k: v for k, v in vals.items() if k not in shapes and k not in sym.list_auxiliary_states()}
    aux = {k: vals[k] for k in sym.list_auxiliary_states()}
    states, results = {}, []
    for step in range(n):
        res = at.backend.run(sym, devices=devices, inputs=inputs, params=params, aux=aux, states=states, train=True,
                             optimizer=optimizer, optimizer_args=optimizer_args, seed=step, **kw)
        params, states, aux = res.params, res.states, res.aux
        results.append(res)
    return results


@pytest.mark.parametrize("model,optimizer", [("bn", "momentum"), ("mlp", "momentum"), ("cnn", "adam")])
def test_three_steps_on_4_devices_equal_three_on_1(model, optimizer):
    sym, shapes, classes = MODELS[model]()
    vals = values(sym, shapes, classes)
    args = {"lr": 0.05, "wd": 1e-4} if optimizer == "momentum" else {"lr": 0.01}
    one = _steps(sym, shapes, vals, 1, 3, optimizer, args)
    plan = at.plan(sym, devices=4, shapes=shapes, optimizer=optimizer)  # planned once, as autotile run does
    four = _steps(sym, shapes, vals, 4, 3, optimizer, args, plan=plan)
    for step, (got, want) in enumerate(zip(four, one)):
        assert sorted(want.states) == sorted(got.states) and want.states, "the optimizer keeps states"
        assert_same_step(got, want, f"{model} {optimizer} step {step + 1} on 4 devices")
    # the states did carry: step 3 from zero momenta differs from step 3 of the chain
    fresh = at.backend.run(sym, devices=4, inputs={k: vals[k] for k in shapes}, train=True, optimizer=optimizer,
                           optimizer_args=args, params=one[1].params, aux=one[1].aux, seed=2, plan=plan)
    p = next(iter(one[2].params))
    assert not np.allclose(fresh.params[p], one[2].params[p], rtol=1e-6, atol=1e-9)
    if model == "bn":  # moving statistics moved every step
        for a in one[0].aux:
            assert not np.allclose(one[2].aux[a], one[1].aux[a])


def test_optimizer_args_reach_the_update_on_k_devices():
    sym, shapes, classes = MODELS["mlp"]()
    vals = values(sym, shapes, classes)
    inputs = {k: vals[k] for k in shapes}
    params = {k: v for k, v in vals.items() if k not in shapes}
    frozen = at.backend.run(sym, devices=2, inputs=inputs, params=params, train=True, optimizer_args={"lr": 0.0})
    for p, v in params.items():
        np.testing.assert_array_equal(frozen.params[p], v)
    res = at.backend.run(sym, devices=2, inputs=inputs, params=params, train=True, optimizer_args={"lr": 0.5})
    for p, v in params.items():
        np.testing.assert_allclose(res.params[p], v - 0.5 * res.grads[p], rtol=1e-5, atol=1e-6)


def test_states_are_checked():
    sym, shapes, classes = MODELS["mlp"]()
    vals = values(sym, shapes, classes)
    kw = dict(inputs={k: vals[k] for k in shapes}, params={k: v for k, v in vals.items() if k not in shapes})
    with pytest.raises(at.Error, match=r"states \['fc1_weight_velocity'\] are not optimizer states of 'momentum'"):
        at.backend.run(sym, devices=2, train=True, optimizer="momentum",
                       states={"fc1_weight_velocity": np.zeros((16, 12))}, **kw)
    with pytest.raises(at.Error, match="only used with train=True"):
        at.backend.run(sym, devices=2, states={"fc1_weight_mom": np.zeros((16, 12))}, **kw)


@pytest.mark.parametrize("train", [True, False])
def test_float64_stays_float64_on_k_devices(train):
    sym, shapes, classes = MODELS["bn"]()
    vals = {k: v.astype(np.float64) for k, v in values(sym, shapes, classes).items()}
    inputs = {k: vals[k] for k in shapes}
    params = {k: v for k, v in vals.items() if k not in shapes}
    ref = at.backend.run(sym, inputs=inputs, params=params, train=train)
    assert ref.outputs[0].dtype == np.float64
    for devices in (2, 4):
        res = at.backend.run(sym, devices=devices, inputs=inputs, params=params, train=train)
        assert_same_step(res, ref, f"float64 on {devices} devices")  # dtypes compared too
        # float64 precision, not float32's: agreement far below float32's epsilon
        np.testing.assert_allclose(res.outputs[0], ref.outputs[0], rtol=1e-12, atol=1e-13)
        for kind in ("grads", "params", "aux"):
            for name, want in getattr(ref, kind).items():
                got = getattr(res, kind)[name]
                assert got.dtype == np.float64, (kind, name, got.dtype)
                np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12 * max(1.0, np.abs(want).max()))
