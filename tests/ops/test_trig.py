"""sin and cos (ONNX Sin / Cos, issue 31): forward against the standard library's math.sin /
math.cos, gradients against finite differences, float32 kept, and their TDL descriptions
against the kernels (tdl_op_checks). Their partition strategies are in the strategy
validator's configurations (strategy_configs.UNARY)."""
import math

import numpy as np
import pytest

from gradcheck import check_gradient, forward, single_op
from tdl_op_checks import check_tdl

ORACLES = {"sin": np.vectorize(math.sin, otypes=[np.float64]), "cos": np.vectorize(math.cos, otypes=[np.float64])}


def _input(shape, seed):
    return np.random.default_rng(seed).uniform(-7.0, 7.0, shape)  # more than a period each side


@pytest.mark.parametrize("op", sorted(ORACLES))
def test_forward_matches_math(op):
    x = _input((4, 6), 0)
    (y,) = forward(single_op(op, ["data"]), {"data": x})
    np.testing.assert_allclose(y, ORACLES[op](x), rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("op", sorted(ORACLES))
def test_gradient_matches_finite_differences(op):
    check_gradient(op, {"data": _input((3, 4), 1)}, {})


@pytest.mark.parametrize("op", sorted(ORACLES))
def test_float32_in_float32_out(op):
    x = _input((2, 3), 2).astype(np.float32)
    (y,) = forward(single_op(op, ["data"]), {"data": x})
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, ORACLES[op](x.astype(np.float64)), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op", sorted(ORACLES))
def test_tdl(op):
    x = _input((4, 6), 3)
    check_tdl(op, [x], {})
    check_tdl(f"_backward_{op}", [np.random.default_rng(4).standard_normal((4, 6)), x], {})


@pytest.mark.parametrize("op", ["sin", "cos", "_backward_sin", "_backward_cos"])
def test_jax_step_kernel_equals_numpy(op):
    """The JAX step traces the registry kernel (jax/duck.py): jitted, it equals NumPy's."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from autotile.jax.step import _kernel
    from autotile.ops.registry import KernelContext, get

    args = [_input((3, 4), 5).astype(np.float32)]
    if op.startswith("_backward"):
        args.insert(0, np.random.default_rng(6).standard_normal((3, 4)).astype(np.float32))
    kernel = _kernel(op, get(op))
    got = jax.jit(lambda *a: kernel({}, list(a), KernelContext(is_train=True, xp=jnp, key=None, out=None)))(*args)
    (want,) = get(op).forward({}, args, KernelContext(is_train=True))
    np.testing.assert_allclose(np.asarray(got[0]), want, rtol=1e-5, atol=1e-6)
