"""Resident memory of a k-device training step (issue 13, item 5).

A step on the host runtime should need what the memory plan predicts -- the caller's params
and data, plus the plan's arenas -- and no second or third copy of the parameters: the
results (gradients, updated params) are assembled into the memory their scattered tiles
free. The peak is read from /proc (VmHWM) in a fresh process, against the prediction computed
from the plan's own arena sizes and the values' byte counts.

Stated slack: 24 MiB whatever the model, for what the memory plan does not count. Kernels
write their outputs into the arena buffers (KernelContext.out) and the optimizer updates work
a block of 64K elements at a time, so a kernel holds at most about 1 MB of scratch (8 worker
threads at once: under 8 MB); the results are assembled 4 MiB of a tile at a time, each
block's pages freed once added (ops run one at a time hold under 1.2 MB each,
`autotile bench runtime`); the rest is allocator and thread noise. Measured 2026-11-25 (2
cores, load 4-7): mlp-4-2048 on 4 devices 10 MB over the plan, mlp-4-4096 12 MB, the zoo's
mlp (`autotile run mlp --devices 4 --batch 64`) 13 MB. With AUTOTILE_KERNEL_OUT=0 (kernels
allocate their outputs and the runtime copies them) they are 37-45, 140 and 535 MB over, and
the test fails: a k-device step then holds every device's fresh weight gradient and update
at once. (The slack was 3 x the largest parameter + 48 MiB before kernels wrote in place,
and 2 x params before the tiles were freed.)
"""
import sys

import pytest

from autotile.bench.runtime import step_memory

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")

NOISE = 48 * 2 ** 20  # resident memory of the values and plan before the step
SLACK = 24 * 2 ** 20  # the step's peak over the plan's prediction (see above)


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
    excess = r["peak_rss"] - predicted
    assert excess <= SLACK, (f"{model} on {devices} devices peaked {r['peak_rss'] / 1e9:.3f} GB, "
                             f"{excess / 1e6:.0f} MB over the plan's {predicted / 1e9:.3f} GB "
                             f"(slack {SLACK / 1e6:.0f} MB; params {r['param_bytes'] / 1e6:.0f} MB, the "
                             f"largest {largest_param_bytes(model, batch) / 1e6:.0f} MB; peaks over the plan "
                             f"by phase {({k: round((v - predicted) / 1e6) for k, v in r['phase_peaks'].items()})} MB)")
    # and the step did its work: the arenas were written (a run that skipped them would pass)
    assert r["peak_rss"] >= r["rss_before_step"] + r["arena_bytes"] // 2


@pytest.mark.parametrize("devices", [2, 4])
def test_step_peak_at_the_plan(devices):
    check_peak("mlp-4-2048", 64, devices)


@pytest.mark.slow
def test_step_peak_mlp_4096_on_4():
    check_peak("mlp-4-4096", 64, 4)


def _residual_net():
    import autotile as at

    x = at.sym.Variable("data")
    a = at.sym.FullyConnected(x, num_hidden=32, name="fc1")
    b = at.sym.Activation(a, act_type="tanh", name="act1")
    b = at.sym.FullyConnected(b, num_hidden=32, name="fc2")
    h = at.sym.Activation(at.sym.elemwise_add(a, b, name="add"), act_type="sigmoid", name="act2")
    h = at.sym.FullyConnected(h, num_hidden=10, name="fc3")
    return at.sym.SoftmaxOutput(h, name="softmax")


@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam"])
@pytest.mark.parametrize("devices", [2, 4])
def test_kernels_writing_into_arenas_change_no_bits(monkeypatch, optimizer, devices):
    """A k-device step whose kernels write into the arena buffers (ctx.out) returns the same
    bits as the step whose kernels allocate their outputs (AUTOTILE_KERNEL_OUT=0)."""
    import numpy as np

    from autotile.backend.multi_device import run_multi_device

    sym = _residual_net()
    rng = np.random.default_rng(3)
    arg_shapes, _, _ = sym.infer_shape(data=(16, 24), softmax_label=(16,))
    values = {n: (rng.standard_normal(s) * 0.3).astype(np.float32) for n, s in zip(sym.list_arguments(), arg_shapes)}
    values["softmax_label"] = rng.integers(0, 10, 16).astype(np.float32)
    args = {"momentum": 0.9} if optimizer == "momentum" else None
    results = {}
    for flag in ("1", "0"):
        monkeypatch.setenv("AUTOTILE_KERNEL_OUT", flag)
        results[flag] = run_multi_device(sym, devices, values, optimizer=optimizer, optimizer_args=args)
    new, old = results["1"], results["0"]
    assert len(new.outputs) == len(old.outputs) == 1
    assert new.outputs[0].tobytes() == old.outputs[0].tobytes()
    for kind in ("grads", "params", "states"):
        a, b = getattr(new, kind), getattr(old, kind)
        assert sorted(a) == sorted(b) and (a or kind == "states" and optimizer == "sgd"), kind
        for name in b:
            assert a[name].tobytes() == b[name].tobytes(), f"{kind} {name}"
