"""The strategy validator (tests/ops/strategy_validator.py) on the GPU runtime, driven on the
CPU by SimDevices: the CI sample's every strategy, run by GpuRuntime with its own kernels
(backend/gpu_kernels.py: GEMMs, activations...) and MultiFetch through the kernel body
compiled for the host, equals the single-device step in float64. The GPU kernels that
duplicate registry kernels must honour the same tile hooks."""
import os
import sys

import pytest

pytest.importorskip("autotile._core")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ops"))

from autotile.backend.gpu_runtime import run_gpu  # noqa: E402
from sim_devices import SimDevices  # noqa: E402
from strategy_configs import SAMPLE  # noqa: E402
from strategy_validator import check_case  # noqa: E402


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=[pytest.mark.xfail(reason=c.xfail, strict=True)]
                                               if c.xfail else []) for c in SAMPLE])
def test_gpu_runtime_runs_every_strategy_as_one_device(case, fetch_emulation):
    def runner(sym, devices, values, **kwargs):
        dev = SimDevices(devices, fetch_emulation, n_gpus=min(devices, 2), seed=devices)
        return run_gpu(sym, devices, values, gpu_devices=dev, **kwargs)

    check_case(case, runner=runner)
