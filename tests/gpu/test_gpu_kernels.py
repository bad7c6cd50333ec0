"""The GPU runtime's array-module-generic kernels (gpu_kernels.KERNELS), run with NumPy as
their array module, equal the registry's NumPy kernels: the same code runs with CuPy on GPUs
(cuBLAS GEMMs, im2col convolution), so this checks everything but the array library."""
import numpy as np
import pytest

from autotile.backend.gpu_kernels import KERNELS
from autotile.ops import registry
from autotile.ops.registry import KernelContext


def _attrs(op, **raw):
    return registry.parse_attrs(registry.get(op), {k: registry.format_value(v) for k, v in raw.items()})


def _same(op, attrs, inputs):
    ctx = KernelContext(is_train=True, xp=np)
    want = registry.get(op).forward(attrs, [x.copy() for x in inputs], KernelContext(is_train=True))
    got = KERNELS[op](attrs, inputs, ctx)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, op
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=op)


R = np.random.default_rng(0)


def _r(*shape):
    return R.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("no_bias", [False, True])
@pytest.mark.parametrize("flatten", [True, False])
def test_fully_connected(no_bias, flatten):
    a = _attrs("FullyConnected", num_hidden=5, no_bias=no_bias, flatten=flatten)
    x = _r(4, 3, 6)
    k = 18 if flatten else 6
    _same("FullyConnected", a, [x, _r(5, k)] + ([] if no_bias else [_r(5)]))
    b = _attrs("_backward_FullyConnected_data", num_hidden=5, flatten=flatten)
    dy = _r(4, 5) if flatten else _r(4, 3, 5)
    _same("_backward_FullyConnected_data", b, [dy, _r(5, k), x])
    _same("_backward_FullyConnected_weight", b, [dy, x])
    _same("_backward_FullyConnected_bias", b, [dy])


def test_conv_and_pooling_are_the_registry_kernels():
    """Convolution and pooling run the registry's own array-module-generic kernels on the GPU
    (one implementation: the tile hooks' halo padding and window frames hold everywhere); the
    GPU tests (-m gpu) run them under CuPy against the NumPy step."""
    for op in ("Convolution", "_backward_Convolution_data", "_backward_Convolution_weight", "Pooling",
               "_backward_Pooling"):
        assert KERNELS[op] is registry.get(op).forward, op


@pytest.mark.parametrize("act", ["relu", "sigmoid", "tanh", "softrelu", "softsign"])
def test_activation(act):
    x = _r(4, 7)
    a = _attrs("Activation", act_type=act)
    _same("Activation", a, [x])
    y = registry.get("Activation").forward(a, [x], KernelContext())[0]
    _same("_backward_Activation", _attrs("_backward_Activation", act_type=act), [_r(4, 7), y])


@pytest.mark.parametrize("clip", [-1.0, 0.1])
def test_sgd_update(clip):
    _same("sgd_update", _attrs("sgd_update", lr=0.1, wd=0.01, rescale_grad=0.5, clip_gradient=clip), [_r(6, 3), _r(6, 3)])


def test_every_kernel_is_a_registered_op():
    for name in KERNELS:
        assert registry.exists(name), name
