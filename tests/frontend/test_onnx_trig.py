"""ONNX Sin and Cos (issue 31: every diffusion UNet's timestep embedding) import as the sin /
cos ops: forward equal to onnxruntime, and a small model with a sinusoidal timestep embedding
(Sin and Cos of the timesteps times a constant frequency vector, concatenated, then dense
layers through Sin/Cos again) trains on 4 devices as on 1 (float64), with gradients equal to
central finite differences of a NumPy copy of the model."""
import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("autotile._core")

from onnx import helper  # noqa: E402

import autotile as at  # noqa: E402
from k_device_arbiter import assert_same_float64_step  # noqa: E402
from onnx_models import assert_matches_ort, make_model  # noqa: E402

RNG = np.random.default_rng(31)
B, HALF, D = 8, 4, 6


@pytest.mark.parametrize("op", ["Sin", "Cos"])
def test_sin_cos_match_onnxruntime(op):
    x = RNG.uniform(-20.0, 20.0, (3, 5)).astype(np.float32)
    assert_matches_ort(make_model([helper.make_node(op, ["x"], ["y"])], {"x": (3, 5)}, ["y"]), {"x": x},
                       rtol=1e-6, atol=1e-6)


def _weights():
    freqs = np.exp(-np.log(10000.0) * np.arange(HALF) / HALF).astype(np.float32).reshape(1, HALF)
    return {"freqs": freqs, "W1": (RNG.standard_normal((2 * HALF, D)) * 0.5).astype(np.float32),
            "W2": (RNG.standard_normal((D, 3)) * 0.5).astype(np.float32)}


def _timestep_model(w):
    """y = (sin(h) + cos(h)) . W2 with h = [sin(t f), cos(t f)] . W1."""
    mk = helper.make_node
    nodes = [mk("Mul", ["t", "freqs"], ["arg"]), mk("Sin", ["arg"], ["s"]), mk("Cos", ["arg"], ["c"]),
             mk("Concat", ["s", "c"], ["emb"], axis=1), mk("MatMul", ["emb", "W1"], ["h"]),
             mk("Sin", ["h"], ["hs"]), mk("Cos", ["h"], ["hc"]), mk("Add", ["hs", "hc"], ["a"]),
             mk("MatMul", ["a", "W2"], ["y"])]
    return make_model(nodes, {"t": (B, 1)}, ["y"], w)


def _numpy_model(t, w):
    arg = t * w["freqs"]
    h = np.concatenate([np.sin(arg), np.cos(arg)], axis=1) @ w["W1"]
    return (np.sin(h) + np.cos(h)) @ w["W2"]


def test_timestep_embedding_matches_onnxruntime():
    t = RNG.uniform(0.0, 1000.0, (B, 1)).astype(np.float32)
    assert_matches_ort(_timestep_model(_weights()), {"t": t}, rtol=1e-4, atol=1e-4)


def test_timestep_embedding_trains_on_4_devices_as_on_1():
    w = _weights()
    t = RNG.uniform(0.0, 50.0, (B, 1))
    sym = at.onnx.load(_timestep_model(w))
    params = {k: v.astype(np.float64) for k, v in sym.params.items()}
    inputs = {sym.onnx_names["t"]: t}
    ref = at.backend.run(sym, inputs=inputs, params=params, train=True)
    w64 = {k: v.astype(np.float64) for k, v in w.items()}
    np.testing.assert_allclose(ref.outputs[0], _numpy_model(t, w64), rtol=1e-12, atol=1e-12)
    # the step's gradient is d sum(y) / d weight: check W1's (through Sin/Cos of h) numerically
    name = next(k for k in ref.grads if ref.grads[k].shape in ((2 * HALF, D), (D, 2 * HALF)))
    grad = ref.grads[name] if ref.grads[name].shape == (2 * HALF, D) else ref.grads[name].T
    eps, fd = 1e-6, np.zeros_like(w64["W1"])
    for idx in np.ndindex(*fd.shape):
        hi, lo = dict(w64), dict(w64)
        hi["W1"], lo["W1"] = w64["W1"].copy(), w64["W1"].copy()
        hi["W1"][idx] += eps
        lo["W1"][idx] -= eps
        fd[idx] = (_numpy_model(t, hi).sum() - _numpy_model(t, lo).sum()) / (2 * eps)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-7)
    res = at.backend.run(sym, devices=4, inputs=inputs, params=params, train=True)
    assert_same_float64_step(ref, res)
