"""The JAX engine runs the new routing and trigonometric imports (issue 31): the training step
of a top-2 routed MoE layer, of top-1 routing with expert capacity (GShard's static form) and
of a sinusoidal timestep embedding, planned on 4 devices and jitted over 4 host devices, equals
autotile's 1-device step (float32). Runs in a subprocess: XLA_FLAGS must be set before jax is
imported."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("jax")
pytest.importorskip("onnx")
pytest.importorskip("autotile._core")

_SCRIPT = r"""
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import autotile as at
import autotile.jax as atj
import test_onnx_moe as moe
import test_onnx_trig as trig

cases = {"top2": (moe._top2_moe()[0], (6, 4)), "capacity": (moe._switch_with_capacity(8, 4, 3, 5, 3, 0)[0], (8, 4)),
         "timestep": (trig._timestep_model(trig._weights()), (8, 1))}
report = {}
for name, (model, shape) in cases.items():
    sym = at.onnx.load(model)
    (data,) = [k for k in sym.list_arguments() if k not in sym.params]
    inputs = {data: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
    step = atj.training_step(sym, at.plan(sym, devices=4, shapes={data: shape}))
    outs, new = step(dict(sym.params), inputs)
    ref = at.backend.run(sym, inputs=inputs, params=dict(sym.params), train=True)
    out = np.asarray(list(outs.values())[0] if isinstance(outs, dict) else outs[0])
    report[name] = {"out": float(np.abs(out - ref.outputs[0]).max() / np.abs(ref.outputs[0]).max()),
                    "params": max(float(np.abs(np.asarray(new[k]) - p).max()) for k, p in ref.params.items()),
                    "mapped": len(step.mapped)}
print(json.dumps(report))
"""


@pytest.mark.slow
def test_jax_training_steps_on_4_devices_equal_one_device():
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, here], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    for name, r in report.items():
        assert r["out"] < 1e-5 and r["params"] < 1e-5 and r["mapped"] > 0, (name, r)
