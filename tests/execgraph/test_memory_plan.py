"""The static memory plan, checked by an independent checker: two buffers of one device that
share memory are never live at once (except an op writing its output over an input it is the
last reader of), and whoever writes shared memory runs after every reader of what was there
before (through the ops' dependencies). Also: updates and element-wise ops run in place, and
each layer's backward ops run together in the serial schedule."""
import numpy as np
import pytest

import autotile as at
from autotile.execgraph import transform
from models import MODELS
from random_plans import lowered_training_graph, random_plan


def ancestors(ops):
    """Per op: the set of ops that must finish before it starts (bitmask over op ids)."""
    anc = [0] * len(ops)
    for i in sorted(range(len(ops)), key=lambda i: ops[i]["time"]):
        for d in ops[i]["deps"]:
            anc[i] |= anc[d] | (1 << d)
    return anc


def check_memory_plan(eg):
    """Raises AssertionError on memory two live buffers share or on a write that may race a read."""
    ops, bufs = eg.ops, eg.buffers
    for i, op in enumerate(ops):  # each device runs its ops by (time, id): no dependency on a later op
        assert all((ops[d]["time"], d) < (op["time"], i) for d in op["deps"]), f"op {i} depends on a later op"
    anc = ancestors(ops)
    in_place = 0
    for dev in range(eg.devices):
        # swapped-out copies live in the device's host pool, one slot each (never shared)
        host = sorted((bufs[i]["offset"], bufs[i]["offset"] + bufs[i]["bytes"]) for i, b in enumerate(bufs)
                      if b["device"] == dev and b.get("host"))
        assert all(a[1] <= b[0] for a, b in zip(host, host[1:])), "host pool slots overlap"
        assert not host or host[-1][1] <= eg.core.host_bytes[dev]
        ids = [i for i, b in enumerate(bufs) if b["device"] == dev and not b.get("host")]
        assert all(bufs[i]["offset"] + bufs[i]["bytes"] <= eg.peak_memory(dev) for i in ids)
        ids.sort(key=lambda i: bufs[i]["offset"])
        for x, a in enumerate(ids):
            ba = bufs[a]
            for b in ids[x + 1:]:
                bb = bufs[b]
                if bb["offset"] >= ba["offset"] + ba["bytes"]:
                    break
                if bb["bytes"] == 0 or ba["bytes"] == 0:
                    continue
                first, second = (ba, bb) if ba["live"][0] < bb["live"][0] else (bb, ba)
                fid = a if first is ba else b
                writer = second["producer"]
                shared_end = first["live"][1]
                if shared_end < second["live"][0]:
                    pass  # dead before the second is written
                elif (shared_end == second["live"][0] and writer >= 0 and fid in ops[writer]["inputs"]
                      and first["bytes"] == second["bytes"]):
                    in_place += 1  # the writer reads the buffer it overwrites, as its last reader
                else:
                    raise AssertionError(f"device {dev}: buffers {a} and {b} share memory while both live "
                                         f"({first['live']} and {second['live']})")
                if writer < 0:
                    continue  # graph inputs are written before the step starts
                for r in first["readers"]:
                    assert r == writer or anc[writer] >> r & 1, (
                        f"op {writer} writes memory of buffer {fid} without waiting for its reader op {r}")
                if first["producer"] >= 0 and first["producer"] != writer:
                    assert anc[writer] >> first["producer"] & 1
    return in_place


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("control_deps", [True, False])
def test_memory_plan_is_safe(model, control_deps):
    sym, shapes, _ = MODELS[model]()
    plan = at.plan(sym, devices=4, shapes=shapes)
    check_memory_plan(transform(sym, plan, control_deps=control_deps))


@pytest.mark.parametrize("seed", range(6))
def test_memory_plan_is_safe_for_random_plans(seed):
    rng = np.random.default_rng(seed)
    name = sorted(MODELS)[seed % len(MODELS)]
    sym, shapes, _ = MODELS[name]()
    plan = random_plan(lowered_training_graph(sym, shapes), [2, 2], rng, input_shapes=shapes)
    check_memory_plan(transform(sym, plan, control_deps=bool(seed % 2)))


def test_updates_and_elementwise_ops_run_in_place():
    sym, shapes, _ = MODELS["mlp"]()
    plan = at.plan(sym, devices=2, shapes=shapes, algorithm="data")
    eg = transform(sym, plan)
    low = eg.lowered
    assert check_memory_plan(eg) > 0
    updates = elementwise = 0
    for op in eg.ops:
        if op["kind"] != "compute":
            continue
        kind = low.node_ops[op["node"]]
        out = eg.buffers[op["outputs"][0]]
        same = [j for j in op["inputs"] if j >= 0 and eg.buffers[j]["offset"] == out["offset"]]
        if kind == "sgd_update":
            assert same == [op["inputs"][0]], f"{low.node_names[op['node']]} does not update its weight in place"
            updates += 1
        elif kind == "Activation" and same:
            elementwise += 1
    assert updates == 2 * len(plan.param_names)  # every parameter on both devices
    assert elementwise == 2  # relu1 on both devices overwrites fc1's output, which nothing else reads


def test_each_layer_backward_runs_together():
    # Serial order: the weight gradient of a layer runs before the backward of the layer below,
    # so a layer's saved input and output gradient die as the backward pass goes down.
    sym, shapes, _ = MODELS["cnn"]()
    eg = transform(sym, at.plan(sym, devices=1, shapes=shapes))
    low = eg.lowered
    position = {low.node_names[op["node"]]: op["time"] for op in eg.ops if op["kind"] == "compute"}
    assert position["fc_backward1"] < position["flat_backward0"]
    assert position["conv2_backward1"] < position["pool1_backward0"]
    assert position["conv2_weight_update"] < position["conv1_backward1"]


def test_bad_inplace_attr_is_an_error():
    from autotile import _core

    g = _core.Graph()
    a = g.add_tensor("a", (4,), "float32", False)
    b = g.add_tensor("b", (5,), "float32", False)
    n = g.add_node("pad", "Pad", [a], [b], "", "forward")
    for attr, message in (("0", "pad.*another shape"), ("1", "pad.*is not an input"), ("x", "pad.*indices"),
                          ("0,0", "pad.*2 inputs for 1 outputs")):
        g.set_attr(n, "__inplace__", attr)
        with pytest.raises(at.Error, match=message):
            _core.build_exec_graph(g, [2], [["replicate"], ["replicate"]], [["replicate"]], True)
