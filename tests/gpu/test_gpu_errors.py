"""The GPU runtime's errors on machines without CuPy or a GPU (these run everywhere): clear
autotile.Error messages naming what is missing, the device and the bytes wanted."""
import contextlib
import sys
import types

import numpy as np
import pytest

import autotile as at
from autotile.backend.gpu_runtime import CupyDevices, GpuRuntime
from autotile.errors import Error
from autotile.execgraph import transform


def _mlp(exec_models):
    sym, shapes, classes = exec_models.MODELS["mlp"]()
    vals = exec_models.values(sym, shapes, classes)
    return sym, shapes, vals


def _run(sym, shapes, vals, **kw):
    return at.backend.run(sym, devices=2, inputs={k: vals[k] for k in shapes},
                          params={k: v for k, v in vals.items() if k not in shapes}, train=True, ctx="gpu", **kw)


def test_cupy_missing(exec_models, monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy -> ImportError
    sym, shapes, vals = _mlp(exec_models)
    with pytest.raises(Error, match=r"ctx='gpu' needs CuPy, which is not installed.*pip install 'cupy-cuda12x\[ctk\]'.*'gpu' and 'gpu-cuda13' extras"):
        _run(sym, shapes, vals)


class _OOM(Exception):
    pass


_OOM.__name__ = "OutOfMemoryError"


def _fake_cupy(count=2, count_error=None, free_bytes=1 << 40, peer=True, mem_info=None):
    """Enough of CuPy's surface for CupyDevices' setup (no kernels run)."""
    def get_count():
        if count_error:
            raise count_error
        return count

    class Pool:
        def __init__(self):
            self.used = 0
            self.limit = None

        def set_limit(self, size):
            self.limit = size

        def malloc(self, n):
            if self.used + n > free_bytes:
                raise _OOM(f"Out of memory allocating {n:,} bytes (allocated so far: {self.used:,} bytes).")
            self.used += n
            return types.SimpleNamespace(ptr=4096 + self.used - n)

    class Stream:
        def __init__(self, non_blocking=False):
            self.ptr = 1

    runtime = types.SimpleNamespace(getDeviceCount=get_count, deviceCanAccessPeer=lambda a, b: peer,
                                    deviceEnablePeerAccess=lambda b: None)
    if mem_info is not None:
        runtime.memGetInfo = lambda: mem_info
    cuda = types.SimpleNamespace(runtime=runtime, Device=lambda g: contextlib.nullcontext(), MemoryPool=Pool,
                                 Stream=Stream)

    def ndarray(shape, dtype=None, memptr=None):
        return np.zeros(shape, dtype)

    return types.SimpleNamespace(cuda=cuda, ndarray=ndarray)


def test_no_gpu_reported_by_cuda():
    err = RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
    with pytest.raises(Error, match="ctx='gpu' needs a CUDA GPU, and CUDA reports none usable.*cudaErrorNoDevice"):
        CupyDevices(2, cupy=_fake_cupy(count_error=err))
    with pytest.raises(Error, match="none is visible"):
        CupyDevices(2, cupy=_fake_cupy(count=0))


def test_installed_cupy_without_a_gpu(exec_models):
    """With the real CuPy on a machine with no GPU (or no driver), ctx='gpu' says so."""
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() > 0:
            pytest.skip("this machine has a GPU")
    except Exception:
        pass
    sym, shapes, vals = _mlp(exec_models)
    with pytest.raises(Error, match="ctx='gpu' needs a CUDA GPU"):
        _run(sym, shapes, vals)


def test_workers_share_gpus_and_peer_access():
    dev = CupyDevices(8, cupy=_fake_cupy(count=3, peer=False))
    assert dev.gpu == [0, 1, 2, 0, 1, 2, 0, 1]
    assert dev.can_read(3, 0) == "local" and dev.can_read(1, 0) == "memcpy"
    assert len(dev.pools) == 8 and len({id(p) for p in dev.pools}) == 8  # a pool per worker, even on one GPU
    assert CupyDevices(2, cupy=_fake_cupy(count=2, peer=True)).can_read(1, 0) == "peer"


def test_out_of_memory_names_device_and_bytes(exec_models):
    sym, shapes, vals = _mlp(exec_models)
    plan = at.plan(sym, devices=2, shapes=shapes)
    eg = transform(sym, plan)
    need = int(eg.core.arena_bytes[0])
    dev = CupyDevices(2, cupy=_fake_cupy(count=1, free_bytes=need - 1))
    with pytest.raises(Error, match=rf"device 0 \(GPU 0\): out of memory allocating {need} bytes for its arena"):
        GpuRuntime(eg, devices=dev)


def test_bad_ctx(exec_models):
    sym, shapes, vals = _mlp(exec_models)
    with pytest.raises(Error, match="ctx='tpu' is not available"):
        at.backend.run(sym, inputs={k: vals[k] for k in shapes}, ctx="tpu")


def test_gpu_ids():
    dev = CupyDevices(4, cupy=_fake_cupy(count=4), gpu_ids=[2])
    assert dev.gpu == [2, 2, 2, 2]
    with pytest.raises(Error, match="must name visible GPUs"):
        CupyDevices(4, cupy=_fake_cupy(count=2), gpu_ids=[3])


def test_pools_are_capped_at_their_share_of_the_gpu():
    """Workers sharing a GPU each get an equal share of its free memory (less 5%), so one
    worker's temporaries cannot take another's arena; workers alone on a GPU get all of it."""
    dev = CupyDevices(5, cupy=_fake_cupy(count=2, mem_info=(1000, 4000)))
    assert dev.gpu == [0, 1, 0, 1, 0]
    assert dev.pool_limits == [316, 475, 316, 475, 316]
    assert [p.limit for p in dev.pools] == dev.pool_limits
