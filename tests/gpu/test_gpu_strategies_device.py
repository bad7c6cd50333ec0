"""The strategy validator's CI sample on a real GPU (``pytest -m gpu``): every strategy of
every op's forward, backward and update nodes, run by the GPU runtime on CUDA (its CuPy
kernels, the registry kernels dispatched to CuPy, host fallbacks, the MultiFetch kernel),
equals the single-device NumPy step in float64."""
import os
import sys

import pytest

pytest.importorskip("autotile._core")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ops"))

from autotile.backend.gpu_runtime import run_gpu  # noqa: E402
from strategy_configs import SAMPLE  # noqa: E402
from strategy_validator import check_case  # noqa: E402

pytestmark = pytest.mark.gpu


def _gpu_or_skip():
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA GPU visible")
    except Exception as e:
        pytest.skip(f"no usable CUDA GPU: {e}")


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=[pytest.mark.xfail(reason=c.xfail, strict=True)]
                                               if c.xfail else []) for c in SAMPLE])
def test_gpu_runs_every_strategy_as_one_device(case):
    _gpu_or_skip()
    check_case(case, runner=lambda sym, devices, values, **kwargs: run_gpu(sym, devices, values, **kwargs))
