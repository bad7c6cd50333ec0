"""The arena-only execution graph (ExecOptions::arena_only, issue #24): what the memory-aware
search measures for each candidate plan (planner/memory_fit.peak_bytes) is built without
dependencies, and its memory plan must be the full build's -- every buffer's offset and
lifetime, every device's arena and live peak -- on the test models, random plans (devices with
different schedules) and a Transformer at the memory weights the search tries."""
import numpy as np
import pytest

import autotile as at
from autotile import _core
from autotile.errors import Error
from autotile.planner import lowered_training_graph as lowered_of
from models import MODELS
from random_plans import lowered_training_graph, random_plan
from searched_plans import searched_transformer


def core_build(low, plan, **kw):
    """The core execution graph of `plan` (a raw core plan or a Plan) on lowered graph `low`."""
    if isinstance(plan, dict):
        factors, tilings, strategies = plan["factors"], plan["tensor_tilings"], plan["node_strategies"]
    else:
        factors = plan.factors
        tilings = [plan.tensor_tilings[n] for n in low.tensor_names]
        strategies = [plan.node_strategies[n] for n in low.node_names]
    return _core.build_exec_graph(low.core, factors, tilings, strategies, True, **kw)


def assert_same_memory_plan(low, plan):
    full, only = core_build(low, plan), core_build(low, plan, arena_only=True)
    assert list(only.arena_bytes) == list(full.arena_bytes)
    assert list(only.live_peak_bytes) == list(full.live_peak_bytes)
    assert only.num_buffers == full.num_buffers and only.num_ops == full.num_ops
    fields = ("device", "tensor", "lo", "hi", "role", "partial", "producer", "readers", "bytes", "offset", "live")
    for i in range(full.num_buffers):
        a, b = full.buffer(i), only.buffer(i)
        assert [a[k] for k in fields] == [b[k] for k in fields], i
    for i in range(full.num_ops):
        a, b = full.op(i), only.op(i)
        assert [a[k] for k in ("kind", "device", "node", "inputs", "outputs", "bytes_moved", "time")] == \
               [b[k] for k in ("kind", "device", "node", "inputs", "outputs", "bytes_moved", "time")], i
    assert only.bytes_moved == full.bytes_moved and list(only.bytes_received) == list(full.bytes_received)
    assert any(full.op(i)["deps"] for i in range(full.num_ops))  # the full build has dependencies ...
    assert not any(only.op(i)["deps"] for i in range(only.num_ops))  # ... the arena-only one none
    return max(full.arena_bytes)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_arena_only_equals_the_full_build(model):
    sym, shapes, _ = MODELS[model]()
    plan = at.plan(sym, devices=4, shapes=shapes)
    assert assert_same_memory_plan(lowered_training_graph(sym, shapes), plan) > 0


@pytest.mark.parametrize("seed", range(6))
def test_arena_only_equals_the_full_build_for_random_plans(seed):
    rng = np.random.default_rng(200 + seed)
    name = sorted(MODELS)[seed % len(MODELS)]
    sym, shapes, _ = MODELS[name]()
    low = lowered_training_graph(sym, shapes)
    assert_same_memory_plan(low, random_plan(low, [2, 2], rng, input_shapes=shapes))


@pytest.mark.parametrize("weight", [0.0, 1.0, 16.0])
def test_arena_only_equals_the_full_build_on_a_transformer(weight):
    low = lowered_of(at.models.get("gpt2", layers=2, d_model=64, heads=2, seq=16, batch=4, vocab=128))[3]
    raw = _core.plan_graph(low.core, 8, "tofu", None, False, memory_weight=weight)
    assert assert_same_memory_plan(low, raw) > 0


@pytest.mark.parametrize("model,devices,weight", [("llama-7b", 8, 0.0), ("llama-7b", 8, 4.0), ("gpt2", 16, 1.0),
                                                  ("bert-base", 4, 0.25)])
def test_replayed_layers_equal_the_full_build(model, devices, weight):
    # the arena-only build makes each kind of node once and replays it for the nodes built
    # alike (exec/node_template.h): 4 layers of the same shapes, the plans the search makes
    # at several memory weights (layers tiled alike, and not)
    assert assert_same_memory_plan(*searched_transformer(model, devices, weight, layers=4)) > 0


def test_arena_only_refuses_dataflow_and_swapping():
    low = lowered_of(at.models.get("gpt2", layers=1, d_model=32, heads=2, seq=8, batch=2, vocab=64))[3]
    raw = _core.plan_graph(low.core, 2, "tofu", None, False)
    args = (low.core, raw["factors"], raw["tensor_tilings"], raw["node_strategies"])
    with pytest.raises(Error, match="arena-only"):
        _core.build_exec_graph(*args, False, arena_only=True)
    with pytest.raises(Error, match="arena-only"):
        _core.build_exec_graph(*args, True, 1 << 20, arena_only=True)


def test_a_plan_over_the_limit_is_not_placed():
    # what the budgeted search measures: over the limit, the live peak (a lower bound) and no
    # offsets; at or under it, the full build's arenas
    low = lowered_of(at.models.get("gpt2", layers=2, d_model=64, heads=2, seq=16, batch=4, vocab=128))[3]
    raw = _core.plan_graph(low.core, 4, "tofu", None, False)
    full = core_build(low, raw)
    live = max(full.live_peak_bytes)
    assert live <= max(full.arena_bytes)
    over = core_build(low, raw, arena_only=True, arena_limit=live - 1)
    assert list(over.arena_bytes) == list(over.live_peak_bytes) == list(full.live_peak_bytes)
    assert all(over.buffer(i)["offset"] == -1 for i in range(over.num_buffers))
    at_limit = core_build(low, raw, arena_only=True, arena_limit=live)
    assert list(at_limit.arena_bytes) == list(full.arena_bytes)
    assert [at_limit.buffer(i)["offset"] for i in range(full.num_buffers)] == \
           [full.buffer(i)["offset"] for i in range(full.num_buffers)]
