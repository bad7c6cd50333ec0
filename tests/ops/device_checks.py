"""Graph-level checks for op families on virtual devices: a training step planned by the search
on k devices, and steps under random plans (every tiling and strategy the ops' TDL allows),
must equal the single-device step (outputs, gradients, updated parameters)."""
from __future__ import annotations

import numpy as np

import autotile as at
from test_elemwise_tiles import _check as check_random_plans  # noqa: F401  (re-exported)


def check_planned_step(net, shapes, vals, devices, rtol=1e-4, atol=1e-5):
    """at.backend.run on `devices` (the searched plan) equals devices=1; returns the plan."""
    inputs = {k: vals[k] for k in shapes}
    params = {k: v for k, v in vals.items() if k not in shapes}
    ref = at.backend.run(net, devices=1, inputs=inputs, params=params, train=True)
    plan = at.plan(net, devices=devices, shapes=shapes)
    res = at.backend.run(net, devices=devices, inputs=inputs, params=params, train=True, plan=plan)
    for got, want in zip(res.outputs, ref.outputs):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    assert set(res.grads) == set(ref.grads)
    for p in ref.grads:
        np.testing.assert_allclose(res.grads[p], ref.grads[p], rtol=rtol, atol=atol, err_msg=f"grad of {p}")
        np.testing.assert_allclose(res.params[p], ref.params[p], rtol=rtol, atol=atol, err_msg=f"update of {p}")
    return plan
