"""The memory term of the budgeted search (csrc/search/memory_term.h) leaves small shared
read-only inputs out (LLaMA's rotary tables; issue #24): they stay fixed replicated by
dominance, as without a budget, instead of being conditioned on in every cut (9 DPs a cut for
LLaMA-7B). Against the term that weighs every tensor (AUTOTILE_MEMORY_TERM=all, the term
before), on a LLaMA small enough to plan in a test yet large enough that its tables are left
out: each weight's plan is the old one or moves fewer bytes while holding at most the tables'
bytes more, and the budgeted search returns a plan that fits (or swaps) whenever the old one
did, moving no more bytes. LLaMA-7B x64 at 8 GB returns the old plan, peak and bytes
(tests/planner/test_memory_fit.py's slow bench cases; docs/benchmarks.md)."""
import pytest

import autotile as at
from autotile import _core
from autotile.planner import lowered_training_graph, memory_fit

LLAMA = dict(batch=16, seq=32, layers=4, d_model=128, heads=8, d_ff=512, vocab=256)
WEIGHTS = [1 / 64, 1 / 4, 1, 4, 16, 256, 4096]


@pytest.fixture(scope="module")
def llama():
    return lowered_training_graph(at.models.get("llama-7b", **LLAMA))[3]


def table_bytes(low):
    """Bytes of the rotary tables (what the term leaves out)."""
    nbytes = memory_fit.tensor_bytes(low)
    return sum(nbytes[i] for i, n in enumerate(low.tensor_names) if n in ("rope_cos", "rope_sin"))


def search_with(monkeypatch, low, devices, term):
    def search(w):
        if term == "all":
            monkeypatch.setenv("AUTOTILE_MEMORY_TERM", "all")
        else:
            monkeypatch.delenv("AUTOTILE_MEMORY_TERM", raising=False)
        return _core.plan_graph(low.core, devices, "tofu", None, False, memory_weight=w)

    return search


def test_the_tables_are_small_and_left_out(llama):
    share = table_bytes(llama) / memory_fit.tensor_bytes(llama).sum()
    assert 0 < share < 1 / 16384  # below kSharedInputShare at the first cut


@pytest.mark.parametrize("devices", [4, pytest.param(8, marks=pytest.mark.slow)])
def test_each_weight_plan_is_the_old_one_or_cheaper(monkeypatch, llama, devices):
    new, old = search_with(monkeypatch, llama, devices, None), search_with(monkeypatch, llama, devices, "all")
    tables, changed = table_bytes(llama), 0
    for w in WEIGHTS:
        a, b = new(w), old(w)
        if memory_fit.plan_key(a) == memory_fit.plan_key(b):
            continue
        changed += 1
        assert a["total_bytes"] <= b["total_bytes"], w
        assert memory_fit.peak_bytes(llama, a) <= memory_fit.peak_bytes(llama, b) + tables, w
    assert changed < len(WEIGHTS)  # the small weights' plans are the same


@pytest.mark.parametrize("devices,share", [(4, 0.7), (4, 0.9), pytest.param(8, 0.5, marks=pytest.mark.slow),
                                           pytest.param(8, 0.7, marks=pytest.mark.slow)])
def test_the_budgeted_plan_fits_and_moves_no_more(monkeypatch, llama, devices, share):
    plain = memory_fit.peak_bytes(llama, _core.plan_graph(llama.core, devices, "tofu", None, False))
    budget = int(share * plain)
    raw_n, peak_n, _, _ = memory_fit.fit(search_with(monkeypatch, llama, devices, None), llama, devices, budget)
    raw_o, peak_o, _, _ = memory_fit.fit(search_with(monkeypatch, llama, devices, "all"), llama, devices, budget)
    assert peak_n <= budget and peak_o <= budget
    assert (raw_n.get("swap_budget") is None) or (raw_o.get("swap_budget") is not None)  # swaps only where the old did
    assert raw_n["total_bytes"] <= raw_o["total_bytes"]
    assert memory_fit.peak_bytes(llama, raw_n, raw_n.get("swap_budget") or 0) == peak_n  # an independent rebuild
