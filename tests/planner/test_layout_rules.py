"""Named meshes and layout rules (planner/layout_rules.py, csrc/search/pins.cc).

Oracles: the exhaustive search (bruteforce) under the same pins must find the same cost as
the DP on graphs small enough to enumerate; a pinned plan executed on k virtual devices must
equal the single-device step; a rule's tensors must carry exactly the tilings the rule
implies, derived here by hand from the mesh."""
import importlib.util
import os

import numpy as np
import pytest

import autotile as at
from autotile import _core
from autotile.planner import layout_rules, lowered_training_graph

_spec = importlib.util.spec_from_file_location(
    "execgraph_models", os.path.join(os.path.dirname(__file__), "..", "execgraph", "models.py"))
models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(models)  # the execution tests' small models and single-device oracle


def small_net():
    """One layer and a loss: small enough for the exhaustive search to enumerate."""
    x = at.sym.Variable("data")
    h = at.sym.FullyConnected(x, num_hidden=4, no_bias=True, name="fc1")
    h = at.sym.Activation(h, act_type="relu", name="relu1")
    return at.sym.LinearRegressionOutput(h, name="lro"), {"data": (8, 6), "lro_label": (8, 4)}


def test_mesh_cuts_follow_axis_order():
    assert layout_rules.mesh_cuts({"batch": 4, "model": 8}) == ([2, 2, 2, 2, 2], ["batch"] * 2 + ["model"] * 3)
    assert layout_rules.mesh_cuts({"a": 2, "b": 3}) == ([2, 3], ["a", "b"])
    assert layout_rules.mesh_cuts({"x": 12}) == ([3, 2, 2], ["x"] * 3)
    assert layout_rules.check_mesh("batch=2, model=4") == {"batch": 2, "model": 4}


def test_rules_fix_exactly_the_tilings_they_imply():
    sym, shapes, _ = models.mlp()
    p = at.plan(sym, mesh={"batch": 2, "model": 4}, shapes=shapes,
                layout={"fc*_weight": {0: "model"}, "data": {0: "batch"}})
    assert p.factors == [2, 2, 2] and p.cut_axes == ["batch", "model", "model"]
    # cut 1 is the batch axis, cuts 2-3 the model axis: split where the rule maps, else replicate
    assert p.tensor_tilings["fc1_weight"] == ["replicate", "split(0)", "split(0)"]
    assert p.tensor_tilings["fc2_weight"] == ["replicate", "split(0)", "split(0)"]
    assert p.tensor_tilings["data"] == ["split(0)", "replicate", "replicate"]
    assert layout_rules.tensor_axes(p.tensor_tilings["fc1_weight"], p.cut_axes) == {0: ["model"]}


def test_first_matching_rule_wins():
    sym, shapes, _ = models.mlp()
    p = at.plan(sym, devices=4, shapes=shapes, layout={"fc1_weight": {1: "devices"}, "fc*_weight": {0: "devices"}})
    assert p.tensor_tilings["fc1_weight"] == ["split(1)", "split(1)"]
    assert p.tensor_tilings["fc2_weight"] == ["split(0)", "split(0)"]


@pytest.mark.parametrize("layout", [
    {"fc1_weight": {0: "d"}},
    {"fc1_weight": {1: "d"}, "data": {1: "d"}},
    {"*_weight": {}, "data": {0: "d"}},
    {"relu1_output": {1: "d"}},
])
def test_dp_equals_bruteforce_under_pins(layout):
    sym, shapes = small_net()
    *_, lowered = lowered_training_graph(sym, shapes)
    factors, axes = layout_rules.mesh_cuts({"d": 2})
    pins, _ = layout_rules.pin_table(layout, lowered.tensor_names, lowered.tensor_shapes, {"d": 2}, axes)
    dp = _core.plan_graph(lowered.core, 2, "tofu", factors=factors, pinned=pins)
    bf = _core.plan_graph(lowered.core, 2, "bruteforce", factors=factors, pinned=pins)
    assert dp["total_bytes"] == pytest.approx(bf["total_bytes"])
    free = _core.plan_graph(lowered.core, 2, "tofu")
    assert dp["total_bytes"] >= free["total_bytes"] - 1e-6  # a constraint never makes it cheaper
    for i, row in enumerate(pins):
        if row is not None:
            assert dp["tensor_tilings"][i] == row, lowered.tensor_names[i]


@pytest.mark.parametrize("name", ["mlp", "cnn", "residual"])
@pytest.mark.parametrize("mesh", [{"batch": 2, "model": 2}, {"batch": 2, "model": 4}])
def test_pinned_plan_runs_like_one_device(name, mesh):
    sym, shapes, classes = models.MODELS[name]()
    layout = {"data": {0: "batch"}, "*fc*_weight": {0: "model"}}
    if name == "cnn":
        layout["conv*_weight"] = {0: "model"}
    plan = at.plan(sym, mesh=mesh, shapes=shapes, layout=layout)
    vals = models.values(sym, shapes, classes)
    ref = models.reference_step(sym, shapes, vals)
    devices = plan.devices
    res = at.backend.run(sym, devices=devices, inputs={k: vals[k] for k in shapes},
                         params={k: v for k, v in vals.items() if k not in shapes}, train=True, plan=plan)
    models.assert_same_step(res, ref, f"{name} {mesh}")


def test_full_layout_is_priced_like_a_search_with_nothing_left():
    """Mesh-TF's mode: every tensor fixed. Pinning every tensor to the free plan's own tilings
    must reproduce that plan's cost exactly (nothing is left to choose)."""
    sym, shapes, _ = models.mlp()
    free = at.plan(sym, devices=4, shapes=shapes)
    layout = {}
    for name, tilings in free.tensor_tilings.items():
        if all(t.startswith("split(") for t in tilings) and len({t for t in tilings}) == 1:
            layout[name] = {int(tilings[0][6:-1]): "devices"}
        elif all(t == "replicate" for t in tilings):
            layout[name] = {}
    fixed = at.plan(sym, devices=4, shapes=shapes, layout=layout)
    assert fixed.comm_bytes == pytest.approx(free.comm_bytes)


@pytest.mark.parametrize("layout, needle", [
    ({"nothing_*": {0: "model"}}, "rule 'nothing_*' matches no tensor"),
    ({"fc1_weight": {0: "model", 1: "model"}}, "mesh axis 'model' is used for two dimensions"),
    ({"fc1_weight": {3: "model"}}, "tensor 'fc1_weight' of shape (16, 12) has no dimension 3"),
    ({"fc1_weight": {0: "rows"}}, "mesh axis 'rows' does not exist"),
    ({"fc1_weight": {1: "batch"}}, "dimension 1 of tensor 'fc1_weight' (size 12) does not divide over mesh axis 'batch'"),
    ({"fc1_weight": ["model"]}, "layout rule 'fc1_weight': expected {dim: mesh axis}"),
    ([("batch", "rows")], "no tensor declares the dimension name(s) 'batch'"),
    ([("batch", "rows", 3)], "Mesh-TF rules are (dimension name, mesh axis) pairs"),
])
def test_bad_rules_name_the_rule_and_tensor(layout, needle):
    sym, shapes, _ = models.mlp()
    with pytest.raises(at.Error) as e:
        at.plan(sym, mesh={"batch": 8, "model": 2}, shapes=shapes, layout=layout)
    assert needle in str(e.value)


@pytest.mark.parametrize("mesh, needle", [
    ({"batch": 0}, "axis 'batch' must have a positive integer size"),
    ("batch4", "expected 'axis=size'"),
    ({}, "mesh must be a non-empty dict"),
])
def test_bad_mesh_is_named(mesh, needle):
    sym, shapes, _ = models.mlp()
    with pytest.raises(at.Error) as e:
        at.plan(sym, mesh=mesh, shapes=shapes)
    assert needle in str(e.value)


def test_mesh_and_devices_must_agree():
    sym, shapes, _ = models.mlp()
    with pytest.raises(at.Error, match="the mesh .* has 8 devices"):
        at.plan(sym, devices=4, mesh={"a": 2, "b": 4}, shapes=shapes)


def test_layer_wise_baselines_refuse_a_layout():
    sym, shapes, _ = models.mlp()
    with pytest.raises(at.Error, match="plans its own layout"):
        at.plan(sym, devices=4, shapes=shapes, algorithm="owt", layout={"fc1_weight": {0: "devices"}})
    assert np.isfinite(at.plan(sym, devices=4, shapes=shapes, algorithm="data",
                               layout={"data": {0: "devices"}}).comm_bytes)


def test_bandwidths_by_mesh_axis_weight_each_cut_by_its_axis():
    sym, shapes, _ = models.mlp()
    bw = {"batch": 12.5e9, "model": 300e9}
    p = at.plan(sym, mesh={"batch": 2, "model": 4}, shapes=shapes, bandwidths=bw)
    want = sum(c / bw[a] for c, a in zip(p.cut_costs, p.cut_axes))
    assert p.weighted_cost == pytest.approx(want)
    with pytest.raises(at.Error, match="missing: model"):
        at.plan(sym, mesh={"batch": 2, "model": 4}, shapes=shapes, bandwidths={"batch": 1e9})
    with pytest.raises(at.Error, match="need mesh="):
        at.plan(sym, devices=8, shapes=shapes, bandwidths=bw)


def named_mlp():
    """A two-layer MLP whose variables declare Mesh-TF dimension names."""
    B, D, F = 8, 6, 12
    x = at.sym.Variable("data", dims=("batch", "d_model"))
    w1 = at.sym.Variable("fc1_weight", dims=("d_ff", "d_model"))
    w2 = at.sym.Variable("fc2_weight", dims=("d_model", "d_ff"))
    h = at.sym.FullyConnected(x, weight=w1, num_hidden=F, no_bias=True, name="fc1")
    h = at.sym.Activation(h, act_type="relu", name="relu1")
    h = at.sym.FullyConnected(h, weight=w2, num_hidden=D, no_bias=True, name="fc2")
    return at.sym.LinearRegressionOutput(h, name="lro"), {"data": (B, D), "lro_label": (B, D)}


def test_mesh_tf_named_dimension_rules_run_like_one_device():
    sym, shapes = named_mlp()
    rules = [("batch", "rows"), ("d_ff", "cols")]
    plan = at.plan(sym, mesh={"rows": 2, "cols": 2}, shapes=shapes, layout=rules)
    assert plan.tensor_tilings["data"] == ["split(0)", "replicate"]
    assert plan.tensor_tilings["fc1_weight"] == ["replicate", "split(0)"]
    assert plan.tensor_tilings["fc2_weight"] == ["replicate", "split(1)"]
    free = at.plan(sym, devices=4, shapes=shapes)
    assert plan.comm_bytes >= free.comm_bytes - 1e-6
    rng = np.random.default_rng(0)
    vals = {"data": rng.standard_normal((8, 6)).astype(np.float32),
            "lro_label": rng.standard_normal((8, 6)).astype(np.float32),
            "fc1_weight": rng.standard_normal((12, 6)).astype(np.float32) * 0.3,
            "fc2_weight": rng.standard_normal((6, 12)).astype(np.float32) * 0.3}
    ref = models.reference_step(sym, shapes, vals)
    res = at.backend.run(sym, devices=4, inputs={k: vals[k] for k in shapes},
                         params={k: v for k, v in vals.items() if k not in shapes}, train=True, plan=plan)
    models.assert_same_step(res, ref, "named dims")


def test_named_dimension_mapped_twice_is_named():
    sym, shapes = named_mlp()
    with pytest.raises(at.Error, match="dimension name 'd_ff' is mapped to two mesh axes"):
        at.plan(sym, mesh={"rows": 2, "cols": 2}, shapes=shapes, layout=[("d_ff", "rows"), ("d_ff", "cols")])
    with pytest.raises(at.Error, match="mesh axis 'cols' is used for two dimensions"):
        at.plan(sym, mesh={"rows": 2, "cols": 2}, shapes=shapes, layout=[("d_ff", "cols"), ("d_model", "cols")])
