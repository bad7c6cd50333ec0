"""`autotile plan --mesh/--layout/--algorithm ilp` and the layout exports, as a user types them."""
import json
import os
import subprocess
import sys

import pytest


def autotile(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "autotile.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


def test_mesh_and_layout_rules_from_the_command_line(tmp_path):
    dt, jx, rules = tmp_path / "dt.json", tmp_path / "jax.json", tmp_path / "rules.json"
    p = autotile("plan", "mlp", "--mesh", "batch=2,model=4", "--batch", "64", "--no-compare",
                 "--layout", "fc*_weight:0=model", "--layout", "data:0=batch",
                 # the biases too: left free, one splits over one of model's two cuts (its layer on
                 # k slabs at the other), which only a mesh dimension per cut expresses
                 "--layout", "fc*_bias:0=model",
                 "--dtensor", str(dt), "--jax", str(jx), "--mesh-tf", str(rules))
    assert p.returncode == 0, p.stderr
    assert "mesh batch=2 x model=4" in p.stdout
    row = next(line for line in p.stdout.splitlines() if line.strip().startswith("fc1_weight"))
    assert row.split()[-3:] == ["replicate", "split(0)", "split(0)"]
    d = json.loads(dt.read_text())
    assert d["mesh"] == {"shape": [2, 4], "dim_names": ["batch", "model"]}
    assert d["placements"]["fc1_weight"] == ["Replicate()", "Shard(0)"]
    assert json.loads(jx.read_text())["specs"]["data"] == ["batch", None]
    assert json.loads(rules.read_text())["layout"]["fc1_weight"] == {"0": "model"}


@pytest.mark.parametrize("args, needle", [
    (["--layout", "fc1"], "expected PATTERN:DIM=AXIS"),
    (["--layout", "fc1_weight:x=model"], "'x=model' is not DIM=AXIS"),
    (["--mesh", "batch"], "expected 'axis=size'"),
    (["--mesh", "batch=two"], "the size of axis 'batch' must be an integer"),
])
def test_bad_mesh_or_rule_is_a_usage_error(args, needle):
    p = autotile("plan", "mlp", "--no-compare", *args)
    assert p.returncode == 2 and needle in p.stderr


def test_rule_that_matches_nothing_is_a_model_error():
    p = autotile("plan", "mlp", "--no-compare", "--layout", "nothing:0=devices")
    assert p.returncode == 1 and "layout rule 'nothing' matches no tensor" in p.stderr


def test_ilp_algorithm_from_the_command_line():
    p = autotile("plan", "mlp", "--devices", "4", "--batch", "32", "--algorithm", "ilp", "--no-compare")
    assert p.returncode == 0, p.stderr
    assert "algorithm=ilp" in p.stdout


def test_memory_budget_from_the_command_line():
    p = autotile("plan", "wresnet-50-4", "--devices", "8", "--batch", "8", "--memory", "600MB", "--no-compare")
    assert p.returncode == 0, p.stderr
    assert "per-device memory peak" in p.stdout and "budget 600.0 MB" in p.stdout
    bad = autotile("plan", "mlp", "--memory", "16 parsecs", "--no-compare")
    assert bad.returncode == 2 and "expected a positive size with a unit" in bad.stderr
