"""``autotile.jax.plan`` on the Flax examples (examples/jax_flax_*.py), 8 host devices, a
2 x 4 mesh: the planned step's loss, gradients and updated parameters equal the plain jitted
JAX step's (the oracle: ``jax.value_and_grad`` and an SGD update on one device); the compiled
program's collectives move the plan's bytes within 10%; the shardings are a pytree shaped
like each argument, each tiling its leaf as the plan does. The checks run in a subprocess
(tests/jax/jax_plan_check.py): the host device count must be set before jax is imported."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def report(*names):
    pytest.importorskip("jax", reason="jax is not installed (pip install 'autotile[jax]'; CI installs it)")
    pytest.importorskip("flax", reason="flax is not installed (pip install 'autotile[jax]')")
    pytest.importorskip("optax", reason="optax is not installed (pip install 'autotile[jax]')")
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, os.path.join(HERE, "jax_plan_check.py"), *names], capture_output=True,
                          text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def assert_planned_step(r):
    assert r["loss_shape"] == []  # the loss comes back a scalar, as the function returns it
    assert abs(r["loss"] - r["ref_loss"]) <= 1e-5 * max(1.0, abs(r["ref_loss"]))
    assert r["param_err"] <= 1e-5
    assert r["grad_err"] <= 1e-4 * max(1.0, r["grad_scale"])  # undone from the update: (p - new) / lr
    assert r["new_structure_ok"] and all(r["shardings_structure_ok"])
    assert r["sharding_kinds"] == ["NamedSharding"] and r["mesh_sizes"] == [8] and r["tiles_ok"]
    assert r["global_nodes"] == {}  # every node a shard_map of its tiles with the plan's collectives
    assert abs(r["compiled_bytes"] - r["plan_bytes"]) <= 0.10 * r["plan_bytes"], r
    assert r["plan_bytes"] > 0  # a 2 x 4 mesh moves something: the check compares real traffic


def test_flax_mlp_step_as_planned():
    assert_planned_step(report("mlp")["mlp"])


@pytest.mark.slow
def test_flax_transformer_block_step_as_planned():
    assert_planned_step(report("transformer")["transformer"])


@pytest.mark.slow
def test_flax_cnn_step_as_planned():
    """NHWC convolutions (SAME, strided, grouped) read as NCHW Convolutions between transposes."""
    assert_planned_step(report("cnn")["cnn"])
