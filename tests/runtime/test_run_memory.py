"""Resident memory of a k-device training step (issue 13, item 5).

A step on the host runtime should need what the memory plan predicts -- the caller's params
and data, plus the plan's arenas -- and no second or third copy of the parameters: the
results (gradients, updated params) are assembled into the memory their scattered tiles
free. The peak is read from /proc (VmHWM) in a fresh process, against the prediction computed
from the plan's own arena sizes and the values' byte counts.

Stated slack: kernel temporaries, which the memory plan does not count. A kernel returns
fresh arrays that the runtime copies into the arenas, and an SGD update (ops/optimizer.py)
works in place in its output plus one temporary: two arrays the size of its weight tile on
every device at once, i.e. twice the largest parameter under a plan that splits it (tofu);
plus, on a loaded machine, the output of one more kernel finishing on the runtime's worker
pool while another runs (measured: mlp-4-4096 on 4 devices 140-172 MB over when quiet, 207 MB
under load 8, its largest weight being 67 MB): three times the largest parameter in all, plus
48 MiB for allocator and thread noise. (Before the update kernels worked in place they
held up to three temporaries besides the output, and the slack was three times the largest
parameter; before the tiles were freed the results came on top of the arenas, 2 x params.)
"""
import sys

import pytest

from autotile.bench.runtime import step_memory

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")

NOISE = 48 * 2 ** 20


def largest_param_bytes(model: str, batch: int) -> int:
    import numpy as np

    import autotile as at

    sym = at.models.get(model, batch=batch)
    arg_shapes, _, _ = sym.infer_shape()
    return max(int(np.prod(s)) * 4 for n, s in zip(sym.list_arguments(), arg_shapes)
               if n != "data" and not n.endswith("label"))


def check_peak(model: str, batch: int, devices: int):
    r = step_memory(model, batch, devices, algorithm="tofu")
    # the prediction from its parts: interpreter and libraries, the caller's values, the arenas
    predicted = r["base_rss"] + r["param_bytes"] + r["data_bytes"] + r["arena_bytes"]
    assert r["rss_before_step"] <= r["base_rss"] + r["param_bytes"] + r["data_bytes"] + NOISE
    slack = 3 * largest_param_bytes(model, batch) + NOISE
    excess = r["peak_rss"] - predicted
    assert excess <= slack, (f"{model} on {devices} devices peaked {r['peak_rss'] / 1e9:.3f} GB, "
                             f"{excess / 1e6:.0f} MB over the plan's {predicted / 1e9:.3f} GB "
                             f"(slack {slack / 1e6:.0f} MB; params {r['param_bytes'] / 1e6:.0f} MB)")
    # and the step did its work: the arenas were written (a run that skipped them would pass)
    assert r["peak_rss"] >= r["rss_before_step"] + r["arena_bytes"] // 2


@pytest.mark.parametrize("devices", [2, 4])
def test_step_peak_within_plan_plus_params(devices):
    check_peak("mlp-4-2048", 64, devices)


@pytest.mark.slow
def test_step_peak_mlp_4096_on_4():
    check_peak("mlp-4-4096", 64, 4)
