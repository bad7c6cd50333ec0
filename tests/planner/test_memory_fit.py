"""The memory-weight scan of the budgeted search (planner/memory_fit.py, issue #24): it measures
each distinct plan once and ends when the plan stops changing; the plan it returns (the weight,
the tilings and strategies, the peak, whether it swaps) is the one the full scan over every
weight returns, on the models of `autotile bench memory` (the slow cases are its full table's
budgets) and on small graphs whose scans end early, plateau on the way or never fit."""
import math

import pytest

import autotile as at
from autotile import _core
from autotile.planner import lowered_training_graph, memory_fit


def lowered(model, batch, seq=None, **sizes):
    spec = at.models.get(model, batch=batch, seq=seq, **sizes) if seq or sizes else model
    return lowered_training_graph(spec, batch=None if seq or sizes else batch)[3]


def both_scans(low, devices, budget):
    """(full scan's (raw, peak, weight, tried, searches), early-ending scan's) of
    memory_fit.fit, or the error each raised."""
    searched = []

    def search(w):
        searched.append(w)
        return _core.plan_graph(low.core, devices, "tofu", None, False, memory_weight=w)

    got = {}
    for full in (True, False):
        searched.clear()
        try:
            got[full] = memory_fit.fit(search, low, devices, budget, full_scan=full) + (len(searched),)
        except at.Error as e:  # no plan, even swapping: both scans must say so
            got[full] = str(e)
    return got[True], got[False]


def assert_same_choice(full, early):
    if isinstance(full, str):
        assert early == full
        return None
    (raw_f, peak_f, w_f, tried_f, n_f), (raw_e, peak_e, w_e, tried_e, n_e) = full, early
    assert memory_fit.plan_key(raw_e) == memory_fit.plan_key(raw_f)
    # the weight too, except where the bisection skipped a plan that could not win: then it
    # may meet the same plan at another weight
    assert (peak_e, raw_e.get("swap_budget")) == (peak_f, raw_f.get("swap_budget"))
    assert w_e == w_f or (raw_e.get("swap_budget") is None and w_e > 0)
    assert raw_e["total_bytes"] == raw_f["total_bytes"]
    assert n_e <= n_f and len(tried_e) <= len(tried_f)
    return n_e, n_f


@pytest.mark.parametrize("model,devices,batch,budget", [
    ("wresnet-50-1", 4, 128, 0.8e9),  # no partition fits: swaps the smallest plan
    ("rnn-2-2k", 4, 512, 0.8e9),  # fits at a weight, then bisects
    ("rnn-2-2k", 4, 1024, 0.8e9),
    ("vgg11", 4, 32, 0.5e9),
])
def test_the_scan_chooses_what_the_full_scan_chooses(model, devices, batch, budget):
    assert_same_choice(*both_scans(lowered(model, batch), devices, int(budget)))


def test_the_scan_ends_early_when_the_plan_stops_changing():
    # GPT-2 (2 layers) x4 at 60% of its plain plan's peak: no partition fits (the peak falls to
    # 75% at w = 4, rises to 84% at 16 and stays there); the early scan stops at 64, having seen
    # 16's plan again and the largest weight's be the same, and swaps the same plan
    low = lowered("gpt2", 8, seq=128, layers=2)
    budget = int(0.6 * memory_fit.peak_bytes(low, _core.plan_graph(low.core, 4, "tofu", None, False)))
    full, early = both_scans(low, 4, budget)
    n_early, n_full = assert_same_choice(full, early)
    assert early[2] == 4.0 and early[0]["swap_budget"] == budget
    assert n_early < n_full


@pytest.mark.parametrize("frac", [0.9, 0.8])
def test_the_bisection_skips_plans_that_cannot_win(frac):
    # a 2-layer LLaMA x32 at 90% / 80% of its plain plan's peak fits at a weight; on the way
    # down the bisection meets plans moving more bytes than one that already fits: the scan does
    # not measure them (issue #24, LLaMA-7B x64's w = 2 and 2.38) and returns the full scan's plan
    low = lowered("llama", 8, seq=256, layers=2)
    budget = int(frac * memory_fit.peak_bytes(low, _core.plan_graph(low.core, 32, "tofu", None, False)))
    full, early = both_scans(low, 32, budget)
    assert_same_choice(full, early)
    assert early[0].get("swap_budget") is None
    assert len({t[0] for t in early[3]}) < early[4]  # some weight searched, its plan not measured


def test_the_bisection_on_a_greedy_weight_curve():
    # LLaMA-7B x64's plans by weight (comm, peak / 1e8; the greedy search is not monotone: w = 2
    # moves more bytes than w = 4 and misses, w = 2.38 more than w = 2.83). The cheapest plan
    # that fits (brute force over the plans) is E; the scan finds it measuring fewer plans.
    curve = [(0.5, "A", 1001.70, 96.9), (1.9, "B", 1034.55, 108.4), (2.2, "C", 1199.11, 80.5),
             (2.6, "D", 1169.99, 77.6), (3.5, "E", 1162.874, 75.23), (math.inf, "F", 1162.878, 75.23)]

    def search(w):
        name, comm = next((n, c) for top, n, c, _ in curve if w < top)
        return {"factors": [2], "tensor_tilings": [[name]], "node_strategies": [[0]], "total_bytes": comm}

    peak = {n: p for _, n, _, p in curve}
    for full_scan in (True, False):
        measured = []

        def measure(raw):
            measured.append(raw["tensor_tilings"][0][0])
            return peak[measured[-1]]

        raw, m, w = memory_fit.search_weights(search, measure, 80.0, full_scan=full_scan)
        cheapest = min((c, n) for _, n, c, p in curve if p <= 80.0)[1]
        assert raw["tensor_tilings"][0][0] == cheapest == "E" and m == 75.23
        if not full_scan:
            assert "C" not in measured and "D" not in measured and len(measured) == 4


@pytest.mark.slow
@pytest.mark.parametrize("model,devices,batch,seq,budget", [
    ("gpt2-large", 8, 16, None, 12e9),
    ("wresnet-152-4", 8, 128, None, 12e9),
    ("rnn-10-8k", 8, 512, None, 12e9),
    ("llama-7b", 64, 8, 2048, 8e9),
])
def test_the_scan_chooses_what_the_full_scan_chooses_on_the_bench_models(model, devices, batch, seq, budget):
    assert_same_choice(*both_scans(lowered(model, batch, seq), devices, int(budget)))


def exact_fit(low, devices, budget):
    """The budgeted search as it was before issue #24's bounds: every plan's full memory plan
    (its exact arena) measured, the smallest-peak plan swapped when none fits; returns
    (plan key, weight, whether it swaps)."""
    tried = []

    def search(w):
        return _core.plan_graph(low.core, devices, "tofu", None, False, memory_weight=w)

    def exact(raw):
        return int(max(_core.build_exec_graph(low.core, raw["factors"], raw["tensor_tilings"],
                                              raw["node_strategies"], True).arena_bytes))

    got = memory_fit.search_weights(search, exact, budget, tried)
    if got is not None:
        return memory_fit.plan_key(got[0]), got[2], False
    w = min(tried, key=lambda t: (t[2], t[0]))[0]
    return memory_fit.plan_key(search(w)), w, True


@pytest.mark.parametrize("model,devices,batch,budget", [
    ("wresnet-50-1", 4, 128, 0.8e9),  # swaps: the smallest plan is chosen among bounds
    ("rnn-2-2k", 4, 512, 0.8e9),  # misses rejected by their live peaks, then fits
    ("vgg11", 4, 32, 0.5e9),
])
def test_live_peak_bounds_change_no_choice(model, devices, batch, budget):
    # the search rejects a plan whose live bytes exceed the budget without placing its memory
    # plan; the plan chosen (and swapped) is the one exact arenas choose
    low = lowered(model, batch)

    def search(w):
        return _core.plan_graph(low.core, devices, "tofu", None, False, memory_weight=w)

    raw, peak, w, tried = memory_fit.fit(search, low, devices, int(budget))
    assert (memory_fit.plan_key(raw), w, raw.get("swap_budget") is not None) == exact_fit(low, devices, int(budget))
    assert any(t[2] > budget for t in tried)
