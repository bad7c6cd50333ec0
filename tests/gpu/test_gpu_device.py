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


@pytest.mark.parametrize("model", ["mlp", "cnn", "residual", "concat", "lstm", "bn"])
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
    for a in ref.aux:
        np.testing.assert_allclose(res.aux[a], ref.aux[a], rtol=1e-3, atol=1e-4, err_msg=f"aux {a}")
    assert res.stats["multifetch_kernel"] is not None or res.stats["bytes"] == 0
    assert len(res.stats["pool_bytes"]) == workers


@pytest.mark.parametrize("workers", [1, 2, 4, 8])
def test_onnx_alexnet_training_step_matches_numpy(exec_models, workers):
    """The light AlexNet of the onnx wheel (real graph: grouped convolutions, LRN, dropout)."""
    _gpu_or_skip()
    sym, inputs, params = exec_models.onnx_light("light_bvlc_alexnet.onnx", 4)
    ref = at.backend.run(sym, inputs=inputs, params=params, train=True)
    res = at.backend.run(sym, devices=workers, inputs=inputs, params=params, train=True, ctx="gpu")
    np.testing.assert_allclose(res.outputs[0], ref.outputs[0], rtol=1e-3, atol=1e-5)
    assert sorted(res.grads) == sorted(ref.grads)
    for p in ref.grads:
        np.testing.assert_allclose(res.grads[p], ref.grads[p], rtol=2e-3, atol=1e-5, err_msg=f"grad of {p}")
        np.testing.assert_allclose(res.params[p], ref.params[p], rtol=2e-3, atol=1e-5, err_msg=f"update of {p}")
    print(f"alexnet x{workers}: kernels {res.stats['kernels']}, fetch paths {res.stats['fetch_paths']}, "
          f"dispatch failed {res.stats['dispatch_failed']}")


def _nchw_cases():
    shape = (4, 6, 10, 12)
    for parts in [(2, 1, 1, 1), (1, 3, 1, 1), (1, 1, 2, 1), (1, 1, 1, 2), (1, 1, 1, 4), (1, 1, 2, 2), (2, 2, 1, 3)]:
        boxes = [([], [])]
        for d, k in enumerate(parts):
            step = shape[d] // k
            boxes = [(lo + [i * step], hi + [(i + 1) * step]) for lo, hi in boxes for i in range(k)]
        yield shape, parts, boxes


@pytest.mark.parametrize("dtype", [np.int8, np.float16, np.float32, np.float64])
@pytest.mark.parametrize("offset", [0, 1, 4])
def test_multifetch_kernel_nchw_tiles(dtype, offset):
    """Gathering NCHW activations from batch/channel/height/width/2-D tiles and cutting a
    tile back out, with buffers at several alignments (the kernel widens copies to 16-byte
    units only where every row is aligned): equal to CuPy slicing, bit for bit."""
    cp = _gpu_or_skip()
    kernels, _ = gpu_fetch.load_kernels(cp, 0)
    rng = np.random.default_rng(1)
    item = np.dtype(dtype).itemsize

    def at_offset(n_items):  # a device buffer whose data starts offset items past 256-byte alignment
        raw = cp.zeros((n_items + offset + 64) * item, cp.uint8)
        return raw[offset * item:(offset + n_items) * item].view(dtype), raw

    for shape, parts, boxes in _nchw_cases():
        full = (rng.standard_normal(shape) * 50).astype(dtype)
        tiles, keep = [], []
        for lo, hi in boxes:
            t = full[tuple(slice(l, h) for l, h in zip(lo, hi))]
            buf, raw = at_offset(t.size)
            buf.set(np.ascontiguousarray(t).ravel())
            tiles.append(buf.reshape(t.shape))
            keep.append(raw)
        dst, raw = at_offset(full.size)
        dst = dst.reshape(shape)
        rec = gpu_fetch.pack_records(dst.data.ptr, [0] * 4, list(shape),
                                     [(t.data.ptr, lo, list(t.shape), lo, hi) for t, (lo, hi) in zip(tiles, boxes)])
        gpu_fetch.device_launcher(cp, kernels, gpu_fetch.kernel_name(dtype, False), rec, len(boxes))()
        assert cp.asnumpy(dst).tobytes() == full.tobytes(), f"gather {parts} offset {offset}"
        lo, hi = boxes[-1]
        cut, raw2 = at_offset(tiles[-1].size)
        cut = cut.reshape(tiles[-1].shape)
        rec = gpu_fetch.pack_records(cut.data.ptr, lo, list(cut.shape), [(dst.data.ptr, [0] * 4, list(shape), lo, hi)])
        gpu_fetch.device_launcher(cp, kernels, gpu_fetch.kernel_name(dtype, False), rec, 1)()
        assert cp.asnumpy(cut).tobytes() == np.ascontiguousarray(full[tuple(slice(l, h) for l, h in zip(lo, hi))]
                                                                 ).tobytes(), f"cut {parts} offset {offset}"


def test_multifetch_nvrtc_build_matches_fatbin(monkeypatch):
    """The NVRTC compile of the same source (used when no fatbin fits) loads and gives the
    same bytes as the fatbin's kernels."""
    cp = _gpu_or_skip()
    monkeypatch.setattr(gpu_fetch, "fatbin_path", lambda: None)
    kernels, source = gpu_fetch.load_kernels(cp, 0)
    assert source == "nvrtc"
    full = cp.arange(2 * 3 * 5 * 7, dtype=cp.float32).reshape(2, 3, 5, 7)
    cut = cp.zeros((2, 3, 5, 3), cp.float32)
    rec = gpu_fetch.pack_records(cut.data.ptr, [0, 0, 0, 4], [2, 3, 5, 3], [(full.data.ptr, [0] * 4, [2, 3, 5, 7],
                                                                              [0, 0, 0, 4], [2, 3, 5, 7])])
    gpu_fetch.device_launcher(cp, kernels, "autotile_multifetch_copy4", rec, 1)()
    assert bool((cut == full[..., 4:]).all())


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
    gpu_fetch.device_launcher(cp, kernels, gpu_fetch.kernel_name(dtype, accumulate), rec, len(pieces))()
    cp.cuda.runtime.deviceSynchronize()
    np.testing.assert_allclose(cp.asnumpy(d_dst), want, rtol=1e-6)
