"""Profiles from measurement: `autotile bench calibrate`'s profile loads and round-trips and
simulates as the fit it came from; the validation's held-out predictions see no measurement
of what they predict (a poisoned held-out graph changes nothing out of sample)."""
import json

import pytest

import autotile as at
from autotile.models import mlp
from autotile.sim import Calibration, Simulator, load_profile, simulate
from autotile.sim.cost_table import op_tiles
from autotile.sim.fit import fit_handoff, fitted_profile


def _graph(k, hidden=16, layers=2):
    sym = mlp(8, layers=layers, hidden=hidden, classes=10)
    return at.transform(sym, at.plan(sym, devices=k, algorithm="data"))


def test_calibrated_profile_loads_round_trips_and_simulates_as_its_fit(tmp_path):
    from autotile.sim.calibrate import calibrate_graphs, profile_document

    eg = _graph(2)
    cal = calibrate_graphs([eg], repeat=1, parallelism=False, contended=False)
    cal.machine.update({"effective_cores": 1.9, "wake_latency_s": 3e-5, "op_overhead_s": 8e-6})
    doc = profile_document(cal, name="my-host")
    path = tmp_path / "my-host.json"
    path.write_text(json.dumps(doc))
    hw = load_profile(str(path))
    assert hw.name == "my-host" and hw.device["serial_roofline"] and hw.cores == pytest.approx(1.9)
    assert hw.wake_latency == 3e-5 and hw.op_overhead == 8e-6
    # the loaded file is what was written, field by field
    again = hw.to_dict()
    for key in ("device", "efficiency", "efficiency_half_flops", "levels", "cores", "sources"):
        assert again[key] == doc[key], key
    # a simulation on the file alone is the fitted profile's (no measured shape is looked up)
    want = Simulator(fitted_profile(cal)).run(eg).step_seconds
    assert simulate(eg, str(path)).step_seconds == pytest.approx(want, rel=1e-12)


def test_fit_handoff_recovers_the_serial_terms_of_linear_steps():
    # steps generated as s0 + h x (chain ops) + f x (chain seconds), h = 150 us, f = 0.08:
    # the fit returns both from any probes
    h, f, probes = 1.5e-4, 0.08, (2e-4, 0.05)
    samples = []
    for s0, ops, secs in ((0.1, 300, 0.05), (0.25, 900, 0.2), (0.05, 80, 0.04), (0.4, 200, 0.3)):
        samples.append((s0, s0 + ops * probes[0], s0 + secs * probes[1], s0 + ops * h + secs * f))
    assert fit_handoff(samples, probes) == pytest.approx([h, f], rel=1e-9)
    # steps faster than simulated without them: no negative term
    assert fit_handoff([(0.2, 0.3, 0.25, 0.1)], probes) == [0.0, 0.0]


def _synthetic_entry(model, eg, scale, measured):
    """A dataset entry of `eg` whose every op takes scale x (20 us + FLOPs / 2e10)."""
    from autotile.sim.cost_table import flops

    cal = Calibration()
    for op in eg.ops:
        if op["kind"] == "compute":
            kind, ins, outs = op_tiles(eg, op)
            cal.add(kind, ins, outs, scale * (2e-5 + flops(kind, ins, outs) / 2e10))
    return {"model": model, "devices": eg.devices, "algorithm": "data", "steps": [measured], "disturbed": [],
            "load": [0.0, 0.0], "calibration": {"ops": cal.ops, "fetches": cal.fetches}}


def test_held_out_predictions_use_no_measurement_of_what_they_predict():
    from autotile.bench.sim_validate import predictions

    graphs = {("a", k): _graph(k, hidden=16) for k in (1, 2, 4)}
    graphs.update({("b", k): _graph(k, hidden=24, layers=3) for k in (1, 2, 4)})

    def dataset(poison_a4=1.0, poison_b=1.0):
        entries = {}
        for (model, k), eg in graphs.items():
            scale = poison_a4 if (model, k) == ("a", 4) else poison_b if model == "b" else 1.0
            entries[f"{model}|{k}"] = _synthetic_entry(model, eg, scale, 1e-3 * k * scale)
        return {"entries": entries, "machine": {"effective_cores": 2.0}}

    def graph_of(e):
        return graphs[e["model"], e["devices"]]

    base = {(r["model"], r["devices"]): r for r in predictions(dataset(), graph_of)}
    # the 4-device graph of model a measured 100x slower: its in-sample prediction follows,
    # its devices-held-out and model-held-out predictions do not move
    poisoned = {(r["model"], r["devices"]): r for r in predictions(dataset(poison_a4=100.0), graph_of)}
    assert poisoned["a", 4]["in_sample"] > 10 * base["a", 4]["in_sample"]
    for key in ("devices_out", "model_out"):
        assert poisoned["a", 4][key] == pytest.approx(base["a", 4][key], rel=1e-12), key
    # every graph of model b measured 100x slower: b's model-held-out predictions (fitted on a
    # alone) stay; a's (fitted on b alone) follow b's measurements
    other = {(r["model"], r["devices"]): r for r in predictions(dataset(poison_b=100.0), graph_of)}
    for k in (1, 2, 4):
        assert other["b", k]["model_out"] == pytest.approx(base["b", k]["model_out"], rel=1e-12)
        assert other["a", k]["model_out"] > 10 * base["a", k]["model_out"]


def _calibrate_cli(*args):
    import subprocess
    import sys

    from autotile import bench_cli

    return subprocess.run([sys.executable, "-m", "autotile.cli", "bench", "calibrate", *args],
                          capture_output=True, text=True, timeout=900, env=bench_cli._env())


def test_calibrate_cli_refuses_a_bad_repeat(tmp_path):
    proc = _calibrate_cli("--repeat", "0", "--out", str(tmp_path / "p.json"))
    assert proc.returncode == 2 and "--repeat must be at least 1, got 0" in proc.stderr
    assert not (tmp_path / "p.json").exists()


@pytest.mark.slow
def test_calibrate_cli_writes_a_profile_the_planner_and_simulator_load(tmp_path):
    out, raw = tmp_path / "my-host.json", tmp_path / "cal.json"
    proc = _calibrate_cli("--quick", "--repeat", "1", "--out", str(out), "--calibration", str(raw))
    assert proc.returncode == 0, proc.stderr
    assert f"profile written to {out}" in proc.stdout
    hw = load_profile(str(out))
    assert hw.device["serial_roofline"] and hw.peak_flops > 0 and hw.mem_bandwidth > 0
    assert "FullyConnected" in hw.efficiency and "Convolution" in hw.efficiency  # the quick set's kinds
    assert "handoff_s" in hw.device and "gil_fraction" in hw.device  # fitted to the graphs' steps
    assert Calibration.load(str(raw)).ops  # the raw measurements kept beside it
    eg = _graph(4, hidden=64)
    assert simulate(eg, str(out)).step_seconds > 0
