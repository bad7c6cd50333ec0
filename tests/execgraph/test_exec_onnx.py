"""Training steps of real ONNX models (the light AlexNet/VGG-19 shipped in the onnx wheel,
grouped convolutions, LRN, dropout) on several virtual devices equal the single-device step."""
import os

import numpy as np
import pytest

import autotile as at
from models import onnx_light

onnx = pytest.importorskip("onnx")
LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def _check(name, batch, devices):
    sym, inputs, params = onnx_light(name, batch)
    ref = at.backend.run(sym, inputs=inputs, params=params, train=True)
    for d in devices:
        res = at.backend.run(sym, devices=d, inputs=inputs, params=params, train=True)
        np.testing.assert_allclose(res.outputs[0], ref.outputs[0], rtol=1e-4, atol=1e-6)
        for p in ref.grads:
            np.testing.assert_allclose(res.grads[p], ref.grads[p], rtol=1e-3, atol=1e-5, err_msg=f"{name} x{d}: {p}")
            np.testing.assert_allclose(res.params[p], ref.params[p], rtol=1e-3, atol=1e-5)
        assert sorted(res.aux) == sorted(ref.aux) and sorted(res.states) == sorted(ref.states)
        for a in ref.aux:
            np.testing.assert_allclose(res.aux[a], ref.aux[a], rtol=1e-4, atol=1e-6, err_msg=f"{name} x{d}: {a}")
        assert res.stats["bytes"] == pytest.approx(res.plan.comm_bytes)


def test_onnx_alexnet_training_step_on_2_and_4_devices():
    _check("light_bvlc_alexnet.onnx", 4, (2, 4))


@pytest.mark.slow
def test_onnx_vgg19_training_step_on_2_and_4_devices():
    _check("light_vgg19.onnx", 2, (2, 4))


def test_grouped_convolution_plans_never_split_its_channels():
    x = at.sym.Variable("data")
    h = at.sym.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=8, num_group=2, name="gconv")
    h = at.sym.FullyConnected(at.sym.Flatten(h), num_hidden=4, name="fc")
    net = at.sym.SoftmaxOutput(h, name="softmax")
    shapes = {"data": (2, 4, 6, 6), "softmax_label": (2,)}
    rng = np.random.default_rng(0)
    inputs = {"data": rng.standard_normal(shapes["data"]), "softmax_label": np.array([1.0, 3.0])}
    params = {"gconv_weight": rng.standard_normal((8, 2, 3, 3)), "gconv_bias": rng.standard_normal(8),
              "fc_weight": rng.standard_normal((4, 288)), "fc_bias": rng.standard_normal(4)}
    ref = at.backend.run(net, inputs=inputs, params=params, train=True)
    for devices in (4, 8):
        plan = at.plan(net, devices=devices, shapes=shapes)
        for node, vars_ in plan.node_strategies.items():
            if node.startswith("gconv") and plan.node_ops[node] != "_backward_Convolution_bias":
                assert not {"co", "ci"} & set(vars_), (node, vars_)
        # and the plan's step is the single-device step (float64)
        res = at.backend.run(net, devices=devices, inputs=inputs, params=params, train=True, plan=plan)
        assert sorted(res.grads) == sorted(ref.grads)
        for p in ref.grads:
            np.testing.assert_allclose(res.grads[p], ref.grads[p], rtol=1e-10, atol=1e-12, err_msg=f"x{devices}: {p}")
            np.testing.assert_allclose(res.params[p], ref.params[p], rtol=1e-10, atol=1e-12)
