"""Joint strategies (csrc/search/coarsen.h): a synchronous BatchNorm's ``_bn_moments`` and
``_bn_apply`` carry ``__joint_strategy__`` (ops/sync_batchnorm.py), so they and their backward
nodes search one strategy. The oracle is the search without it (AUTOTILE_SEARCH_JOINT=off,
each node its own strategy, the exact one-cut DP): every cut of the coarsened plan must cost
what that search finds for the same cut after the same earlier cuts (pins), and the coarsened
DP must build narrower tables."""
import re
from collections import defaultdict

import pytest

import autotile as at
from autotile import _core
from autotile.planner import lowered_training_graph

BN_OPS = ("_bn_moments", "_bn_apply", "_backward_bn_apply", "_backward_bn_moments")


def bn_net(batch=8):
    """conv-BN-relu twice, then a fully connected layer with a 2-D BatchNorm (axis 1)."""
    x = at.sym.Variable("data", shape=(batch, 4, 8, 8))
    for i, filters in enumerate((8, 8)):
        x = at.sym.Convolution(x, num_filter=filters, kernel=(3, 3), pad=(1, 1), no_bias=True, name=f"conv{i}")
        x = at.sym.BatchNorm(x, fix_gamma=False, name=f"bn{i}")
        x = at.sym.Activation(x, act_type="relu", name=f"relu{i}")
    x = at.sym.FullyConnected(at.sym.Flatten(x, name="flat"), num_hidden=16, name="fc0")
    x = at.sym.Activation(at.sym.BatchNorm(x, fix_gamma=False, name="bn_fc"), act_type="relu", name="relu_fc")
    x = at.sym.FullyConnected(x, num_hidden=4, name="fc1")
    return at.sym.SoftmaxOutput(x, at.sym.Variable("softmax_label", shape=(batch,)), name="softmax")


def _core_graph(model, batch):
    return lowered_training_graph(model, batch=batch)[3].core


def _plan(core, devices, joint, monkeypatch, **kw):
    monkeypatch.setenv("AUTOTILE_SEARCH_JOINT", "on" if joint else "off")
    return _core.plan_graph(core, devices, "tofu", None, True, refine=False, **kw)


def _bn_members(core):
    """BatchNorm name -> ids of its moments, apply and their backward nodes."""
    out = defaultdict(list)
    for n in range(core.num_nodes):
        node = core.node(n)
        if node["op"] in BN_OPS:
            f = node["forward_node"]
            name = core.node(f)["name"] if f >= 0 else node["name"]
            out[name.removesuffix("_moments")].append(n)
    return out


def test_a_batchnorm_searches_one_strategy(monkeypatch):
    core = _core_graph(bn_net(), 8)
    members = _bn_members(core)
    assert sorted(members) == ["bn0", "bn1", "bn_fc"] and all(len(m) == 4 for m in members.values())
    plan = _plan(core, 8, True, monkeypatch)
    for name, nodes in members.items():
        chosen = {tuple(plan["node_strategies"][n]) for n in nodes}
        assert len(chosen) == 1, f"{name}: its ops chose {chosen}"
    # the batch split (partial statistics, all-reduced) is what the search takes for them here
    assert plan["node_strategies"][members["bn0"][0]][0] == "n"


def assert_each_cut_costs_what(oracle, plan):
    """Every cut of `plan` costs what `oracle(pinned=...)` finds for that cut after the same
    earlier cuts (pinned as `plan` made them; that cut and the later ones free)."""
    cuts = len(plan["factors"])
    for c in range(cuts):
        pins = [[t[i] if i < c else None for i in range(cuts)] for t in plan["tensor_tilings"]]
        assert oracle(pinned=pins)["cut_costs"][c] == plan["cut_costs"][c], f"cut {c + 1} of {cuts}"


@pytest.mark.parametrize("model,batch,devices", [
    (bn_net(), 8, 4), (bn_net(), 8, 8), ("resnet-50", 8, 8), ("vgg16_bn", 8, 4),
])
def test_each_cut_costs_what_the_uncoarsened_search_finds(model, batch, devices, monkeypatch):
    core = _core_graph(model, batch)
    assert_each_cut_costs_what(lambda **kw: _plan(core, devices, False, monkeypatch, **kw),
                               _plan(core, devices, True, monkeypatch))


@pytest.mark.parametrize("model,batch,devices", [(bn_net(), 8, 4), (bn_net(), 8, 8), ("vgg16_bn", 8, 4)])
def test_plan_bytes_equal_the_uncoarsened_search(model, batch, devices, monkeypatch):
    core = _core_graph(model, batch)
    joint, free = _plan(core, devices, True, monkeypatch), _plan(core, devices, False, monkeypatch)
    assert joint["total_bytes"] == free["total_bytes"] and joint["cut_costs"] == free["cut_costs"]


def profile_tables(search, monkeypatch, capfd):
    """(widest table log2, DP entries visited) of each cut of `search()`, from the search profile."""
    monkeypatch.setenv("AUTOTILE_SEARCH_PROFILE", "1")
    capfd.readouterr()
    search()
    err = capfd.readouterr().err
    found = re.findall(r"widest table 2\^([0-9.]+), ([0-9.e+]+) entries visited", err)
    assert found, err[-2000:]
    return [(float(w), float(e)) for w, e in found]


def test_the_joint_strategy_narrows_the_dp_tables(monkeypatch, capfd):
    core = _core_graph("resnet-50", 8)
    joint = profile_tables(lambda: _plan(core, 8, True, monkeypatch), monkeypatch, capfd)
    free = profile_tables(lambda: _plan(core, 8, False, monkeypatch), monkeypatch, capfd)
    assert len(joint) == len(free) == 3
    for (wj, ej), (wf, ef) in zip(joint, free):
        assert wj <= wf - 2, (joint, free)  # at least 4x fewer entries in the widest table
        assert ej <= ef / 2, (joint, free)
