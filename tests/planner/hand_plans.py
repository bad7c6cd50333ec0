"""Hand-made plans for tests: a searched plan with chosen nodes split as given, and the check
that a plan's k-device training step equals the 1-device step in float64."""
import dataclasses

import numpy as np

import autotile as at


def hand_plan(plan, strategies):
    """`plan` with the named nodes split as given, every other node and every tensor replicated."""
    rep = ["replicate"] * len(plan.factors)
    return dataclasses.replace(plan, algorithm="hand", tensor_tilings={n: list(rep) for n in plan.tensor_tilings},
                               node_strategies={n: list(strategies.get(n, rep)) for n in plan.node_strategies})


def assert_plans_train_as_one_device(net, inputs, params, plans, devices=8):
    """Each plan's training step on `devices` equals the 1-device step: float64 outputs,
    gradients and updated parameters to 1e-12."""
    want = at.backend.run(net, devices=1, inputs=inputs, params=params, train=True)
    for p in plans:
        got = at.backend.run(net, devices=devices, inputs=inputs, params=params, train=True, plan=p)
        assert got.outputs[0].dtype == np.float64
        np.testing.assert_allclose(got.outputs[0], want.outputs[0], rtol=1e-12)
        for name in params:
            np.testing.assert_allclose(got.grads[name], want.grads[name], rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(got.params[name], want.params[name], rtol=1e-12, atol=1e-12)
