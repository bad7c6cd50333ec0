"""roofline() and the tile-size-dependent efficiency against arithmetic written out by hand,
and the shipped GPU profiles' figures (K80 copy engines, half-efficiency tile sizes)."""
import pytest

from autotile.errors import Error
from autotile.sim import Simulator, load_profile, profile_from_dict
from autotile.sim.cost_table import CostTable, efficiency, roofline

PEAK, MEM_BW, LAUNCH = 1e12, 1e11, 1e-5


def hw(half=None, eff=None):
    return profile_from_dict({
        "name": "t", "devices": 1,
        "device": {"peak_flops": PEAK, "mem_bandwidth": MEM_BW, "memory_bytes": 1e9, "launch_overhead_s": LAUNCH},
        "efficiency": eff or {"FullyConnected": 0.5, "default": 0.25, "memory": 0.5},
        "efficiency_half_flops": half or {},
        "levels": [{"name": "bus", "group": 1, "bandwidth": 1e9}]})


# FullyConnected without bias: data (64, 512), weight (256, 512) -> out (64, 256)
FC = ("FullyConnected", [(64, 512), (256, 512)], [(64, 256)])
FC_FLOPS = 2 * 64 * 256 * 512            # 16,777,216
FC_BYTES = 4 * (64 * 512 + 256 * 512 + 64 * 256)  # 720,896


def test_compute_bound_product_without_size_dependence():
    t = roofline(hw(), *FC)
    # compute: 16.78e6 / (1e12 * 0.5) = 33.55 us; memory: 720896 / (1e11 * 0.5) = 14.4 us
    assert t == pytest.approx(LAUNCH + FC_FLOPS / (PEAK * 0.5), rel=1e-12)
    assert FC_FLOPS / (PEAK * 0.5) > FC_BYTES / (MEM_BW * 0.5)


def test_compute_bound_product_with_half_efficiency_tile():
    half = 1e8
    t = roofline(hw(half={"FullyConnected": half}), *FC)
    eff = 0.5 * FC_FLOPS / (FC_FLOPS + half)  # 0.5 * 16.78e6 / 116.78e6 = 0.0718
    assert t == pytest.approx(LAUNCH + FC_FLOPS / (PEAK * eff), rel=1e-12)
    # the same time as a fixed cost of `half` FLOPs per kernel: (f + half) / (peak * eff_max)
    assert t == pytest.approx(LAUNCH + (FC_FLOPS + half) / (PEAK * 0.5), rel=1e-12)


def test_memory_bound_elementwise_op():
    relu = ("Activation", [(1024, 1024)], [(1024, 1024)])
    # FLOPs = elements = 1,048,576 at 0.25 of peak: 4.19 us; bytes 8 MiB at 0.5 x 1e11: 167.8 us
    t = roofline(hw(half={"FullyConnected": 1e8}), *relu)
    assert t == pytest.approx(LAUNCH + 8 * 1024 * 1024 / (MEM_BW * 0.5), rel=1e-12)


def test_default_efficiency_and_half_apply_to_unlisted_kinds():
    h = hw(half={"default": 4e6})
    conv = ("Convolution", [(2, 3, 8, 8), (4, 3, 3, 3)], [(2, 4, 6, 6)])
    f = 2 * (2 * 4 * 6 * 6) * (3 * 3 * 3)  # 15,552 FLOPs
    assert efficiency(h, "Convolution", f) == pytest.approx(0.25 * f / (f + 4e6))
    t_mem = 4 * (2 * 3 * 8 * 8 + 4 * 3 * 3 * 3 + 2 * 4 * 6 * 6) / (MEM_BW * 0.5)
    assert roofline(h, *conv) == pytest.approx(LAUNCH + max(f / (PEAK * 0.25 * f / (f + 4e6)), t_mem))


def test_eight_times_smaller_tile_is_less_efficient():
    h = hw(half={"FullyConnected": 8e6})
    assert efficiency(h, "FullyConnected", 8e6) == pytest.approx(0.25)       # half of 0.5 at f = half
    assert efficiency(h, "FullyConnected", 1e6) == pytest.approx(0.5 / 9)    # f = half / 8: 1/9 of 0.5
    assert efficiency(h, "FullyConnected", 8e9) == pytest.approx(0.5 * 1000 / 1001)
    # without efficiency_half_flops the efficiency does not depend on the tile
    assert efficiency(hw(), "FullyConnected", 1e3) == efficiency(hw(), "FullyConnected", 1e12) == 0.5


def test_cost_table_roofline_is_roofline():
    h = hw(half={"FullyConnected": 1e8})
    assert CostTable(h).roofline(*FC) == roofline(h, *FC)
    assert CostTable(h).time(*FC) == roofline(h, *FC)  # no calibration: the roofline


def test_bad_half_flops_is_an_error():
    with pytest.raises(Error, match="efficiency_half_flops"):
        hw(half={"FullyConnected": -1.0})


def test_k80_profile_has_two_copy_engines_and_half_efficiency_tiles():
    k80 = load_profile("p2.8xlarge")
    assert k80.copy_engines == 2  # GK210: two DMA engines per die
    # one wave of 128x128 blocks, depth 256, on 13 SMX: 2*128*128*256*13 = 109,051,904 FLOPs
    half = 2 * 128 * 128 * 256 * 13
    assert k80.half_flops["FullyConnected"] == pytest.approx(half, rel=1e-3)
    assert efficiency(k80, "FullyConnected", half) == pytest.approx(0.65 / 2, rel=1e-3)
    a100 = load_profile("dgx-a100")
    assert a100.half_flops["Convolution"] == pytest.approx(2 * 128 * 128 * 256 * 108, rel=1e-3)


def test_two_copy_engines_run_two_fetches_at_once():
    """Device 0 fetches from devices 1 and 2 over links that do not contend: with one copy
    engine the second fetch waits for the first (2 x (latency + B/bw)), with two they overlap."""
    from test_simulator import FakeExecGraph, FixedCost  # tests/sim is on sys.path (rootdir-relative import)

    def run(engines):
        h = profile_from_dict({
            "name": "t", "devices": 3,
            "device": {"peak_flops": 1e12, "mem_bandwidth": 1e11, "memory_bytes": 1e9, "copy_engines": engines,
                       "local_copy_bandwidth": 1e30},
            "levels": [{"name": "s", "group": 3, "bandwidth": 1e9, "latency": 1e-5}]})
        eg = FakeExecGraph(3)
        b1 = eg.buffer(1, 4_000_000)
        b2 = eg.buffer(2, 4_000_000)
        eg.fetch(0, [b1])
        eg.fetch(0, [b2])
        return Simulator(h, cost=FixedCost(h)).run(eg).step_seconds

    # the two copies share device 0's down-link when concurrent: 8 MB / 1 GB/s either way, but
    # with one engine each also pays its latency in turn
    assert run(1) == pytest.approx(2 * 1e-5 + 8e6 / 1e9, rel=1e-9)
    assert run(2) == pytest.approx(1e-5 + 8e6 / 1e9, rel=1e-9)
