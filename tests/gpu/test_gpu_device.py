"""On a CUDA GPU with CuPy (``pytest -m gpu``; deselected by default and skipped without a
GPU): the training step on 1, 2, 4 and 8 workers equals the NumPy step, and the MultiFetch
kernel equals the host MultiFetch."""
import numpy as np
import pytest

import autotile as at
from autotile import _core
from autotile.backend import gpu_fetch

pytestmark = pytest.mark.gpu


def _gpu_or_skip():
    try:
        import cupy
    except ImportError:
        pytest.skip("CuPy is not installed (pip install 'autotile[gpu]')")
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:
        pytest.skip(f"no usable CUDA GPU: {e}")
    if n < 1:
        pytest.skip("no CUDA GPU visible")
    return cupy


@pytest.mark.parametrize("model", ["mlp", "cnn", "residual", "concat", "lstm"])
@pytest.mark.parametrize("workers", [1, 2, 4, 8])
def test_training_step_matches_numpy(exec_models, model, workers):
    _gpu_or_skip()
    sym, shapes, classes = exec_models.MODELS[model]()
    vals = exec_models.values(sym, shapes, classes)
    inputs = {k: vals[k] for k in shapes}
    params = {k: v for k, v in vals.items() if k not in shapes}
    ref = at.backend.run(sym, inputs=inputs, params=params, train=True)
    res = at.backend.run(sym, devices=workers, inputs=inputs, params=params, train=True, ctx="gpu")
    for got, want in zip(res.outputs, ref.outputs):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
    for p in ref.grads:
        np.testing.assert_allclose(res.grads[p], ref.grads[p], rtol=1e-3, atol=1e-4, err_msg=f"grad of {p}")
        np.testing.assert_allclose(res.params[p], ref.params[p], rtol=1e-3, atol=1e-4, err_msg=f"update of {p}")
    assert res.stats["multifetch_kernel"] is not None or res.stats["bytes"] == 0


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_multifetch_kernel_matches_host(accumulate, dtype):
    cp = _gpu_or_skip()
    rng = np.random.default_rng(0)
    full = (9, 7, 5)
    dlo, dhi = [1, 0, 1], [8, 7, 5]
    pieces = [([0, 0, 0], [9, 7, 5], [1, 0, 1], [5, 7, 5]), ([4, 0, 0], [9, 7, 5], [4, 2, 1], [8, 7, 3])]
    value = rng.standard_normal(full).astype(dtype)
    srcs = [np.ascontiguousarray(value[tuple(slice(l, h) for l, h in zip(p[0], p[1]))]) for p in pieces]
    want = np.zeros([h - l for l, h in zip(dlo, dhi)], dtype)
    _core.multifetch(want, dlo, [(s, p[0], p[2], p[3]) for s, p in zip(srcs, pieces)], accumulate)
    kernels, _ = gpu_fetch.load_kernels(cp, 0)
    d_srcs = [cp.asarray(s) for s in srcs]
    d_dst = cp.zeros(want.shape, dtype)
    rec = gpu_fetch.pack_records(d_dst.data.ptr, dlo, list(want.shape),
                                 [(d.data.ptr, p[0], list(d.shape), p[2], p[3]) for d, p in zip(d_srcs, pieces)])
    grid, block = gpu_fetch.launch_grid(rec)
    kernels[gpu_fetch.kernel_name(dtype, accumulate)](grid, block, (cp.asarray(rec), np.int32(len(pieces))))
    cp.cuda.runtime.deviceSynchronize()
    np.testing.assert_allclose(cp.asnumpy(d_dst), want, rtol=1e-6)
