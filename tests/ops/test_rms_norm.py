"""RMSNorm: forward against per-row loops, gradients against finite differences, the TDL, and
a LLaMA-style block (RMSNorm, SwiGLU) on virtual devices equal to one device."""
import numpy as np
import pytest

import autotile as at
from autotile import _core
from device_checks import check_planned_step, check_random_plans
from gradcheck import check_gradient, forward, single_op
from tdl_op_checks import check_tdl


def naive_rms_norm(x, gamma, axis, eps):
    x = np.moveaxis(x, axis, -1)
    out = np.empty_like(x)
    for idx in np.ndindex(*x.shape[:-1]):
        row = list(x[idx])
        rms = (sum(v * v for v in row) / len(row) + eps) ** 0.5
        out[idx] = [v / rms * g for v, g in zip(row, gamma)]
    return np.moveaxis(out, -1, axis)


@pytest.mark.parametrize("shape, axis", [((4, 6), -1), ((2, 3, 5), -1), ((2, 3, 5), 1), ((5,), 0)])
def test_forward_matches_loops(shape, axis):
    rng = np.random.default_rng(0)
    x, g = rng.standard_normal(shape) * 2 + 0.5, rng.standard_normal(shape[axis])
    (y,) = forward(single_op("RMSNorm", ["data", "gamma"], axis=axis, eps=1e-3), {"data": x, "gamma": g})
    np.testing.assert_allclose(y, naive_rms_norm(x, g, axis % len(shape), 1e-3), rtol=1e-10, atol=1e-12)


def test_default_eps_is_1e_6():
    x, g = np.full((1, 4), 1e-3), np.ones(4)
    (y,) = forward(single_op("RMSNorm", ["data", "gamma"]), {"data": x, "gamma": g})
    np.testing.assert_allclose(y, x / np.sqrt(1e-6 + 1e-6))


@pytest.mark.parametrize("shape, axis", [((3, 4), -1), ((2, 3, 2), 1)])
def test_gradient(shape, axis):
    rng = np.random.default_rng(1)
    check_gradient("RMSNorm", {"data": rng.standard_normal(shape), "gamma": rng.standard_normal(shape[axis])},
                   {"axis": axis, "eps": 1e-2})


def test_shape_inference_and_errors():
    n = at.sym.RMSNorm(at.sym.Variable("x"), name="norm")
    args, outs, _ = n.infer_shape(x=(2, 5, 8))
    assert args == [(2, 5, 8), (8,)] and outs == [(2, 5, 8)]
    with pytest.raises(at.Error, match=r"norm.*gamma.*\(5,\).*\(8,\)"):
        n.infer_shape(x=(2, 5, 8), norm_gamma=(5,))


@pytest.mark.parametrize("shape, axis", [((4, 6), -1), ((2, 4, 6), -1), ((4, 6, 2), 1)])
def test_tdl(shape, axis):
    rng = np.random.default_rng(2)
    x, g = rng.standard_normal(shape), rng.standard_normal(shape[axis])
    text = check_tdl("RMSNorm", [x, g], {"axis": axis})
    check_tdl("_backward_RMSNorm", [rng.standard_normal(shape), x, g], {"axis": axis})
    got = {s["var"]: s for s in _core.analyze_tdl(text, [shape, (shape[axis],)], [shape], 2)["strategies"]}
    assert got["c"]["inputs"][0]["per_worker"] == [(0, shape[axis])] * 2  # whole rows under a split of the axis


def _llama_mlp():
    x = at.sym.Variable("data")
    h = at.sym.RMSNorm(x, name="norm")
    gate = at.sym.FullyConnected(h, num_hidden=12, flatten=False, no_bias=True, name="w1")
    up = at.sym.FullyConnected(h, num_hidden=12, flatten=False, no_bias=True, name="w3")
    h = at.sym.elemwise_mul(at.sym.silu(gate, name="silu"), up, name="swiglu")
    h = at.sym.FullyConnected(h, num_hidden=8, flatten=False, no_bias=True, name="w2")
    return at.sym.elemwise_add(x, h, name="res")


def _llama_values(rng):
    return {"data": rng.standard_normal((4, 4, 8)).astype(np.float32),
            "norm_gamma": rng.uniform(0.5, 1.5, 8).astype(np.float32),
            "w1_weight": (rng.standard_normal((12, 8)) * 0.3).astype(np.float32),
            "w3_weight": (rng.standard_normal((12, 8)) * 0.3).astype(np.float32),
            "w2_weight": (rng.standard_normal((8, 12)) * 0.3).astype(np.float32)}


@pytest.mark.parametrize("devices", [2, 4])
def test_planned_swiglu_block_equals_one_device(devices):
    check_planned_step(_llama_mlp(), {"data": (4, 4, 8)}, _llama_values(np.random.default_rng(3)), devices)


@pytest.mark.parametrize("factors", [[2], [2, 2]])
def test_every_split_on_tiles(factors):
    check_random_plans(_llama_mlp(), {"data": (4, 4, 8)}, _llama_values(np.random.default_rng(4)), factors,
                       seed=60 + sum(factors), n_plans=6)
