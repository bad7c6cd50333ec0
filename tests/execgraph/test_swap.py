"""Swap planning (SwapAdvisor; csrc/exec/swap_plan.cc): when no partition fits the budget,
tensors move to host memory between uses. A training step whose tensors need twice the
per-device budget still gives the single-device result (outputs, gradients, updated params),
every device's arena -- a valid placement by the independent checker of test_memory_plan.py --
stays within the budget at every point of the schedule, and the swap ops are well formed
(each swap-out copies a device buffer to the host pool after its last use before a gap, the
swap-in brings it back before the next use, on the device's copy stream)."""
import numpy as np
import pytest

import autotile as at
from autotile.execgraph import transform
from models import reference_step, values
from test_memory_plan import check_memory_plan


def deep_mlp():
    x = at.sym.Variable("data")
    h = x
    for i in range(12):
        h = at.sym.FullyConnected(h, num_hidden=32, name=f"fc{i}")
        h = at.sym.Activation(h, act_type="relu", name=f"relu{i}")
    h = at.sym.FullyConnected(h, num_hidden=8, name="out")
    return at.sym.SoftmaxOutput(h, name="softmax"), {"data": (256, 32), "softmax_label": (256,)}, 8


def deep_cnn():
    x = at.sym.Variable("data")
    h = x
    for i in range(8):
        h = at.sym.Convolution(h, kernel=(3, 3), pad=(1, 1), num_filter=8, name=f"conv{i}")
        h = at.sym.Activation(h, act_type="tanh", name=f"act{i}")
    h = at.sym.Pooling(h, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool")
    h = at.sym.Flatten(h, name="flat")
    h = at.sym.FullyConnected(h, num_hidden=4, name="fc")
    return at.sym.SoftmaxOutput(h, name="softmax"), {"data": (32, 8, 8, 8), "softmax_label": (32,)}, 4


def lstm():
    sym = at.models.rnn(layers=2, hidden=16, steps=6, batch=64, vocab=16)
    shapes = {}
    for n in sym.topo_nodes():
        if n.is_variable and (n.name == "data" or n.name.endswith("label")):
            shapes[n.name] = tuple(int(v) for v in n.attrs["__shape__"].strip("()").split(",") if v.strip())
    return sym, shapes, 16


MODELS = {"mlp": deep_mlp, "cnn": deep_cnn, "lstm": lstm}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("devices", [1, 2])
def test_half_the_memory_gives_the_same_step(name, devices):
    sym, shapes, classes = MODELS[name]()
    plan = at.plan(sym, devices=devices, shapes=shapes)
    need = max(transform(sym, plan).peak_memory(d) for d in range(devices))
    budget = need // 2
    plan.swap_budget = budget
    eg = transform(sym, plan)
    check_memory_plan(eg)
    assert all(eg.peak_memory(d) <= budget for d in range(devices))
    swaps_out = [o for o in eg.ops if o["kind"] == "swap_out"]
    swaps_in = [o for o in eg.ops if o["kind"] == "swap_in"]
    assert swaps_out and len(swaps_out) == len(swaps_in)
    for i, o in enumerate(eg.ops):
        if o["kind"] not in ("swap_out", "swap_in"):
            continue
        src, dst = eg.buffers[o["pieces"][0][0]], eg.buffers[o["outputs"][0]]
        assert src["device"] == dst["device"] == o["device"]
        assert (src["host"], dst["host"]) == ((False, True) if o["kind"] == "swap_out" else (True, False))
        assert i in eg.core.copy_schedule(o["device"])
        if o["kind"] == "swap_in":  # after its swap-out, before every reader of the copy
            assert any(eg.ops[d]["kind"] == "swap_out" for d in o["deps"])
            assert all(eg.ops[r]["time"] > o["time"] for r in dst["readers"])
    vals = values(sym, shapes, classes)
    inputs = {k: vals[k] for k in shapes}
    params = {k: v for k, v in vals.items() if k not in shapes}
    res = at.backend.run(sym, devices=devices, inputs=inputs, params=params, train=True, plan=plan)
    # swapping only copies bytes: bit for bit the step of the same plan without it
    plan.swap_budget = None
    unswapped = at.backend.run(sym, devices=devices, inputs=inputs, params=params, train=True, plan=plan)
    for got, want in zip(res.outputs, unswapped.outputs):
        np.testing.assert_array_equal(got, want)
    for p in unswapped.grads:
        np.testing.assert_array_equal(res.grads[p], unswapped.grads[p])
        np.testing.assert_array_equal(res.params[p], unswapped.params[p])
    # and the single-device step, to float32 accuracy relative to each array's scale
    ref = reference_step(sym, shapes, vals)
    for got, want in zip(res.outputs, ref.outputs):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * max(1.0, np.abs(want).max()))
    for p in ref.grads:
        for a, b in ((res.grads[p], ref.grads[p]), (res.params[p], ref.params[p])):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * max(1.0, np.abs(b).max()), err_msg=p)
    assert sorted(res.aux) == sorted(ref.aux) and sorted(res.states) == sorted(ref.states)
    for kind in ("aux", "states"):
        for n, b in getattr(ref, kind).items():
            np.testing.assert_allclose(getattr(res, kind)[n], b, rtol=1e-4, atol=1e-5 * max(1.0, np.abs(b).max()))


def test_plan_falls_back_to_swapping_when_no_partition_fits():
    sym, shapes, _ = MODELS["lstm"]()
    free = at.plan(sym, devices=2, shapes=shapes)
    need = max(transform(sym, free).peak_memory(d) for d in range(2))
    plan = at.plan(sym, devices=2, shapes=shapes, device_memory=need // 2)
    assert plan.swap_budget == need // 2 and plan.peak_memory <= need // 2
    assert "swapped to host memory" in plan.summary()
    eg = transform(sym, plan)
    assert max(eg.peak_memory(d) for d in range(2)) <= need // 2
    again = at.Plan.from_json(plan.to_json())
    assert again.swap_budget == plan.swap_budget


def test_swap_needs_a_budget():
    sym, shapes, _ = MODELS["mlp"]()
    plan = at.plan(sym, devices=2, shapes=shapes)
    with pytest.raises(at.Error, match="swap=True needs a budget"):
        transform(sym, plan, swap=True)


def test_step_outputs_wait_on_the_host_until_the_end():
    """An LSTM step on one device at half its need: besides activations, some of the step's
    outputs (updated weights, idle from their update to the end of the step) go to the host
    once computed and come back before the step ends (as early as memory allows); their copies
    become the tiles the runtime gathers (test_half_the_memory_gives_the_same_step checks the values)."""
    sym, shapes, _ = MODELS["lstm"]()
    plan = at.plan(sym, devices=1, shapes=shapes)
    need = transform(sym, plan).peak_memory(0)
    plan.swap_budget = need // 2
    eg = transform(sym, plan)
    check_memory_plan(eg)
    back = [o for o in eg.ops if o["kind"] == "swap_in" and not eg.buffers[o["outputs"][0]]["readers"]]
    assert back, "no step output was swapped"
    for o in back:
        b = o["outputs"][0]
        t = eg.buffers[b]["tensor"]
        assert eg.core.tile(t, 0) == b, eg.lowered.tensor_names[t]  # the copy is the tile
        out = next(eg.ops[d] for d in o["deps"] if eg.ops[d]["kind"] == "swap_out")
        src = eg.buffers[out["pieces"][0][0]]
        assert src["producer"] >= 0 and eg.ops[src["producer"]]["time"] < out["time"]  # computed, then out
