"""bench/memory_fit.py --quick (issue #15's table) runs and its figures are consistent: per
model the memory-aware search trains at least the batch the plain search does and swapping at
least that; every plan stays within the budget, and a swapped one needed more than it."""
import json

import pytest

from run_script import run_bench


@pytest.mark.slow
def test_memory_fit_bench_quick(tmp_path):
    proc = run_bench("memory_fit", tmp_path, "--quick")
    assert "SwapAdvisor Ch. 5" in proc.stdout and "Target:" in proc.stdout
    executed = proc.stdout[proc.stdout.index("Executed at half the need"):].split("\n\n")[0].splitlines()[3:]
    assert len(executed) == 2 and all(" yes " in line and "does not fit" not in line for line in executed), executed
    out = json.loads((tmp_path / "memory_fit.json").read_text())
    budget = out["budget"]
    rows = [r for r in out["rows"] if r["method"] in ("tofu", "tofu+budget", "+swap")]
    for model in {r["model"] for r in rows}:
        batch = {r["method"]: r["batch"] or 0 for r in rows if r["model"] == model}
        assert batch["tofu"] <= batch["tofu+budget"] <= batch["+swap"], (model, batch)
    for r in rows:
        if r["batch"]:
            assert r["peak_bytes"] <= budget
            assert r["swapped"] == (r["need_bytes"] > budget), r
            assert all(v > 0 for v in r["step_vs_unconstrained"].values()), r


@pytest.mark.slow
def test_memory_fit_bench_host_quick(tmp_path):
    """--host --quick: the swapped plan really swaps (at half the need), both steps are
    measured on the host runtime and simulated, and the ratios are what the table prints."""
    proc = run_bench("memory_fit", tmp_path, "--host", "--quick", timeout=900)
    rows = json.loads((tmp_path / "memory_swap_host.json").read_text())["rows"]
    assert rows
    for r in rows:
        assert r["swaps"] > 0 and r["swapped_bytes"] > 0
        assert all(t > 0 for t in r["measured_seconds"] + r["simulated_seconds"])
        ratio = r["measured_seconds"][1] / r["measured_seconds"][0]
        assert f"{ratio:.3f}" in proc.stdout


@pytest.mark.slow
def test_memory_fit_bench_planning_quick(tmp_path):
    """--planning --quick (issue #24): one row per planning case, the plain and budgeted CPU
    times and their ratio as printed, every budgeted plan within its budget or swapped."""
    proc = run_bench("memory_fit", tmp_path, "--planning", "--quick")
    rows = json.loads((tmp_path / "memory_planning.json").read_text())["rows"]
    assert [(r["model"], r["batch"]) for r in rows] == [("wresnet-50-1", 128), ("rnn-2-2k", 512)]
    for r in rows:
        assert r["plain_cpu_seconds"] > 0 and r["budget_cpu_seconds"] > 0
        assert r["ratio"] == pytest.approx(r["budget_cpu_seconds"] / r["plain_cpu_seconds"])
        assert f"{r['ratio']:.1f}x" in proc.stdout
        assert r["swapped"] or r["peak_bytes"] <= r["budget"]
