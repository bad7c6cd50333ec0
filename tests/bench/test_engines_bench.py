"""bench/engines.py --quick --detail (issue 23): the README MLP's rows, each plan's bytes
against what XLA compiles from the JAX step, and the per-tensor differences with their
causes, as the benchmark writes them (engines.json). The figures come from the plan and the
compiled program; what they must satisfy is checked here, not their values."""
import importlib.util
import json

import pytest

from run_script import run_bench


def test_engines_quick_rows_and_causes(tmp_path):
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed (pip install 'autotile[jax]'; CI installs it)")
    proc = run_bench("engines", tmp_path, "--quick", "--detail")
    with open(tmp_path / "engines.json") as f:
        rows = {r["plan"]: r for r in json.load(f)["results"]}
    assert set(rows) == {"tofu", "data", "rules 2x4"} and all(r["ok"] for r in rows.values())
    for r in rows.values():
        assert abs(r["compiled_bytes"] - r["plan_bytes"]) <= 0.01 * r["plan_bytes"]
        assert r["global_view_bytes"] > r["compiled_bytes"]  # constraints alone: XLA's costlier lowering
        assert r["max_param_diff"] < 1e-5
        # the differences account for the whole gap between the two totals
        gap = sum(d["compiled"] - d["plan"] for d in r["differences"])
        assert gap == r["compiled_bytes"] - r["plan_bytes"]
        assert all(d["cause"] and d["short"] != "not attributed" for d in r["differences"])
    assert [d["short"] for d in rows["rules 2x4"]["differences"]] == ["uneven split"]
    assert "per tensor, where the compiled step moves other bytes" in proc.stdout
