"""Device classes of the arena-only execution graph (ExecOptions::device_classes, issue #24):
the memory-aware search builds and plans one device of each class of devices whose parts of
every node agree (csrc/exec/node_template.h) and gives the others their class's arena. The
oracle is the full k-device build: every device's arena and live peak must be its own, on the
test models under random plans (devices with different schedules), Transformers at the memory
weights the search tries, and a 64-device LLaMA."""
import numpy as np
import pytest

import autotile as at
from autotile import _core
from autotile.planner import lowered_training_graph as lowered_of
from models import MODELS
from random_plans import lowered_training_graph, random_plan
from searched_plans import searched_transformer


def builds(low, plan, **kw):
    """(full build, class build) of `plan` (a raw core plan or a Plan) on lowered graph `low`."""
    if isinstance(plan, dict):
        args = (plan["factors"], plan["tensor_tilings"], plan["node_strategies"])
    else:
        args = (plan.factors, [plan.tensor_tilings[n] for n in low.tensor_names],
                [plan.node_strategies[n] for n in low.node_names])
    full = _core.build_exec_graph(low.core, *args, True)
    return full, _core.build_exec_graph(low.core, *args, True, arena_only=True, classes=True, **kw)


def assert_class_peaks(low, plan):
    """The class build's per-device arenas, live peaks and bytes are the full build's; returns
    the number of classes."""
    full, cls = builds(low, plan)
    assert list(cls.arena_bytes) == list(full.arena_bytes)
    assert list(cls.live_peak_bytes) == list(full.live_peak_bytes)
    assert cls.bytes_moved == full.bytes_moved and list(cls.bytes_received) == list(full.bytes_received)
    reps = set(cls.class_of)
    assert all(cls.class_of[r] == r for r in reps)  # a class's representative is its own
    assert {cls.buffer(i)["device"] for i in range(cls.num_buffers)} == reps  # only they are built
    # over a limit: every device's live peak, nothing placed
    live = max(full.live_peak_bytes)
    _, over = builds(low, plan, arena_limit=live - 1)
    assert list(over.arena_bytes) == list(full.live_peak_bytes)
    return len(reps)


@pytest.mark.parametrize("factors", [[2, 2], [2, 2, 2], [4, 2]])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_class_peaks_equal_the_full_build_for_random_plans(model, factors):
    rng = np.random.default_rng(300 + len(factors) * 10 + factors[0])
    sym, shapes, _ = MODELS[model]()
    low = lowered_training_graph(sym, shapes)
    for _ in range(2):
        assert_class_peaks(low, random_plan(low, factors, rng, input_shapes=shapes))


@pytest.mark.parametrize("model", sorted(MODELS))
def test_class_peaks_equal_the_full_build_for_searched_plans(model):
    sym, shapes, _ = MODELS[model]()
    assert assert_class_peaks(lowered_training_graph(sym, shapes), at.plan(sym, devices=8, shapes=shapes)) >= 1


@pytest.mark.parametrize("model,devices", [("llama-7b", 16), ("gpt2", 8), ("bert-base", 16)])
@pytest.mark.parametrize("weight", [0.0, 1.0, 4.0, 64.0])
def test_class_peaks_equal_the_full_build_on_transformers(model, devices, weight):
    assert 1 <= assert_class_peaks(*searched_transformer(model, devices, weight, layers=3)) <= devices


@pytest.mark.slow
def test_class_peaks_equal_the_full_build_on_64_devices():
    # the budgeted search's LLaMA case, scaled down: 64 devices, several classes, fewer than 64
    low = lowered_of(at.models.get("llama-7b", layers=2, d_model=128, heads=8, d_ff=256, seq=64, batch=8,
                                   vocab=256))[3]
    counts = []
    for weight in (0.0, 1.0, 4.0):
        raw = _core.plan_graph(low.core, 64, "tofu", None, False, memory_weight=weight)
        counts.append(assert_class_peaks(low, raw))
    assert min(counts) < 64 and max(counts) > 1, counts


def test_classes_need_an_arena_only_build():
    low = lowered_of(at.models.get("gpt2", layers=1, d_model=32, heads=2, seq=8, batch=2, vocab=64))[3]
    raw = _core.plan_graph(low.core, 2, "tofu", None, False)
    with pytest.raises(at.Error, match="arena-only"):
        _core.build_exec_graph(low.core, raw["factors"], raw["tensor_tilings"], raw["node_strategies"], True,
                               classes=True)
