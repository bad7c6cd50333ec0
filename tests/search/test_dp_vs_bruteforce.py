"""The one-cut DP is exact: on every cut of small graphs it matches exhaustive enumeration
of the same cut problem (same prefix), and the bruteforce algorithm end to end."""
import random

import pytest

from autotile import _core

from .graphs import conv_net, mlp, residual

GRAPHS = {
    "mlp": lambda: mlp(2, 8, 8),
    "mlp_relu": lambda: mlp(2, 8, 8, relu=True),
    "conv_halo": lambda: conv_net(4, 4, 8),
    "residual": lambda: residual(8, 8),
}


@pytest.mark.parametrize("devices", [2, 4])
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_every_cut_matches_bruteforce(name, devices):
    b = GRAPHS[name]()
    checks = _core._check_cuts_against_bruteforce(b.g, devices, strategy_provider=b.mock, bruteforce_limit=10**7)
    assert len(checks) == len(_core.factorize(devices))
    for dp, bf in checks:
        assert dp == pytest.approx(bf, rel=1e-12, abs=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_random_mlps_match_bruteforce(seed):
    rng = random.Random(seed)
    b = mlp(2, rng.choice([4, 8, 16]), rng.choice([4, 8, 12]), in_units=rng.choice([4, 8, 16]))
    for devices in (2, 4):
        for dp, bf in _core._check_cuts_against_bruteforce(b.g, devices, strategy_provider=b.mock):
            assert dp == pytest.approx(bf)


def test_bruteforce_algorithm_equals_dp_on_one_cut():
    b = conv_net(4, 4, 8)
    dp = _core.plan_graph(b.g, 2, "tofu", strategy_provider=b.mock)
    bf = _core.plan_graph(b.g, 2, "bruteforce", strategy_provider=b.mock)
    assert bf["algorithm"] == "bruteforce"
    assert dp["total_bytes"] == pytest.approx(bf["total_bytes"])


def test_real_tdl_analysis_gives_the_same_costs_as_the_mock():
    # The mock is an independent region analysis of the same descriptions (no kx split at k=2).
    for b in (mlp(2, 8, 8, relu=True), conv_net(4, 4, 8), residual(8, 8)):
        for devices in (2, 4):
            real = _core.plan_graph(b.g, devices, "tofu")
            mock = _core.plan_graph(b.g, devices, "tofu", strategy_provider=b.mock)
            assert real["cut_costs"] == pytest.approx(mock["cut_costs"])


def test_plan_is_priced_back_to_its_own_cost():
    b = residual(8, 8)
    plan = _core.plan_graph(b.g, 4, "tofu", strategy_provider=b.mock)
    priced = _core.price_plan(b.g, 4, plan["tensor_tilings"], plan["node_strategies"], strategy_provider=b.mock)
    assert priced["cut_costs"] == pytest.approx(plan["cut_costs"])
