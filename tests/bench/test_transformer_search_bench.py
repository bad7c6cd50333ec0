"""bench/transformer_search.py's rows (issue 24): a row's repeated searches of the lowered
graph move the bytes of its `at.plan` (the script refuses a row where they differ), and the
row carries what the table prints (medians of its repeated searches). Speed is printed by the script, not checked here."""
import importlib.util
import os

import autotile as at

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _script():
    spec = importlib.util.spec_from_file_location("transformer_search",
                                                  os.path.join(ROOT, "bench", "transformer_search.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_row_of_a_two_layer_llama_70b_shape():
    bench = _script()
    row = bench.one_row("llama-70b", 2, 8, repeat=3)
    assert row["layers"] == 2 and row["devices"] == 8 and len(row["search_runs"]) == 3
    assert row["search_seconds"] == sorted(row["search_runs"])[1]  # the median of three
    assert row["search_cpu_seconds"] == sorted(row["search_cpu_runs"])[1]
    assert row["plan_seconds"] > 0 and row["plan_cpu_seconds"] > 0
    name, sizes = bench.MODELS["llama-70b"]
    again = at.plan(at.models.get(name, batch=8, layers=2, **sizes), devices=8)
    assert row["bytes"] == again.comm_bytes and row["groups"] == again.num_groups
