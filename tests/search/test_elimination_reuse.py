"""The one-cut DP reuses the table of an elimination whose incident factors have the same
contents in the same places as an earlier one's (csrc/search/elimination.cc: a Transformer's
layers repeat the same terms, issue 24). Reuse must not change anything: every plan equals the
plan of the DP that computes every table (AUTOTILE_SEARCH_REUSE=off) -- tilings, strategies
and bytes -- on models that repeat a layer (GPT-2, BERT and LLaMA, an unrolled LSTM whose
timesteps share strategy variables) and on the random graphs of the DP tests, whose cut costs
are also checked against bruteforce there."""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autotile as at
from autotile import _core
from autotile.planner import lowered_training_graph

from .random_graphs import RandomGraph

TINY = dict(batch=4, seq=16, d_model=32, heads=4, vocab=64)
MODELS = [
    ("gpt2-small", dict(TINY, layers=4), 16),
    ("bert-base", dict(TINY, layers=3), 8),
    ("llama-7b", dict(TINY, layers=3, d_ff=64), 32),
    ("rnn-3-64", dict(batch=8), 8),
]


def _plan(core, devices, monkeypatch, reuse, **kw):
    monkeypatch.setenv("AUTOTILE_SEARCH_REUSE", "on" if reuse else "off")
    raw = _core.plan_graph(core, devices, "tofu", **kw)
    return {k: raw[k] for k in ("factors", "cut_costs", "total_bytes", "tensor_tilings", "node_strategies")}


@pytest.mark.parametrize("name,sizes,devices", MODELS, ids=[m[0] for m in MODELS])
def test_reuse_keeps_the_plan_of_repeated_layers(name, sizes, devices, monkeypatch):
    core = lowered_training_graph(at.models.get(name, **sizes))[3].core
    for refine in (False, True):
        plain = _plan(core, devices, monkeypatch, False, refine=refine)
        assert _plan(core, devices, monkeypatch, True, refine=refine) == plain


def test_reuse_keeps_the_plan_with_a_memory_term(monkeypatch):
    core = lowered_training_graph(at.models.get("gpt2-small", **dict(TINY, layers=3)))[3].core
    plain = _plan(core, 8, monkeypatch, False, memory_weight=1e-3)
    assert _plan(core, 8, monkeypatch, True, memory_weight=1e-3) == plain


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data(), devices=st.sampled_from([4, 6, 8]))
def test_reuse_keeps_the_plan_of_random_graphs(data, devices, monkeypatch):
    b = RandomGraph(data).b
    plain = _plan(b.g, devices, monkeypatch, False, strategy_provider=b.mock)
    assert _plan(b.g, devices, monkeypatch, True, strategy_provider=b.mock) == plain
