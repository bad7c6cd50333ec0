"""CI smoke run of the quick benchmark suite's fastest parts (speedup and MLP, simulated):
they run (speedup through ``autotile bench``, the package's module; mlp through its thin
script in bench/), write their JSON and PNG, and the numbers are sane. Speed is not checked."""
import json
import math
import os
import subprocess
import sys

import pytest

import autotile as at

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench_out")
    env = dict(os.environ, AUTOTILE_BENCH_OUT=str(out), OPENBLAS_NUM_THREADS="1")
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(at.__file__)))
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    for argv in (["-m", "autotile.cli", "bench", "speedup", "--quick"],
                 [os.path.join(ROOT, "bench", "mlp.py"), "--quick"]):
        proc = subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "SIMULATED" in proc.stdout
    return out


def test_outputs_exist(out_dir):
    for name in ("speedup.json", "speedup.png", "mlp.json", "mlp.png"):
        assert (out_dir / name).stat().st_size > 0, name


def test_speedups_are_finite_and_times_positive(out_dir):
    doc = json.loads((out_dir / "speedup.json").read_text())
    seen = 0
    for entry in doc["results"]:
        assert entry["single"]["ok"]
        for algo, r in entry["algorithms"].items():
            if not r["ok"]:
                continue
            for sim in r["sims"].values():
                assert sim["step_seconds"] > 0 and sim["compute_seconds"] > 0
                assert sim["step_seconds"] >= sim["compute_seconds"] * (1 - 1e-9)
                assert math.isfinite(sim["speedup"]) and 0 < sim["speedup"] <= 2 * doc["devices"]
                seen += 1
    assert seen > 0


def test_tofu_communicates_no_more_than_data_parallelism(out_dir):
    for doc_name in ("speedup.json",):
        doc = json.loads((out_dir / doc_name).read_text())
        for entry in doc["results"]:
            tofu, data = entry["algorithms"]["tofu"], entry["algorithms"]["data"]
            if tofu["ok"] and data["ok"]:
                assert tofu["comm_bytes"] <= data["comm_bytes"] * (1 + 1e-9)
    rows = json.loads((out_dir / "mlp.json").read_text())["results"]
    for k in {r["devices"] for r in rows if r["devices"] > 1}:
        by = {r["algorithm"]: r for r in rows if r["devices"] == k and r["ok"]}
        if "tofu" in by and "data" in by:
            assert by["tofu"]["comm_bytes"] <= by["data"]["comm_bytes"] * (1 + 1e-9)
