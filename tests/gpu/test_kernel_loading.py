"""How the GPU runtime gets the MultiFetch kernel: the fatbin CMake built, else NVRTC on the
same source with the include path the source needs; and that source compiles under NVRTC
(through CuPy's NVRTC binding, no GPU needed) when NVRTC is installed."""
import types

import numpy as np
import pytest

from autotile.backend import gpu_fetch
from autotile.errors import Error


class _Module:
    def __init__(self, code=None, path=None, options=()):
        self.code, self.path, self.options = code, path, options
        if path is not None and _Module.fatbin_fails:
            raise RuntimeError("CUDA_ERROR_NO_BINARY_FOR_GPU")
        if code is not None and _Module.nvrtc_fails:
            raise RuntimeError("NVRTC_ERROR_COMPILATION")
        _Module.made.append(self)

    def get_function(self, name):
        return (self, name)


def _fake(fatbin_fails=False, nvrtc_fails=False):
    _Module.fatbin_fails, _Module.nvrtc_fails, _Module.made = fatbin_fails, nvrtc_fails, []
    return types.SimpleNamespace(RawModule=_Module)


def test_fatbin_first_then_nvrtc(tmp_path, monkeypatch):
    fat = tmp_path / "multifetch.fatbin"
    fat.write_bytes(b"\0")
    monkeypatch.setenv("AUTOTILE_MULTIFETCH_FATBIN", str(fat))
    kernels, how = gpu_fetch.load_kernels(_fake(), 0)
    assert how == f"fatbin:{fat}" and set(kernels) == set(gpu_fetch.KERNEL_NAMES)
    kernels, how = gpu_fetch.load_kernels(_fake(fatbin_fails=True), 0)
    assert how == "nvrtc"
    mod = _Module.made[-1]
    cu, includes = gpu_fetch.source_dirs()
    assert mod.code == open(cu).read()
    assert all(f"-I{d}" in mod.options for d in includes)
    with pytest.raises(Error, match="GPU 3: cannot load the MultiFetch kernel: fatbin .*NO_BINARY.*NVRTC"):
        gpu_fetch.load_kernels(_fake(fatbin_fails=True, nvrtc_fails=True), 3)


def test_source_compiles_with_nvrtc():
    compiler = pytest.importorskip("cupy.cuda.compiler")
    program = getattr(compiler, "_NVRTCProgram", None)
    if program is None:
        pytest.skip("this CuPy has no NVRTC program binding")
    cu, includes = gpu_fetch.source_dirs()
    try:
        prog = program(open(cu).read(), cu, method="ptx")
    except Exception as e:  # libnvrtc not installed
        pytest.skip(f"NVRTC unavailable: {e}")
    ptx, _ = prog.compile(tuple(f"-I{d}" for d in includes) + ("--std=c++17", "-arch=compute_80"))
    text = ptx.decode() if isinstance(ptx, bytes) else ptx
    for name in gpu_fetch.KERNEL_NAMES:
        assert f".entry {name}(" in text


def test_kernel_names_cover_dtypes():
    assert gpu_fetch.kernel_name(np.float16, False) == "autotile_multifetch_copy2"
    assert gpu_fetch.kernel_name(np.int64, False) == "autotile_multifetch_copy8"
    assert gpu_fetch.kernel_name(np.float64, True) == "autotile_multifetch_add_f64"
