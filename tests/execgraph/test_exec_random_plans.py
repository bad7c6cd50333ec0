"""Any valid plan, executed on k virtual devices, gives the single-device training step
(outputs, gradients, updated params). Plans are random (tests/execgraph/random_plans.py),
so the execution graph is checked independently of the search."""
import numpy as np
import pytest

import autotile as at
from autotile.backend.multi_device import run_multi_device
from random_plans import lowered_training_graph, random_plan


def _mlp(bias):
    x = at.sym.Variable("data")
    label = at.sym.Variable("softmax_label")
    h = at.sym.FullyConnected(x, num_hidden=8, no_bias=not bias, name="fc1")
    h = at.sym.Activation(h, act_type="tanh", name="a1")
    h = at.sym.FullyConnected(h, num_hidden=4, no_bias=not bias, name="fc2")
    return at.sym.SoftmaxOutput(h, label, name="softmax")





def _values(rng, bias):
    vals = {"data": rng.standard_normal((4, 6)).astype(np.float32),
            "softmax_label": np.array([0, 1, 2, 3], np.float32),
            "fc1_weight": (rng.standard_normal((8, 6)) * 0.3).astype(np.float32),
            "fc2_weight": (rng.standard_normal((4, 8)) * 0.3).astype(np.float32)}
    if bias:
        vals["fc1_bias"] = rng.standard_normal(8).astype(np.float32)
        vals["fc2_bias"] = rng.standard_normal(4).astype(np.float32)
    return vals


def assert_same_step(res, ref):
    np.testing.assert_allclose(res.outputs[0], ref.outputs[0], rtol=1e-5, atol=1e-6)
    for p in ref.grads:
        np.testing.assert_allclose(res.grads[p], ref.grads[p], rtol=1e-4, atol=1e-6, err_msg=f"grad of {p}")
        np.testing.assert_allclose(res.params[p], ref.params[p], rtol=1e-4, atol=1e-6, err_msg=f"update of {p}")


@pytest.mark.parametrize("factors", [[2], [2, 2], [3], [2, 3]])
@pytest.mark.parametrize("bias", [False, True])
def test_random_plans_match_single_device(factors, bias):
    net = _mlp(bias)
    shapes = {"data": (4, 6), "softmax_label": (4,)}
    low = lowered_training_graph(net, shapes)
    rng = np.random.default_rng(sum(factors) + 10 * bias)
    vals = _values(rng, bias)
    ref = at.backend.run(net, inputs={k: vals[k] for k in shapes},
                         params={k: v for k, v in vals.items() if k not in shapes}, train=True)
    for _ in range(6):
        plan = random_plan(low, factors, rng, input_shapes=shapes)
        res = run_multi_device(net, plan.devices, vals, plan=plan)
        assert_same_step(res, ref)


@pytest.mark.parametrize("model,factors", [("cnn", [2]), ("cnn", [2, 2]), ("cnn", [3, 2]), ("residual", [2, 2]),
                                           ("concat", [2, 3]),
                                           ("lstm", [2]), ("bn", [2, 2])])
def test_random_plans_on_models(model, factors):
    """Random plans split convolutions spatially (halos, asymmetric tile padding), channels and
    batch, reduce partial sums, and re-layout tensors; every one gives the single-device step."""
    from models import assert_same_step, random_plan_case

    sym, shapes, vals, low, ref = random_plan_case(model)
    rng = np.random.default_rng(len(factors) * 7 + sum(factors))
    for _ in range(4):
        plan = random_plan(low, factors, rng, input_shapes=shapes)
        res = run_multi_device(sym, plan.devices, vals, plan=plan)
        assert_same_step(res, ref, f"{model} under a random plan {factors}")
