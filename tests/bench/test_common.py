"""autotile.bench.common: plans are weighed by the simulated machine's link bandwidths."""
import autotile as at
from autotile.bench import common
from autotile.sim import load_profile


def test_planning_bandwidths_follow_the_profile_levels():
    ib = load_profile("2x8-ib")  # 100 Gb/s between the nodes, NVLink inside
    ratios = common.planning_bandwidths(ib, 16)
    bw = ib.cut_bandwidths(at._core.factorize(16))
    assert ratios == tuple(b / bw[0] for b in bw) and ratios[0] == 1.0 and min(ratios[1:]) > 1.0
    assert common.planning_bandwidths(load_profile("dgx-a100"), 8) is None  # one switch: all equal
    assert common.planning_bandwidths(load_profile("dgx-a100"), 64) is None  # more devices than it has


def test_simulate_config_plans_once_per_bandwidth_set():
    sym = at.models.mlp(64, layers=2, hidden=256)
    profiles = [load_profile("dgx-a100"), load_profile("p2.8xlarge"), load_profile("2x8-ib")]
    r = common.simulate_config(sym, 8, "tofu", profiles)  # 8 devices: one node, equal links
    assert r["ok"] and set(r["sims"]) == {"dgx-a100", "p2.8xlarge", "2x8-ib"}
    plain = at.plan(sym, devices=8, algorithm="tofu")
    assert all(s["plan"]["comm_bytes"] == plain.comm_bytes and s["plan"]["bandwidths"] is None
               for s in r["sims"].values())
    r = common.simulate_config(sym, 16, "tofu", [profiles[2]])  # across the nodes
    weighted = at.plan(sym, devices=16, algorithm="tofu", bandwidths=list(common.planning_bandwidths(profiles[2], 16)))
    assert r["ok"] and r["comm_bytes"] == weighted.comm_bytes
    assert r["sims"]["2x8-ib"]["plan"]["bandwidths"] == weighted.bandwidths == [1.0, 24.0, 24.0, 24.0]
