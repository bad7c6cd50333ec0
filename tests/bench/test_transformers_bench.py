"""CI run of ``bench/transformers.py --quick``: the zoo's parameter counts equal the published
ones, and tofu's plan never costs more bytes than data parallelism, Megatron-LM's layout or
Mesh-TF Sec 9's layout on the same model (the hand layouts' parameter layouts, searched
completions). Speed is printed, not checked."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench_out")
    env = dict(os.environ, AUTOTILE_BENCH_OUT=str(out), OPENBLAS_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "transformers.py"), "--quick"], env=env,
                          capture_output=True, text=True, timeout=600)
    # exit status 1 means a count differs or the search lost to a hand layout: the checks below say which
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert "Bytes per training step" in proc.stdout
    return json.loads((out / "transformers.json").read_text())


def test_parameter_counts_equal_published(doc):
    assert doc["parameters"]
    for row in doc["parameters"]:
        assert row["match"], f"{row['model']}: {row['parameters']:,} parameters, published {row['published']:,.0f}"


def test_search_never_worse_than_hand_layouts(doc):
    assert len(doc["layouts"]) >= 4
    for row in doc["layouts"]:
        what = f"{row['model']} on {row['devices']} devices, batch {row['batch']}"
        assert row["tofu"] is not None and row["tofu"] > 0, what
        for hand in ("data", "megatron", "mesh-tf"):
            assert row[hand] is not None, f"{what}: {hand} failed: {row.get(hand + '_error')}"
            assert row["tofu"] <= row[hand] * (1 + 1e-9), f"{what}: tofu {row['tofu']:.4g} B > {hand} {row[hand]:.4g} B"
        assert row["worse_than"] == []


def test_plan_times_are_reported(doc):
    for t in doc["plan_time"]:
        assert t["search_seconds"] > 0 and t["plan_wall_seconds"] >= t["search_seconds"]
        assert t["lower_seconds"] > 0 and t["bytes"] > 0
