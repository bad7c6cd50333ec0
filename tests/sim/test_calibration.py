"""The calibration lookup (exact shape, interpolation by FLOPs, beyond the measured range),
merging calibrations, and the host profile fitted to measurements (autotile.sim.fit): each
against times computed by hand from the formulas the samples were generated with."""
import pytest

from autotile.sim import Calibration, CostTable, load_profile
from autotile.sim.cost_table import MATMUL_KINDS, bytes_touched, flops, im2col_bytes, profile_slowdown, roofline
from autotile.sim.fit import (entry_errors, fit_curve, fit_dispatch, fit_op_model, fitted, fitted_profile,
                              relative_errors)


def fc(n, h, d):
    """FullyConnected tiles without bias: data (n, d), weight (h, d) -> out (n, h); 2nhd FLOPs."""
    return "FullyConnected", [(n, d), (h, d)], [(n, h)]


def relu(n):
    return "Activation", [(n,)], [(n,)]


def test_lookup_exact_interpolated_and_extrapolated():
    cal = Calibration()
    cal.add(*fc(8, 16, 32), 1e-3)    # 2*8*16*32 = 8192 FLOPs
    cal.add(*fc(8, 16, 96), 4e-3)    # 24,576 FLOPs
    assert cal.lookup(*fc(8, 16, 32)) == 1e-3                      # measured shape
    # 16,384 FLOPs: halfway between 8192 and 24,576 -> 1 ms + (4 - 1) ms * 8192 / 16384
    assert cal.lookup(*fc(8, 16, 64)) == pytest.approx(1e-3 + 3e-3 * 8192 / 16384)
    # same FLOPs as a measured shape, another shape: the measured time of those FLOPs
    assert cal.lookup(*fc(16, 8, 32)) == pytest.approx(1e-3)
    # beyond the largest: proportional to FLOPs (2*8*16*192 = 49,152 = 2 x 24,576)
    assert cal.lookup(*fc(8, 16, 192)) == pytest.approx(8e-3)
    # below the smallest: the smallest time (fixed overhead dominates small kernels)
    assert cal.lookup(*fc(2, 2, 2)) == pytest.approx(1e-3)
    assert cal.lookup(*relu(100)) is None                          # kind never measured


def test_cost_table_uses_the_lookup_then_the_roofline():
    hw = load_profile("host")
    cal = Calibration()
    cal.add(*fc(8, 16, 32), 1e-3)
    table = CostTable(hw, cal)
    assert table.time(*fc(8, 16, 32)) == 1e-3
    assert table.time(*relu(1000)) == pytest.approx(roofline(hw, *relu(1000)))


def test_merged_calibration_has_every_entry_and_refits_fetches():
    a, b = Calibration(), Calibration()
    a.add(*fc(8, 16, 32), 1e-3)
    b.add(*fc(8, 16, 64), 2e-3)
    b.add(*fc(8, 16, 32), 3e-3)  # measured again later: the later one wins
    m = Calibration.merged([a, b])
    assert len(m.ops) == 2 and m.lookup(*fc(8, 16, 32)) == 3e-3


def test_fit_curve_recovers_an_affine_time():
    a, b = 2e-5, 1e-10
    samples = [(f, a + b * f) for f in (1e4, 1e5, 1e6, 1e7)]
    fa, fb = fit_curve(samples)
    assert fa == pytest.approx(a, rel=1e-6) and fb == pytest.approx(b, rel=1e-6)
    # one size only: proportional through it
    assert fit_curve([(1e6, 3e-4), (1e6, 3e-4)]) == (0.0, pytest.approx(3e-10))


# the generating model of the synthetic measurements: a fixed cost per kernel, one GEMM rate
# for every BLAS kind, bytes at one bandwidth, a convolution's columns at another, and a
# per-element cost per other kind
LAUNCH, GEMM, BW, COLS = 3e-5, 4e10, 8e9, 2e9
PER_ELEMENT = {"Activation": 1e-9, "sgd_update": 4e-9}


def _true_seconds(kind, ins, outs):
    f = flops(kind, ins, outs)
    t = LAUNCH + bytes_touched(ins, outs) / BW + im2col_bytes(kind, ins, outs) / COLS
    return t + (f / GEMM if kind in MATMUL_KINDS else f * PER_ELEMENT[kind])


def conv(n, c, hw, f, k):
    """Convolution tiles, stride 1, no padding: data (n, c, hw, hw), weight (f, c, k, k)."""
    o = hw - k + 1
    return "Convolution", [(n, c, hw, hw), (f, c, k, k)], [(n, f, o, o)]


def _synthetic_shapes():
    return ([fc(16, 64, d) for d in (32, 128, 512, 2048)] + [fc(256, 1024, 64), fc(8, 4096, 4096)]
            + [conv(4, 8, 16, 16, 3), conv(2, 3, 32, 8, 5), conv(1, 16, 8, 4, 3), conv(2, 4, 20, 32, 1)]
            + [relu(n) for n in (1000, 10000, 100000)]
            + [("sgd_update", [(n,), (n,)], [(n,)]) for n in (500, 20000, 300000)])


def _synthetic():
    cal = Calibration()
    for kind, ins, outs in _synthetic_shapes():
        t = _true_seconds(kind, ins, outs)
        cal.add(kind, ins, outs, t, contended=2 * t if kind == "FullyConnected" else None)
    return cal


def test_fit_recovers_the_generating_costs():
    # the oracle: the figures the measurements were generated with
    model = fit_op_model(_synthetic())
    assert model["launch"] == pytest.approx(LAUNCH, rel=1e-4)
    assert model["mem_bw"] == pytest.approx(BW, rel=1e-4)
    assert model["im2col_bw"] == pytest.approx(COLS, rel=1e-4)
    assert 1 / model["per_flop"]["@matmul"] == pytest.approx(GEMM, rel=1e-4)
    for kind, c in PER_ELEMENT.items():
        assert model["per_flop"][kind] == pytest.approx(c, rel=1e-4)
    hw = fitted_profile(_synthetic(), "host")
    assert hw.launch_overhead == pytest.approx(LAUNCH, rel=1e-4)
    assert hw.device["serial_roofline"] and hw.efficiency["memory"] == 1.0
    # every BLAS kind, measured or not, runs at the one GEMM rate
    for kind in ("FullyConnected", "Convolution", "batch_dot"):
        assert hw.peak_flops * hw.efficiency[kind] == pytest.approx(GEMM, rel=1e-4)
    assert max(hw.efficiency.values()) <= 1.0 + 1e-12


def test_fitted_roofline_predicts_unmeasured_shapes():
    hw = fitted_profile(_synthetic(), "host")
    unseen = [fc(16, 64, 8), fc(3, 5000, 700), conv(8, 16, 12, 32, 3), relu(5_000_000),
              ("sgd_update", [(77,), (77,)], [(77,)])]
    for kind, ins, outs in unseen:  # shapes never measured, inside and beyond the range
        assert roofline(hw, kind, ins, outs) == pytest.approx(_true_seconds(kind, ins, outs), rel=1e-4)


def test_fitted_profile_carries_the_host_calibration():
    cal = _synthetic()
    cal.fetch.update({"overhead": 2e-5, "row_seconds": 3e-8, "bandwidth": 6e9, "accumulate_bandwidth": 3e9})
    cal.machine.update({"effective_cores": 1.8, "wake_latency_s": 5e-5, "op_overhead_s": 9e-6})
    hw = fitted_profile(cal, "host")
    table = CostTable(hw)  # the profile alone, no calibration
    assert table.fetch_model_time(1e6, 100, False) == pytest.approx(2e-5 + 100 * 3e-8 + 1e6 / 6e9)
    assert table.fetch_model_time(1e6, 100, True) == pytest.approx(2e-5 + 100 * 3e-8 + 1e6 / 3e9)
    assert hw.cores == pytest.approx(1.8) and hw.wake_latency == 5e-5 and hw.op_overhead == 9e-6
    assert profile_slowdown(hw, "FullyConnected") == pytest.approx(2.0)
    assert profile_slowdown(hw, "Pooling") == 1.0


def test_model_only_calibration_prices_by_the_fitted_roofline():
    cal = _synthetic()
    hw, model = fitted(cal)
    assert not model.ops and not model.fetches
    table = CostTable(hw, model)
    kind, ins, outs = fc(16, 64, 512)  # measured in `cal`, but the model-only table does not look it up
    assert table.time(kind, ins, outs) == pytest.approx(roofline(hw, kind, ins, outs))
    assert model.slowdowns_by_kind()["FullyConnected"] == pytest.approx(2.0)


def test_relative_errors():
    st = relative_errors([(1.1, 1.0), (0.8, 1.0), (3.0, 2.0)])
    assert st["mean"] == pytest.approx((0.1 + 0.2 + 0.5) / 3)
    assert st["median"] == pytest.approx(0.2) and st["max"] == pytest.approx(0.5) and st["n"] == 3


def test_entry_errors_of_the_fitted_model():
    from autotile.sim import Simulator

    sim = Simulator(*fitted(_synthetic()))
    # the samples follow the fitted model exactly: no error on any shape nor on the sum
    e = entry_errors(sim, _synthetic())
    assert e["ops"] == pytest.approx(0.0, abs=1e-4) and e["total"] == pytest.approx(0.0, abs=1e-4)
    slow = Calibration()
    kind, ins, outs = fc(16, 64, 512)
    slow.add(kind, ins, outs, 2 * _true_seconds(kind, ins, outs))  # twice as slow as the fit prices it
    assert entry_errors(sim, slow)["total"] == pytest.approx(-0.5, rel=1e-4)


def test_fit_dispatch_recovers_step_and_op_overheads():
    # steps generated as 1.4 ms + their ops' own time + 7 us per op: the fit returns both
    samples = [{"count": n, "ops": ops, "step": 1.4e-3 + ops + n * 7e-6}
               for n, ops in ((15, 2.8e-4), (54, 7.6e-4), (222, 3.1e-3), (670, 9.6e-3))]
    step, per_op = fit_dispatch(samples)
    assert step == pytest.approx(1.4e-3) and per_op == pytest.approx(7e-6)
    # two graphs by hand: 2 ms = c0 + 100 x o, 4 ms = c0 + 300 x o -> o = 10 us, c0 = 1 ms
    step, per_op = fit_dispatch([{"count": 100, "ops": 1e-3, "step": 3e-3}, {"count": 300, "ops": 2e-3, "step": 6e-3}])
    assert step == pytest.approx(1e-3) and per_op == pytest.approx(1e-5)
    # a step shorter than its ops says nothing of the overheads
    assert fit_dispatch([{"count": 10, "ops": 2e-3, "step": 1e-3}]) == (0.0, 0.0)


def test_measure_dispatch_times_every_op_of_tiny_graphs():
    # the measurement itself (timings vary: only what it must hold on any machine is checked)
    import autotile as at
    from autotile.models import mlp
    from autotile.sim.calibrate import measure_dispatch

    sym = mlp(8, layers=2, hidden=8, classes=10)
    graphs = [at.transform(sym, at.plan(sym, devices=k, algorithm="data")) for k in (1, 2)]
    d = measure_dispatch(graphs, steps=3, repeat=2)
    assert [s["count"] for s in d["samples"]] == [len(eg.ops) for eg in graphs]
    assert [s["devices"] for s in d["samples"]] == [1, 2]
    assert all(s["step"] > 0 and s["ops"] > 0 for s in d["samples"])
    assert d["dispatch_compute_s"] > 0 and d["dispatch_fetch_s"] > 0  # the 2-device graph has fetches
    assert d["step_overhead_s"] >= 0 and d["op_overhead_s"] >= 0
