"""Fixtures of the GPU runtime tests: the MultiFetch kernel source compiled for the host (its
CPU emulation), and the execution-test models of tests/execgraph."""
import ctypes
import importlib.util
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CSRC = os.path.join(ROOT, "csrc")


def load_exec_models():
    """tests/execgraph/models.py (MODELS, values) under a name of its own."""
    spec = importlib.util.spec_from_file_location("autotile_exec_models", os.path.join(ROOT, "tests", "execgraph",
                                                                                      "models.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def exec_models():
    return load_exec_models()


@pytest.fixture(scope="session")
def fetch_emulation(tmp_path_factory):
    """csrc/cuda/multifetch.cu built by the host C++ compiler: the kernel body and record
    decoding, run on the CPU with the launch's block/thread mapping simulated."""
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if not cxx:
        pytest.skip("no C++ compiler to build the MultiFetch kernel's host emulation")
    out = str(tmp_path_factory.mktemp("mf") / "libmultifetch_host.so")
    cmd = [cxx, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-x", "c++", "-shared", "-fPIC", "-I", CSRC,
           os.path.join(CSRC, "cuda", "multifetch.cu"), "-o", out]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, f"host build of multifetch.cu failed:\n{res.stderr}"
    lib = ctypes.CDLL(out)
    lib.autotile_multifetch_host.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                             ctypes.c_int]
    lib.autotile_multifetch_host.restype = ctypes.c_int
    lib.autotile_multifetch_record_words.restype = ctypes.c_int
    return lib


@pytest.fixture(scope="session")
def swap_models():
    """tests/execgraph/test_swap.py (MODELS: a deep MLP, CNN and LSTM whose swap plans the host
    runtime checks), imported with tests/execgraph on the path for its own imports."""
    import sys

    here = os.path.join(ROOT, "tests", "execgraph")
    if here not in sys.path:
        sys.path.insert(0, here)
    spec = importlib.util.spec_from_file_location("autotile_swap_models", os.path.join(here, "test_swap.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
