"""Mesh-TF layout rules a plan exports come back as the same layouts (issue 23): through JSON
(dimensions become string keys), through the CLI's --mesh-tf / --layout-file, and a rule that
cannot split a dimension whole (inside a head) is refused, naming the rule."""
import json

import pytest

import autotile as at
from autotile import cli
from autotile.planner.layout_rules import mesh_cuts, tensor_axes

MESH = {"batch": 2, "model": 4}
SHAPES = {"data": (64, 784), "softmax_label": (64,)}


def _readme_mlp():
    data = at.sym.Variable("data")
    fc1 = at.sym.FullyConnected(data, num_hidden=512, name="fc1")
    act = at.sym.Activation(fc1, act_type="relu", name="relu1")
    fc2 = at.sym.FullyConnected(act, num_hidden=16, name="fc2")
    return at.sym.SoftmaxOutput(fc2, name="softmax")


def _assert_laid_out(plan, rules):
    """Every tensor the rules name has, in `plan`, the split each rule gives (Mesh-TF's
    semantics: the named dimensions over their axes, replicated over the rest)."""
    _, axes = mesh_cuts(rules["mesh"])
    assert rules["layout"], "the rules must name some tensor"
    for name, dims in rules["layout"].items():
        want = {int(d): [a] for d, a in dims.items()}
        assert tensor_axes(plan.tensor_tilings[name], axes) == want, f"{name}: {plan.tensor_tilings[name]}"


def test_to_mesh_tf_survives_json_and_reproduces_the_layouts():
    plan = at.plan(_readme_mlp(), mesh=MESH, shapes=SHAPES, layout={"fc1_weight": {0: "model"}, "data": {0: "batch"}})
    rules = json.loads(json.dumps(plan.to_mesh_tf()))
    assert rules["layout"]["fc1_weight"] == {"0": "model"}
    again = at.plan(_readme_mlp(), mesh=rules["mesh"], shapes=SHAPES, layout=rules["layout"])
    _assert_laid_out(again, rules)
    for name in rules["layout"]:
        assert again.tensor_tilings[name] == plan.tensor_tilings[name]


def test_json_dimension_keys_are_checked():
    sym = _readme_mlp()
    with pytest.raises(at.Error, match="layout rule 'fc1_weight': dimension 0 is given twice"):
        at.plan(sym, mesh=MESH, shapes=SHAPES, layout={"fc1_weight": {0: "model", "0": "batch"}})
    with pytest.raises(at.Error, match="layout rule 'fc1_weight': dimensions must be integers, got 'rows'"):
        at.plan(sym, mesh=MESH, shapes=SHAPES, layout={"fc1_weight": {"rows": "model"}})


def test_cli_reads_back_what_mesh_tf_writes(tmp_path, capsys):
    rules_file, plan_file = tmp_path / "rules.json", tmp_path / "plan.json"
    assert cli.main(["plan", "mlp", "--batch", "16", "--mesh", "batch=2,model=4", "--layout", "fc*_weight:0=model",
                     "--no-compare", "--mesh-tf", str(rules_file)]) == 0
    assert cli.main(["plan", "mlp", "--batch", "16", "--layout-file", str(rules_file), "--no-compare",
                     "--json", str(plan_file)]) == 0
    rules = json.loads(rules_file.read_text())
    again = at.Plan.from_json(plan_file.read_text())
    assert again.mesh == rules["mesh"]
    _assert_laid_out(again, rules)
    capsys.readouterr()
    bad = tmp_path / "bad.json"
    bad.write_text('{"mesh": {"batch": 2}}')
    assert cli.main(["plan", "mlp", "--layout-file", str(bad), "--no-compare"]) != 0
    assert "expected an object with 'mesh' and 'layout'" in capsys.readouterr().err


TINY = dict(batch=8, layers=1, d_model=16, d_ff=32, seq=4, vocab=24)


@pytest.mark.parametrize("heads, cols", [(4, 8), (2, 4)])
def test_a_rule_splitting_inside_a_head_is_refused(heads, cols):
    # heads x d_k = 16 divides over cols, the head count does not: each device would hold part of a head
    sym = at.models.get("transformer", heads=heads, **TINY)
    with pytest.raises(at.Error, match=r"layout rule \('heads', 'cols'\): dimension 0 of 'layer0_attn_q_weight' "
                                       rf"\({heads} heads\) does not split whole over mesh axis 'cols' of size {cols}"):
        at.plan(sym, mesh={"cols": cols}, layout=[("heads", "cols")])


def test_a_rule_over_whole_heads_or_a_dimension_that_does_not_divide():
    sym = at.models.get("transformer", heads=4, **TINY)
    plan = at.plan(sym, mesh={"rows": 2, "cols": 4}, layout=[("batch", "rows"), ("heads", "cols")])
    _, axes = mesh_cuts(plan.mesh)
    assert tensor_axes(plan.tensor_tilings["layer0_attn_q_weight"], axes) == {0: ["cols"]}
    # vocab 24 over 16 devices: not a whole number of rows each
    with pytest.raises(at.Error, match=r"layout rule \('vocab', 'cols'\): dimension 0 of 'embed_weight' \(size 24\)"):
        at.plan(sym, mesh={"cols": 16}, layout=[("vocab", "cols")])
