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


def host_ready(eg, op_id, host):
    """True when swap-in `op_id` waits, directly or through earlier swap-ins of the same host
    buffer, for the op that wrote `host` (inputs loaded there before the step need none)."""
    writer = eg.buffers[host]["producer"]
    seen, todo = set(), [op_id]
    while todo:
        i = todo.pop()
        for d in eg.ops[i]["deps"]:
            if d == writer:
                return True
            o = eg.ops[d]
            if d not in seen and o["kind"] == "swap_in" and o["pieces"][0][0] == host:
                seen.add(d)
                todo.append(d)
    return writer < 0


def check_swap_ops(eg):
    """The swap ops of `eg` are well formed: each copies one whole buffer between a device's
    arena and its host pool on the device's copy stream; a swap-in reads a host buffer that is
    a graph input loaded there or that it waits to be written, before every reader of its copy;
    a swapped-out buffer comes back or is the tile of a step output (a result that stays)."""
    swaps_in = [i for i, o in enumerate(eg.ops) if o["kind"] == "swap_in"]
    assert swaps_in and any(o["kind"] == "swap_out" for o in eg.ops)
    for i, o in enumerate(eg.ops):
        if o["kind"] not in ("swap_out", "swap_in"):
            continue
        src, dst = eg.buffers[o["pieces"][0][0]], eg.buffers[o["outputs"][0]]
        assert src["device"] == dst["device"] == o["device"] and src["bytes"] == dst["bytes"]
        assert (src["host"], dst["host"]) == ((False, True) if o["kind"] == "swap_out" else (True, False))
        assert i in eg.core.copy_schedule(o["device"])
        if o["kind"] == "swap_in":
            assert host_ready(eg, i, o["pieces"][0][0]), f"swap-in op {i} does not wait for its host copy"
            assert src["producer"] >= 0 or eg.core.tile(src["tensor"], o["device"]) == o["pieces"][0][0]
            assert all(eg.ops[r]["time"] > o["time"] for r in dst["readers"])
        else:
            host = o["outputs"][0]
            assert dst["readers"] or eg.core.tile(dst["tensor"], o["device"]) == host, f"swap-out op {i} is lost"


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
    check_swap_ops(eg)
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


def test_step_outputs_stay_on_the_host():
    """An LSTM step on one device at half its need: besides activations, some of the step's
    outputs (updated weights, idle from their update to the end of the step) go to the host
    once computed and stay there; their host buffers are the tiles the runtime gathers
    (test_half_the_memory_gives_the_same_step checks the values), and nothing brings them back."""
    sym, shapes, _ = MODELS["lstm"]()
    plan = at.plan(sym, devices=1, shapes=shapes)
    need = transform(sym, plan).peak_memory(0)
    plan.swap_budget = need // 2
    eg = transform(sym, plan)
    check_memory_plan(eg)
    stay = [o for o in eg.ops if o["kind"] == "swap_out"
            and eg.core.tile(eg.buffers[o["outputs"][0]]["tensor"], 0) == o["outputs"][0]]
    assert stay, "no step output stayed on the host"
    for o in stay:
        host, src = eg.buffers[o["outputs"][0]], eg.buffers[o["pieces"][0][0]]
        assert src["producer"] >= 0 and eg.ops[src["producer"]]["time"] < o["time"]  # computed, then out
        assert not host["readers"], eg.lowered.tensor_names[host["tensor"]]
        assert all(eg.ops[r]["time"] < o["time"] for r in src["readers"] if r != eg.ops.index(o))


def _swapped_graph(sym, plan):
    eg = transform(sym, plan)
    ops = [(o["kind"], o["time"], o["device"], sorted(o["deps"]), list(o["outputs"]), list(o["inputs"]),
            [list(p) if isinstance(p, (list, tuple)) else p for p in o["pieces"]]) for o in eg.ops]
    bufs = [(b["bytes"], b["offset"], b["host"], b["producer"], sorted(b["readers"])) for b in eg.buffers]
    return ops, bufs


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("algorithm", ["data", "tofu"])
def test_devices_alike_take_the_same_swaps(name, algorithm, monkeypatch):
    """A device whose buffers look as an earlier device's did replays its moves (swap_plan.cc,
    swap_signature): op for op and buffer for buffer the graph every device plans itself."""
    sym, shapes, _ = MODELS[name]()
    plan = at.plan(sym, devices=4, shapes=shapes, algorithm=algorithm)
    plan.swap_budget = max(transform(sym, plan).peak_memory(d) for d in range(4)) // 2
    replayed = _swapped_graph(sym, plan)
    monkeypatch.setenv("AUTOTILE_SWAP_REPLAY", "off")
    planned = _swapped_graph(sym, plan)
    assert sum(op[0] == "swap_in" for op in planned[0]) > 0
    assert replayed == planned
