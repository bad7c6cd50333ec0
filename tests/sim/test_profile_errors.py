"""Hardware profiles for the time objective: the shipped multi-node profiles and the parser's
errors, each naming the field at fault."""
import copy

import pytest

from autotile import Error
from autotile.sim.hardware import available_profiles, load_profile, profile_from_dict

GOOD = {"name": "t", "devices": None,
        "device": {"peak_flops": 1e12, "mem_bandwidth": 1e11, "memory_bytes": 1e9},
        "levels": [{"name": "nvswitch", "group": 8, "bandwidth": 4e11, "latency": 3e-6},
                   {"name": "infiniband", "group": None, "bandwidth": 4e11, "latency": 5e-6}]}


@pytest.mark.parametrize("name", ["dgx-h100", "dgx-h200", "dgx-a100-multinode"])
def test_multinode_profiles_hold_8_per_node_and_any_node_count(name):
    hw = load_profile(name)
    assert hw.sources and all(isinstance(s, str) and s for s in hw.sources)
    assert [lv.group for lv in hw.levels] == [8, None]
    for k in (8, 16, 64):
        hw.check_fits(k)
    # 16 devices: the first cut separates the two nodes (infiniband), the other three stay inside
    assert hw.cut_levels([2, 2, 2, 2]) == [1, 0, 0, 0]
    assert hw.cut_levels([2] * 6) == [1, 1, 1, 0, 0, 0]
    # a node's 8 GPUs share its uplink: each gets an eighth of it across nodes
    assert hw.device_bandwidth(1, 16) == pytest.approx(hw.levels[1].bandwidth / 8)
    assert hw.device_bandwidth(0, 16) == pytest.approx(hw.levels[0].bandwidth)


def test_h200_differs_from_h100_in_memory_only():
    h100, h200 = load_profile("dgx-h100"), load_profile("dgx-h200")
    assert h200.peak_flops == h100.peak_flops
    assert h200.mem_bandwidth > h100.mem_bandwidth and h200.memory_bytes > h100.memory_bytes


def bad(edit):
    doc = copy.deepcopy(GOOD)
    edit(doc)
    return doc


@pytest.mark.parametrize("edit, field", [
    (lambda d: d["device"].pop("peak_flops"), "device.peak_flops"),
    (lambda d: d["device"].update(mem_bandwidth=0), "device.mem_bandwidth"),
    (lambda d: d["device"].update(memory_bytes=-1), "device.memory_bytes"),
    (lambda d: d["device"].update(launch_overhead_s=-1e-6), "device.launch_overhead_s"),
    (lambda d: d["device"].update(local_copy_bandwidth=0), "device.local_copy_bandwidth"),
    (lambda d: d.update(efficiency={"Convolution": 0}), "efficiency.Convolution"),
    (lambda d: d["levels"][1].pop("bandwidth"), "levels[1].bandwidth"),
    (lambda d: d["levels"][0].update(bandwidth=0), "levels[0].bandwidth"),
    (lambda d: d["levels"][0].update(bandwidth="fast"), "levels[0].bandwidth"),
    (lambda d: d["levels"][1].update(latency=-1), "levels[1].latency"),
    (lambda d: d["levels"][0].update(group=0), "levels[0].group"),
    (lambda d: d["levels"][0].update(speed=1), "levels[0].speed"),
    (lambda d: d["levels"][0].update(group=None), "levels[0].group"),
    (lambda d: d.update(levels=[]), "levels"),
    (lambda d: d.update(devices=0), "devices"),
    (lambda d: d.pop("device"), "'device'"),
])
def test_bad_profile_names_the_field(edit, field):
    with pytest.raises(Error) as e:
        profile_from_dict(bad(edit))
    assert field in str(e.value)


def test_level_count_that_does_not_fit_the_devices():
    fixed = profile_from_dict(bad(lambda d: d["levels"][1].update(group=2)))  # 2 nodes of 8 at most
    fixed.check_fits(16)
    with pytest.raises(Error, match=r"levels\[1\]\.group"):
        fixed.check_fits(32)
    with pytest.raises(Error, match="devices is 8"):
        load_profile("dgx-a100").check_fits(16)
    with pytest.raises(Error, match=r"levels group 8 devices, the profile says 16"):
        profile_from_dict(bad(lambda d: (d["levels"].pop(), d.update(devices=16))))


def test_unknown_profile_lists_the_shipped_ones():
    with pytest.raises(Error) as e:
        load_profile("dgx-b900")
    for name in ("dgx-h100", "dgx-h200", "dgx-a100"):
        assert name in str(e.value) and name in available_profiles()
