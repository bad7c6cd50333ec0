"""Swaps to host memory in the simulator (sim/hardware.py host_levels): over a private link
they take bytes / host_bandwidth; over a shared host path they split each link among the
copies crossing it, as fetches do, and a host tree of its own never meets the device tree."""
import pytest

from autotile.sim.hardware import Level

from test_simulator import BW, LAT, FakeExecGraph, profile, sim


class SwapGraph(FakeExecGraph):
    """FakeExecGraph with swap-outs on each device's copy schedule."""

    def __init__(self, devices):
        super().__init__(devices)
        self._copies = [[] for _ in range(devices)]
        self.core = type("C", (), {"copy_schedule": lambda _, d: self._copies[d]})()

    def swap_out(self, device, nbytes):
        src = self.buffer(device, nbytes)
        self.ops.append({"kind": "swap_out", "device": device, "node": -1, "inputs": [], "input_boxes": [],
                         "outputs": [self.buffer(device, nbytes)], "deps": [], "pieces": [(src, (0,), (nbytes // 4,))],
                         "accumulate": False})
        self._copies[device].append(len(self.ops) - 1)


def with_host(hw, host_levels, host_bandwidth=None):
    hw.host_levels = host_levels
    if host_bandwidth is not None:
        hw.device["host_bandwidth"] = host_bandwidth
    return hw


def test_private_host_links_do_not_contend():
    eg = SwapGraph(2)
    eg.swap_out(0, 2_000_000)
    eg.swap_out(1, 2_000_000)
    r = sim(eg, with_host(profile(devices=2), None, host_bandwidth=BW))
    assert r.step_seconds == pytest.approx(2e6 / BW)


def test_swaps_share_the_device_trees_uplink():
    # devices 0 and 1 under one board switch (4 BW each), its uplink to the root 1 BW: both
    # swap-outs cross the uplink at once, 2 MB over 1 BW; device 2's swap uses the other board
    levels = [{"name": "board", "group": 2, "bandwidth": 4 * BW, "latency": 0.0},
              {"name": "root", "group": 2, "bandwidth": BW, "latency": LAT}]
    eg = SwapGraph(4)
    eg.swap_out(0, 1_000_000)
    eg.swap_out(1, 1_000_000)
    r = sim(eg, with_host(profile(devices=4, levels=levels), "levels"))
    assert r.step_seconds == pytest.approx(LAT + 2e6 / BW)
    eg = SwapGraph(4)
    eg.swap_out(0, 1_000_000)
    eg.swap_out(2, 1_000_000)
    r = sim(eg, with_host(profile(devices=4, levels=levels), "levels"))
    assert r.step_seconds == pytest.approx(LAT + 1e6 / BW)


def test_swaps_compete_with_fetches_on_the_same_tree():
    eg = SwapGraph(2)
    eg.swap_out(0, 1_000_000)  # leaves device 0 over its up-link ...
    eg.fetch(1, [eg.buffer(0, 1_000_000)])  # ... as this fetch does
    r = sim(eg, with_host(profile(devices=2), "levels"))
    assert r.step_seconds == pytest.approx(LAT + 2e6 / BW)


def test_a_host_tree_of_its_own_does_not_meet_peer_traffic():
    host = [Level("pcie", 2, BW, 0.0), Level("socket", 2, BW, 0.0)]
    eg = SwapGraph(2)
    eg.swap_out(0, 1_000_000)
    eg.fetch(1, [eg.buffer(0, 1_000_000)])
    r = sim(eg, with_host(profile(devices=2), host))
    assert r.step_seconds == pytest.approx(max(1e6 / BW, LAT + 1e6 / BW))
    eg = SwapGraph(4)  # devices 0 and 1 share the pcie switch's uplink
    eg.swap_out(0, 1_000_000)
    eg.swap_out(1, 1_000_000)
    r = sim(eg, with_host(profile(devices=4), host))
    assert r.step_seconds == pytest.approx(2e6 / BW)
