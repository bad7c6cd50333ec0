"""bench/memory_ilp.py --quick runs and its figures are consistent: the exact program never
moves more bytes than the search at the same bound (the search's plan is one of the program's
solutions), every plan respects its bound, and the HiGHS log stays out of the table."""
import json

from run_script import run_bench


def test_memory_ilp_bench_quick(tmp_path):
    proc = run_bench("memory_ilp", tmp_path, "--quick", timeout=600)
    assert "Highs" not in proc.stdout and "search/exact" in proc.stdout
    rows = json.loads((tmp_path / "memory_ilp.json").read_text())["rows"]
    held = [r for r in rows if "fraction" in r]
    assert len(held) == 3
    for r in held:
        if r["exact_comm"] is not None and r["search_comm"] is not None:
            assert r["exact_held"] <= r["bound"] * (1 + 1e-9) and r["search_held"] <= r["bound"]
            assert r["exact_comm"] <= r["search_comm"] * (1 + 1e-9), r
    arena = [r for r in rows if "budget" in r]
    assert arena and all(r["search_arena"] <= r["budget"] and r["program_arena"] <= r["budget"] for r in arena)
