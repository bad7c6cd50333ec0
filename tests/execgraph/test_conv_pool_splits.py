"""Convolutions (grouped, depthwise, strided, dilated, padded) and pooling (max, avg, sum,
global) split along every variable their TDL offers, forward and backward: the k-device
training step equals the 1-device step in float64.

Plans are random (tests/execgraph/random_plans.py) except that every convolution and
pooling node (forward and backward) is forced onto each of its splittable variables in
turn, so each (node, variable) pair runs split in some plan; the test asserts it did."""
import numpy as np
import pytest

import autotile as at
from autotile.backend.multi_device import run_multi_device
from random_plans import _vars, lowered_training_graph, random_plan

POOL_CONV_OPS = ("Convolution", "_backward_Convolution_data", "_backward_Convolution_weight",
                 "_backward_Convolution_bias", "Pooling", "_backward_Pooling")


def _head(h, classes=4):
    h = at.sym.FullyConnected(at.sym.Flatten(h), num_hidden=classes, name="fc")
    return at.sym.SoftmaxOutput(h, name="softmax")


def depthwise_net():
    """conv -> depthwise conv (stride 2) -> FC: the depthwise-separable block."""
    x = at.sym.Variable("data")
    h = at.sym.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=12, name="conv")
    h = at.sym.Activation(h, act_type="tanh", name="act")
    h = at.sym.Convolution(h, kernel=(3, 3), stride=(2, 2), pad=(1, 1), num_filter=12, num_group=12, name="dw")
    return _head(h), {"data": (6, 3, 12, 12), "softmax_label": (6,)}


def gap_net():
    """strided depthwise conv -> global average pool -> FC (issue 22's silent k x gradient)."""
    x = at.sym.Variable("data")
    h = at.sym.Convolution(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), num_filter=6, num_group=6, name="dw")
    h = at.sym.Pooling(h, global_pool=True, pool_type="avg", kernel=(1, 1), name="gap")
    return _head(h), {"data": (6, 6, 24, 24), "softmax_label": (6,)}


def avgpool_net():
    """conv -> 4x4/4 average pool -> 3x3 average pool over the whole 3x3 map (a window larger
    than any slab of it) -> FC."""
    x = at.sym.Variable("data")
    h = at.sym.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=6, name="conv")
    h = at.sym.Pooling(h, kernel=(4, 4), stride=(4, 4), pool_type="avg", name="pool")
    h = at.sym.Pooling(h, kernel=(3, 3), pool_type="avg", name="pool2")
    return _head(h), {"data": (6, 2, 12, 12), "softmax_label": (6,)}


def se_net():
    """RegNet's Y-block in small: stem conv, grouped stride-2 conv (group 6), global average
    pool, squeeze-excitation (FC-relu-FC-sigmoid) multiplied back, FC."""
    x = at.sym.Variable("data")
    h = at.sym.Convolution(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), num_filter=12, name="stem")
    h = at.sym.Activation(h, act_type="relu", name="stem_relu")
    h = at.sym.Convolution(h, kernel=(3, 3), stride=(2, 2), pad=(1, 1), num_filter=12, num_group=6, name="gconv")
    h = at.sym.Activation(h, act_type="relu", name="gconv_relu")
    s = at.sym.Pooling(h, global_pool=True, pool_type="avg", kernel=(1, 1), name="se_pool")
    s = at.sym.Convolution(s, kernel=(1, 1), num_filter=3, name="se_fc1")
    s = at.sym.Activation(s, act_type="relu", name="se_relu")
    s = at.sym.Convolution(s, kernel=(1, 1), num_filter=12, name="se_fc2")
    s = at.sym.Activation(s, act_type="sigmoid", name="se_gate")
    h = at.sym.broadcast_mul(h, s, name="se_mul")
    return _head(h), {"data": (6, 3, 48, 48), "softmax_label": (6,)}


def mixed_net():
    """Dilated padded conv, overlapping 3x3/2 max pool, grouped conv (group 2), 'full' avg
    pool without padding in its divisor, 1x1 conv and sum pooling."""
    x = at.sym.Variable("data")
    h = at.sym.Convolution(x, kernel=(3, 3), pad=(2, 2), dilate=(2, 2), num_filter=4, name="dil")
    h = at.sym.Pooling(h, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max", name="maxp")
    h = at.sym.Convolution(h, kernel=(3, 3), pad=(1, 1), num_filter=4, num_group=2, name="grp")
    h = at.sym.Pooling(h, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg", pooling_convention="full",
                       count_include_pad=False, name="avgp")
    h = at.sym.Convolution(h, kernel=(1, 1), num_filter=6, name="pw")
    h = at.sym.Pooling(h, kernel=(2, 2), stride=(1, 1), pool_type="sum", name="sump")
    return _head(h), {"data": (6, 2, 12, 12), "softmax_label": (6,)}


def convnext_net():
    """ConvNeXt's block in small: 4x4/4 patchify conv, 7x7 depthwise conv (pad 3) over a 4x4
    map (the window is wider than any tile of it), 1x1 expand and project, global average pool."""
    x = at.sym.Variable("data")
    h = at.sym.Convolution(x, kernel=(4, 4), stride=(4, 4), num_filter=8, name="patchify")
    h = at.sym.Convolution(h, kernel=(7, 7), pad=(3, 3), num_filter=8, num_group=8, name="dw7")
    h = at.sym.Convolution(h, kernel=(1, 1), num_filter=16, name="pw1")
    h = at.sym.Activation(h, act_type="tanh", name="act")
    h = at.sym.Convolution(h, kernel=(1, 1), num_filter=8, name="pw2")
    h = at.sym.Pooling(h, global_pool=True, pool_type="avg", kernel=(1, 1), name="gap")
    return _head(h), {"data": (6, 3, 16, 16), "softmax_label": (6,)}


MODELS = {"convnext": convnext_net, "depthwise": depthwise_net, "gap": gap_net, "avgpool": avgpool_net, "se": se_net, "mixed": mixed_net}


def float64_values(sym, shapes, seed=0):
    rng = np.random.default_rng(seed)
    arg_shapes, _, _ = sym.infer_shape(**shapes)
    vals = {}
    for name, shape in zip(sym.list_arguments(), arg_shapes):
        if name.endswith("label"):
            vals[name] = rng.integers(0, 4, size=shape).astype(np.float64)
        else:
            vals[name] = rng.standard_normal(shape) * 0.5
    return vals


def reference(sym, shapes, vals):
    return at.backend.run(sym, inputs={k: vals[k] for k in shapes},
                          params={k: v for k, v in vals.items() if k not in shapes}, train=True)


def assert_same_step_float64(res, ref, what):
    """Outputs, gradients and updated params equal, name for name, to float64 rounding."""
    assert len(res.outputs) == len(ref.outputs), what
    for got, want in zip(res.outputs, ref.outputs):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-13, err_msg=f"{what}: output")
    for kind in ("grads", "params"):
        got, want = getattr(res, kind), getattr(ref, kind)
        assert sorted(got) == sorted(want), f"{what}: {kind} {sorted(got)}, expected {sorted(want)}"
        for name in want:
            atol = 1e-12 * max(1.0, float(np.max(np.abs(want[name]), initial=0.0)))
            np.testing.assert_allclose(got[name], want[name], rtol=1e-9, atol=atol, err_msg=f"{what}: {kind} {name}")


def forced_plans(low, factors, rng, shapes):
    """Random plans in which every conv/pool node runs, in turn, each variable it can be
    split along at this device count. Yields (plan, {node: variable forced})."""
    g = low.core
    choices = {}
    for nid, name in enumerate(low.node_names):
        node = g.node(nid)
        if node["op"] not in POOL_CONV_OPS:
            continue
        ins = [low.tensor_shapes[t] for t in node["inputs"]]
        outs = [low.tensor_shapes[t] for t in node["outputs"]]
        vetoed = set(node["attrs"].get("__no_split__", "").split(","))
        total = int(np.prod(factors))
        options = [v for v in _vars(node["tdl"], ins, outs, total, {}) if v not in vetoed and v != "replicate"]
        if options:
            choices[name] = options
    for i in range(max(len(v) for v in choices.values())):
        plan = random_plan(low, factors, rng, input_shapes=shapes)
        forced = {}
        for name, options in choices.items():
            var = options[(i + rng.integers(len(options))) % len(options)] if i >= len(options) else options[i]
            plan.node_strategies[name] = [var] * len(factors)
            forced[name] = var
        yield plan, forced, choices


@pytest.mark.parametrize("factors", [[2], [3], [4], [2, 2]])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_every_conv_and_pool_split_matches_one_device(model, factors):
    sym, shapes = MODELS[model]()
    vals = float64_values(sym, shapes)
    ref = reference(sym, shapes, vals)
    low = lowered_training_graph(sym, shapes)
    rng = np.random.default_rng(len(model) + 10 * sum(factors))
    covered, wanted = set(), set()
    for plan, forced, choices in forced_plans(low, factors, rng, shapes):
        wanted = {(n, v) for n, vs in choices.items() for v in vs}
        res = run_multi_device(sym, plan.devices, vals, plan=plan)
        assert_same_step_float64(res, ref, f"{model} on {factors} with {forced}")
        covered |= set(forced.items())
    assert covered == wanted
    # spatial splits of pooling's backward (where the k x gradient hid) are among them
    pool_bwd = {v for n, v in covered if n.endswith("_backward0") and n.split("_backward")[0] in
                ("gap", "pool", "pool2", "se_pool", "maxp", "avgp", "sump")}
    if model in ("gap", "avgpool", "se", "mixed") or (model == "convnext" and factors != [3]):
        assert {"iy", "ix"} <= pool_bwd, pool_bwd


def test_depthwise_conv_trains_on_4_devices_as_on_1():
    """conv -> depthwise Conv(64 channels, group 64) -> FC, batch 2, the searched 4-device plan
    (its data gradient used to keep all 64 groups on a 16-channel tile and fail)."""
    x = at.sym.Variable("data")
    h = at.sym.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=64, name="conv")
    h = at.sym.Convolution(h, kernel=(3, 3), pad=(1, 1), num_filter=64, num_group=64, name="dw")
    sym, shapes = _head(h), {"data": (2, 3, 6, 6), "softmax_label": (2,)}
    vals = float64_values(sym, shapes)
    inputs = {k: vals[k] for k in shapes}
    params = {k: v for k, v in vals.items() if k not in shapes}
    ref = at.backend.run(sym, inputs=inputs, params=params, train=True)
    res = at.backend.run(sym, devices=4, inputs=inputs, params=params, train=True)
    assert_same_step_float64(res, ref, "depthwise on 4 devices")


@pytest.mark.parametrize("k", [2, 4])
def test_layout_splitting_pooled_height_keeps_the_gradient(k):
    """A user layout that splits the pooled activation's height (Mesh-TensorFlow rules):
    global average pooling's gradient used to come out k times too large."""
    sym, shapes = gap_net()
    vals = float64_values(sym, shapes)
    plan = at.plan(sym, mesh={"m": k}, layout={"dw_output": {2: "m"}, "data": {2: "m"}}, shapes=shapes)
    assert set(plan.tiling("dw_output").split()) == {"split(2)"}
    assert set(plan.node_strategies["gap_backward0"]) == {"iy"}
    res = run_multi_device(sym, k, vals, plan=plan)
    assert_same_step_float64(res, reference(sym, shapes, vals), f"gap under a height layout on {k}")
