"""`autotile bench gpu` on a machine without a GPU: it says why there is nothing to measure
and exits 0 (so CI and users without CUDA can run every bench); bad arguments are usage
errors. The measurements themselves run with `pytest -m gpu`'s machine (docs/gpu.md)."""
import subprocess
import sys

import pytest

from run_script import run_bench


def _has_gpu():
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


@pytest.mark.skipif(_has_gpu(), reason="this machine has a GPU: the bench would measure")
def test_without_a_gpu_says_so_and_exits_0(tmp_path):
    out = run_bench("gpu", tmp_path, "--quick").stdout
    assert "nothing to measure (this benchmark needs a CUDA GPU" in out and "--sim" in out


@pytest.mark.parametrize("args,message", [(["--only", "bogus"], "--only takes multifetch, steps, ops"),
                                          (["--steps", "0"], "--steps must be at least 1")])
def test_bad_arguments_are_usage_errors(args, message):
    proc = subprocess.run([sys.executable, "-m", "autotile.bench.gpu", *args], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and message in proc.stderr
