"""Results kept in host memory between steps (SwapAdvisor; csrc/exec/swap_plan.cc): a
weight-heavy step -- its updated weights, gradients and optimizer states alone exceed half of
what the plan needs -- fits half its need only when those results may stay in the host pool at
the end of the step and the next step's weights and states are loaded there and swapped in at
first use. On 1, 2 and 4 devices such plans stay within the budget, their host buffers are the
tiles the runtime loads and gathers, and several steps, each fed the last one's params and
optimizer states, are bit for bit the unconstrained plan's steps (and the single-device steps
to float32 accuracy)."""
import numpy as np
import pytest

import autotile as at
from autotile.execgraph import transform
from models import assert_same_step, values
from test_memory_plan import check_memory_plan
from test_swap import check_swap_ops


def wide_mlp(layers=4, width=256, batch=8):
    """4 fully connected layers of 256 x 256 at batch 8: the weights are almost all its memory
    (at the end of a step 2.11 of the 2.13 MB one device needs are its results)."""
    h = at.sym.Variable("data")
    for i in range(layers):
        h = at.sym.FullyConnected(h, num_hidden=width, name=f"fc{i}")
        h = at.sym.Activation(h, act_type="relu", name=f"relu{i}")
    h = at.sym.FullyConnected(h, num_hidden=8, name="out")
    return at.sym.SoftmaxOutput(h, name="softmax"), {"data": (batch, width), "softmax_label": (batch,)}, 8


def half_need_plan(sym, shapes, devices, optimizer):
    """(the unconstrained plan, the same plan swapping to half the memory it needs, budget)."""
    plan = at.plan(sym, devices=devices, shapes=shapes, optimizer=optimizer)
    need = max(transform(sym, plan).peak_memory(d) for d in range(devices))
    half = at.Plan.from_json(plan.to_json())
    half.swap_budget = need // 2
    return plan, half, need // 2


def result_bytes_at_end(eg, device):
    """Bytes of the step's results (outputs, gradients, updated params, new states) whose tile
    on `device` is in its arena, not its host pool, at the end of the step."""
    tg = eg.training
    names = list(tg.output_names) + list(tg.grad_names) + list(tg.updated_names) + list(tg.new_state_names)
    return sum(eg.buffers[eg.core.tile(eg.tensor_id[n], device)]["bytes"] for n in names
               if not eg.buffers[eg.core.tile(eg.tensor_id[n], device)]["host"])


def all_result_bytes(eg, device):
    tg = eg.training
    names = list(tg.output_names) + list(tg.grad_names) + list(tg.updated_names) + list(tg.new_state_names)
    return sum(eg.buffers[eg.core.tile(eg.tensor_id[n], device)]["bytes"] for n in names)


def chain(sym, shapes, vals, devices, plan, optimizer, steps, ctx="cpu", **kw):
    """`steps` training steps, each fed the last one's params and optimizer states."""
    inputs = {k: vals[k] for k in shapes}
    params = {k: v for k, v in vals.items() if k not in shapes}
    states, out = {}, []
    if plan is not None:
        kw["plan"] = plan
    for step in range(steps):
        res = at.backend.run(sym, devices=devices, inputs=inputs, params=params, states=states, train=True,
                             optimizer=optimizer, optimizer_args={"lr": 0.05}, seed=step, ctx=ctx, **kw)
        params, states = res.params, res.states
        out.append(res)
    return out


def assert_bit_equal(got, want, what):
    for a, b in zip(got.outputs, want.outputs):
        np.testing.assert_array_equal(a, b, err_msg=f"{what}: output")
    for kind in ("grads", "params", "states"):
        g, w = getattr(got, kind), getattr(want, kind)
        assert sorted(g) == sorted(w), f"{what}: {kind}"
        for n in w:
            np.testing.assert_array_equal(g[n], w[n], err_msg=f"{what}: {kind} {n}")


@pytest.mark.parametrize("devices", [1, 2, 4])
@pytest.mark.parametrize("optimizer", ["sgd", "momentum"])
def test_weight_heavy_plan_fits_half_its_need(devices, optimizer):
    """The results alone exceed half the need on every device; the swap plan fits it by
    keeping results in the host pool (their tiles are host buffers) and loading weights and
    states there, swapped in before their first use."""
    sym, shapes, _ = wide_mlp()
    _, half, budget = half_need_plan(sym, shapes, devices, optimizer)
    eg = transform(sym, half)
    check_memory_plan(eg)
    check_swap_ops(eg)
    tg = eg.training
    for d in range(devices):
        assert all_result_bytes(eg, d) > budget, "the results alone must exceed the budget"
        assert eg.peak_memory(d) <= budget
        assert result_bytes_at_end(eg, d) <= budget
        stay = [n for n in list(tg.updated_names) + list(tg.grad_names)
                if eg.buffers[eg.core.tile(eg.tensor_id[n], d)]["host"]]
        loaded = [n for n in list(tg.param_names) + list(tg.state_names)
                  if eg.buffers[eg.core.tile(eg.tensor_id[n], d)]["host"]]
        assert stay and loaded, f"device {d}: results kept on the host {stay}, inputs loaded there {loaded}"
        for n in stay:  # written by a swap-out (or already there), nothing reads it in the step
            b = eg.buffers[eg.core.tile(eg.tensor_id[n], d)]
            assert b["producer"] >= 0 and all(eg.ops[r]["kind"] == "swap_in" for r in b["readers"])
        for n in loaded:  # loaded before the step, read only by swap-ins
            b = eg.buffers[eg.core.tile(eg.tensor_id[n], d)]
            assert b["producer"] < 0 and all(eg.ops[r]["kind"] == "swap_in" for r in b["readers"])


def test_at_plan_swaps_a_weight_heavy_step_to_half_its_need():
    """at.plan(device_memory=half the need) on one device: no partition fits, the swap plan
    does (it was refused while the results had to be on the device at the end)."""
    sym, shapes, _ = wide_mlp()
    _, _, budget = half_need_plan(sym, shapes, 1, "sgd")
    plan = at.plan(sym, devices=1, shapes=shapes, device_memory=budget)
    assert plan.swap_budget == budget
    assert transform(sym, plan).peak_memory(0) <= budget


@pytest.mark.parametrize("devices", [1, 2, 4])
@pytest.mark.parametrize("optimizer", ["sgd", "momentum"])
def test_steps_at_half_the_need_equal_the_unconstrained_steps(devices, optimizer):
    """Three steps on the host runtime, params and optimizer states carried from each to the
    next through the host buffers they are gathered from and loaded into: bit for bit the
    unconstrained plan's three steps, and the single-device steps to float32 accuracy."""
    sym, shapes, classes = wide_mlp()
    vals = values(sym, shapes, classes)
    free, half, budget = half_need_plan(sym, shapes, devices, optimizer)
    swapped = chain(sym, shapes, vals, devices, half, optimizer, 3)
    unswapped = chain(sym, shapes, vals, devices, free, optimizer, 3)
    one = chain(sym, shapes, vals, 1, None, optimizer, 3)
    for step, (got, want, ref) in enumerate(zip(swapped, unswapped, one)):
        assert max(got.stats["peak_memory"]) <= budget
        assert_bit_equal(got, want, f"x{devices} {optimizer} step {step + 1} at half the need")
        assert_same_step(got, ref, f"x{devices} {optimizer} step {step + 1} against one device")
    p = next(iter(one[0].params))
    assert not np.array_equal(swapped[2].params[p], swapped[1].params[p]), "the params moved"
