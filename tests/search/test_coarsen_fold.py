"""Folding a joint strategy's internal tensors out of the cut problem (csrc/search/coarsen_fold.h).

A synchronous BatchNorm's per-channel tensors (moments, mean, inverse std and their gradients,
the moving statistics) are read and written only by nodes of one joint strategy or by nodes
with a single option, so their best tiling is known per value of that strategy and the fold
takes them out of the DP. The oracle is the same search without the fold
(AUTOTILE_SEARCH_FOLD=off, every tensor a DP variable): every cut must cost what it finds for
that cut after the same earlier cuts, and the DP must visit fewer table entries."""
import pytest

from autotile import _core
from autotile.planner import lowered_training_graph

from .test_coarsen_batchnorm import assert_each_cut_costs_what, bn_net, profile_tables


def _plan(core, devices, fold, monkeypatch, **kw):
    monkeypatch.setenv("AUTOTILE_SEARCH_FOLD", "on" if fold else "off")
    return _core.plan_graph(core, devices, "tofu", None, True, refine=False, **kw)


@pytest.mark.parametrize("model,batch,devices", [
    (bn_net(), 8, 4), (bn_net(), 8, 8), ("resnet-50", 8, 8), ("vgg16_bn", 8, 4), ("rnn-4-1k", 64, 8),
])
def test_each_cut_costs_what_the_unfolded_search_finds(model, batch, devices, monkeypatch):
    core = lowered_training_graph(model, batch=batch)[3].core
    plan = _plan(core, devices, True, monkeypatch)
    assert_each_cut_costs_what(lambda **kw: _plan(core, devices, False, monkeypatch, **kw), plan)
    # the folded tensors' tilings price to the solver's cost (k_cuts checks every cut), and
    # the whole plan costs what the unfolded search's does
    assert plan["total_bytes"] == _plan(core, devices, False, monkeypatch)["total_bytes"]


def _entries(core, devices, fold, monkeypatch, capfd):
    """DP table entries visited per cut."""
    return [e for _, e in profile_tables(lambda: _plan(core, devices, fold, monkeypatch), monkeypatch, capfd)]


def test_the_fold_shrinks_the_dp(monkeypatch, capfd):
    core = lowered_training_graph("resnet-50", batch=8)[3].core
    folded = _entries(core, 8, True, monkeypatch, capfd)
    unfolded = _entries(core, 8, False, monkeypatch, capfd)
    assert len(folded) == len(unfolded) == 3
    for f, u in zip(folded, unfolded):
        assert f < 0.95 * u, (folded, unfolded)


def test_without_a_joint_strategy_nothing_folds(monkeypatch, capfd):
    # node by node (AUTOTILE_SEARCH_JOINT=off) no tensor is decided by one strategy variable
    monkeypatch.setenv("AUTOTILE_SEARCH_JOINT", "off")
    core = lowered_training_graph(bn_net(), batch=8)[3].core
    assert _entries(core, 4, True, monkeypatch, capfd) == _entries(core, 4, False, monkeypatch, capfd)
