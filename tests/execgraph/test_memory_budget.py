"""The memory-aware search (planner/memory_fit.py, csrc/search/memory_term.cc): with a
per-device budget, the plan returned fits it -- every device's arena, checked to be a valid
placement (no two live buffers share bytes, every buffer inside the arena) by the independent
checker of test_memory_plan.py, is within the budget -- it still runs like one device, and when
the cheapest plan already fits nothing changes."""
import numpy as np
import pytest

import autotile as at
from autotile.execgraph import transform
from models import MODELS, assert_same_step, reference_step, values
from test_memory_plan import check_memory_plan


@pytest.mark.parametrize("name", ["mlp", "cnn", "residual", "lstm"])
def test_budget_search_returns_a_plan_that_fits(name):
    sym, shapes, classes = MODELS[name]()
    free = at.plan(sym, devices=4, shapes=shapes)
    free_peak = max(transform(sym, free).peak_memory(d) for d in range(4))
    smallest = min(at.plan(sym, devices=4, shapes=shapes, device_memory=int(free_peak * f)).peak_memory
                   for f in (0.95, 0.9))  # budgets the cheapest plan misses, where the search can trade
    budget = smallest
    plan = at.plan(sym, devices=4, shapes=shapes, device_memory=budget)
    assert plan.peak_memory <= budget and plan.device_memory == budget
    assert plan.comm_bytes >= free.comm_bytes or plan.peak_memory < free_peak
    eg = transform(sym, plan)
    check_memory_plan(eg)
    for d in range(4):  # every buffer lies inside the arena (checked above), the arena in the budget
        assert eg.peak_memory(d) <= budget
    vals = values(sym, shapes, classes)
    ref = reference_step(sym, shapes, vals)
    res = at.backend.run(sym, devices=4, inputs={k: vals[k] for k in shapes},
                         params={k: v for k, v in vals.items() if k not in shapes}, train=True, plan=plan)
    assert_same_step(res, ref, f"{name} under a memory budget")


def test_a_budget_the_cheapest_plan_fits_changes_nothing():
    sym, shapes, _ = MODELS["cnn"]()
    free = at.plan(sym, devices=4, shapes=shapes)
    roomy = at.plan(sym, devices=4, shapes=shapes, device_memory="1GiB")
    assert roomy.tensor_tilings == free.tensor_tilings and roomy.memory_weight == 0.0
    assert roomy.peak_memory == max(transform(sym, free).peak_memory(d) for d in range(4))
    assert "budget 1.1 GB" in roomy.summary()


def test_wresnet_memory_comes_down_with_a_budget():
    free = at.plan("wresnet-50-4", devices=8, batch=8)
    free_peak = max(transform("wresnet-50-4", free).peak_memory(d) for d in range(8))
    fit = at.plan("wresnet-50-4", devices=8, batch=8, device_memory=int(free_peak * 0.9))
    assert fit.peak_memory <= free_peak * 0.9
    assert max(transform("wresnet-50-4", fit).peak_memory(d) for d in range(8)) == fit.peak_memory


@pytest.mark.parametrize("budget, needle", [
    ("16 parsecs", "expected a positive size with a unit"),
    (-5, "must be a positive number of bytes"),
    ([1], "must be a number of bytes or a string"),
])
def test_bad_budgets_are_named(budget, needle):
    sym, shapes, _ = MODELS["mlp"]()
    with pytest.raises(at.Error, match=needle):
        at.plan(sym, devices=4, shapes=shapes, device_memory=budget)


def test_budget_below_the_smallest_tile_names_the_tensor():
    sym, shapes, _ = MODELS["mlp"]()
    with pytest.raises(at.Error) as e:
        at.plan(sym, devices=2, shapes=shapes, device_memory=100)
    msg = str(e.value)
    assert "smaller than the smallest tile any plan can give tensor 'fc1_" in msg and "device_memory=100 B" in msg


def test_a_budget_no_plan_meets_says_how_close_it_got():
    sym, shapes, _ = MODELS["cnn"]()
    free = at.plan(sym, devices=2, shapes=shapes)
    largest_tile = max(np.prod(s) * 4 for s in free.tensor_shapes.values()) / 2
    with pytest.raises(at.Error, match="no plan fits device_memory=.* the smallest per-device peak found is"):
        at.plan(sym, devices=2, shapes=shapes, device_memory=int(largest_tile) + 1)


def test_an_op_larger_than_the_budget_is_named():
    """An unrolled LSTM's weight-gradient sum reads 8 timesteps' pieces at once: below that
    working set (its inputs' bytes, from the exec graph's own buffers: the output may take an
    input's place) no plan nor swapping fits, and the error names the node and its size."""
    sym = at.models.rnn(layers=1, hidden=256, steps=12, batch=16, vocab=16)
    plan = at.plan(sym, devices=1)
    eg = transform(sym, plan)
    sets = {}
    for op in eg.ops:
        if op["kind"] == "compute":
            held = max(sum(eg.buffers[b]["bytes"] for b in set(op["inputs"]) if b >= 0),
                       sum(eg.buffers[b]["bytes"] for b in set(op["outputs"])))
            name = eg.lowered.node_names[op["node"]]
            sets[name] = max(sets.get(name, 0), held)
    node, biggest = max(sets.items(), key=lambda kv: kv[1])
    assert "weight_grad_sum" in node, node  # a link of the sum over the 12 steps
    with pytest.raises(at.Error) as e:
        at.plan(sym, devices=1, device_memory=biggest - 1)
    assert f"node '{node}' alone needs" in str(e.value) and "which no swapping can lower" in str(e.value)
