"""The ``autotile`` command line behaves like a Unix tool: results on stdout, errors on
stderr (one line, naming the culprit), exit status 0 / 1 (model or plan error) / 2 (usage).

Most cases call autotile.cli.main(argv) in-process (fast); the exit-status cases also run
``python -m autotile.cli`` in a subprocess with the same package tests/conftest.py selects."""
import math
import os
import re
import subprocess
import sys

import pytest

import autotile as at
from autotile import cli
from autotile.planner import ALGORITHMS, Plan

PKG_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(at.__file__)))


def run_main(capsys, *argv):
    """(exit status, stdout, stderr) of cli.main(argv); argparse's SystemExit becomes a status."""
    try:
        status = cli.main(list(argv))
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else 1
    out, err = capsys.readouterr()
    return status, out, err


def run_subprocess(*argv, timeout=120):
    env = dict(os.environ)
    env["PYTHONPATH"] = PKG_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.run([sys.executable, "-m", "autotile.cli", *argv], capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    return proc.returncode, proc.stdout, proc.stderr


def _fmt(n):
    """Bytes as the tool prints them (decimal units, one decimal), written independently."""
    if n < 1e3:
        return f"{n:.0f} B"
    for unit, scale in (("KB", 1e3), ("MB", 1e6), ("GB", 1e9)):
        if n < scale * 1e3:
            return f"{n / scale:.1f} {unit}"
    return f"{n / 1e12:.1f} TB"


# ----------------------------------------------------------------------------- info

def test_info_mlp(capsys):
    status, out, err = run_main(capsys, "info", "mlp", "--batch", "8")
    assert status == 0 and err == ""
    # 4 x FullyConnected 8192 -> 8192: 4 * (8192 * 8192 + 8192) parameters (by hand)
    n = 4 * (8192 * 8192 + 8192)
    assert f"parameters: {n:,}" in out
    assert "ops: 8" in out
    assert "inputs: data(8, 8192), softmax_label(8,)" in out
    assert "FullyConnected x4" in out and "Activation x3" in out and "SoftmaxOutput x1" in out


def test_info_batch_changes_the_inputs(capsys):
    status, out, _ = run_main(capsys, "info", "mlp-2-64", "--batch", "3")
    assert status == 0
    assert "data(3, 64)" in out and "softmax_label(3,)" in out


# ----------------------------------------------------------------------------- plan

@pytest.fixture(scope="module")
def plan_output(tmp_path_factory):
    """One `plan mlp --devices 4 --batch 8 --json --draw` run, in a subprocess."""
    d = tmp_path_factory.mktemp("cli")
    js, png = d / "plan.json", d / "plan.png"
    argv = ["plan", "mlp", "--devices", "4", "--batch", "8", "--baselines", "--json", str(js)]
    try:
        import matplotlib  # noqa: F401

        argv += ["--draw", str(png)]
    except ImportError:
        png = None
    status, out, err = run_subprocess(*argv)
    return status, out, err, js, png


def test_plan_prints_summary_and_algorithm_table(plan_output):
    status, out, err, _, _ = plan_output
    assert status == 0, err
    expected = at.plan("mlp", devices=4, batch=8)
    lines = out.splitlines()
    assert any(line.startswith("plan: mlp  algorithm=tofu  devices=4 (cuts 2 x 2)  batch=8") for line in lines)
    assert f"communication per step: {_fmt(expected.comm_bytes)}" in out
    for i, c in enumerate(expected.cut_costs):
        assert f"  cut {i + 1} (2-way): {_fmt(c)}" in lines
    for name in expected.param_names:
        row = next(line for line in lines if line.split()[:1] == [name])
        assert row.endswith(expected.tiling(name))
    # the comparison table: a header, then one row per algorithm, in ALGORITHMS order
    head = next(i for i, line in enumerate(lines) if line.split()[:2] == ["algorithm", "comm/step"])
    rows = lines[head + 1:head + 1 + len(ALGORITHMS)]
    assert [r.split()[0] for r in rows] == list(ALGORITHMS)
    assert all(not line.strip() for line in lines[head + 1 + len(ALGORITHMS):])  # nothing after the table
    by_algo = {r.split()[0]: r for r in rows}
    assert by_algo["tofu"].split()[1:4] == _fmt(expected.comm_bytes).split() + ["1.00x"]
    data = at.plan("mlp", devices=4, batch=8, algorithm="data")
    ratio = data.comm_bytes / expected.comm_bytes
    assert by_algo["data"].split()[1:4] == _fmt(data.comm_bytes).split() + [f"{ratio:.2f}x"]
    # bruteforce cannot enumerate this graph: a dash row with the reason, not a failure
    assert by_algo["bruteforce"].split()[1:4] == ["-", "-", "-"] and "bruteforce" in by_algo["bruteforce"][20:]
    # status messages are not results
    assert "written to" not in out
    assert "plan written to" in err


def test_plan_json_loads_as_the_same_plan(plan_output):
    status, _, _, js, _ = plan_output
    assert status == 0
    loaded = Plan.from_json(js.read_text())
    direct = at.plan("mlp", devices=4, batch=8)
    assert loaded.model == "mlp" and loaded.devices == 4 and loaded.factors == [2, 2]
    assert loaded.tensor_tilings == direct.tensor_tilings
    assert loaded.node_strategies == direct.node_strategies
    assert loaded.comm_bytes == direct.comm_bytes
    assert loaded.input_shapes == {"data": (8, 8192), "softmax_label": (8,)}


def test_plan_draw_writes_a_png(plan_output):
    status, _, err, _, png = plan_output
    if png is None:
        pytest.skip("matplotlib is not installed")
    import matplotlib.image as mpimg

    assert status == 0
    assert "picture written to" in err
    image = mpimg.imread(str(png))
    assert image.ndim == 3 and min(image.shape[:2]) > 100


def test_plan_no_compare_and_algorithm(capsys):
    status, out, err = run_main(capsys, "plan", "mlp-2-64", "--devices", "2", "--batch", "8", "--no-compare",
                                "--algorithm", "data")
    assert status == 0 and err == ""
    assert "algorithm=data" in out
    assert "comm/step" not in out


def test_plan_bandwidths(capsys):
    status, out, err = run_main(capsys, "plan", "mlp-2-64", "--devices", "4", "--batch", "8", "--no-compare",
                                "--bandwidths", "12.5e9,300e9")
    assert status == 0, err
    status, out, err = run_main(capsys, "plan", "mlp-2-64", "--devices", "8", "--batch", "8", "--no-compare",
                                "--bandwidths", "12.5e9,300e9")
    assert status == 1
    assert "3 cuts" in err and err.startswith("autotile: error:")


# ----------------------------------------------------------------------------- run

def _step_lines(out):
    return [line for line in out.splitlines() if line.startswith("step ")]


def test_run_two_steps(capsys):
    status, out, err = run_main(capsys, "run", "mlp-2-64", "--devices", "2", "--batch", "8", "--steps", "2")
    assert status == 0, err
    steps = _step_lines(out)
    assert len(steps) == 2
    values = []
    for i, line in enumerate(steps):
        m = re.fullmatch(rf"step {i + 1}/2: (loss|output mean) (-?\d+\.\d+)  time (\d+\.\d+)s", line)
        assert m, line
        values.append(float(m.group(2)))
    if "loss" in steps[0]:
        # small random weights: near-uniform predictions over 64 classes, cross-entropy ~ ln 64
        assert abs(values[0] - math.log(64)) < 0.5
    else:  # the mean of softmax probabilities over 64 classes is exactly 1/64
        assert values[0] == pytest.approx(1 / 64, abs=1e-6)
    # the same steps on one device print the same numbers (the plan does not change the maths)
    status, out1, _ = run_main(capsys, "run", "mlp-2-64", "--devices", "1", "--batch", "8", "--steps", "2")
    assert status == 0
    single = [float(re.search(r": (?:loss|output mean) (-?\d+\.\d+)", line).group(1)) for line in _step_lines(out1)]
    assert single == pytest.approx(values, abs=1e-4)


# ----------------------------------------------------------------------------- errors and exit codes

def test_unknown_model_exit_1_names_known_models():
    status, out, err = run_subprocess("plan", "nosuchnet", "--devices", "2")
    assert status == 1
    assert out == ""
    assert err.startswith("autotile: error: unknown model 'nosuchnet'")
    for known in ("mlp", "alexnet", "vgg", "wresnet", "rnn"):
        assert known in err
    assert "Traceback" not in err


def test_bad_flag_exit_2():
    status, out, err = run_subprocess("plan", "mlp", "--frobnicate")
    assert status == 2
    assert out == ""
    assert "usage:" in err and "--frobnicate" in err


def test_help_exit_0():
    status, out, err = run_subprocess("--help")
    assert status == 0
    assert out.startswith("usage: autotile") and err == ""
    for command in ("info", "plan", "run"):
        assert command in out


def test_python_dash_m_autotile_is_the_same_command():
    """``python -m autotile`` runs the same CLI with the same exit statuses as the script."""
    env = dict(os.environ)
    env["PYTHONPATH"] = PKG_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    for argv, want in ((["plan", "mlp", "--devices", "2", "--batch", "8"], 0), (["plan", "nosuchnet"], 1),
                       (["plan", "mlp", "--frobnicate"], 2)):
        proc = subprocess.run([sys.executable, "-m", "autotile", *argv], capture_output=True, text=True,
                              timeout=120, env=env, stdin=subprocess.DEVNULL)
        assert proc.returncode == want, (argv, proc.stderr)
    assert "Traceback" not in proc.stderr and "usage:" in proc.stderr


def test_subcommand_help_and_missing_arguments(capsys):
    status, out, err = run_main(capsys, "plan", "--help")
    assert status == 0 and "--devices" in out and err == ""
    status, out, err = run_main(capsys)
    assert status == 2 and out == "" and "usage:" in err
    status, out, err = run_main(capsys, "plan")
    assert status == 2 and "MODEL" in err


@pytest.mark.parametrize("argv, status, match", [
    (["plan", "mlp-2-64", "--devices", "0", "--no-compare"], 2, "--devices: expected a positive integer"),
    (["plan", "mlp-2-64", "--devices", "two"], 2, "--devices"),
    (["plan", "mlp-2-64", "--batch", "8", "--algorithm", "magic", "--no-compare"], 1, "unknown algorithm 'magic'"),
    (["plan", "mlp-2-64", "--bandwidths", "1,x", "--no-compare"], 2, "--bandwidths"),
    (["run", "mlp-2-64", "--ctx", "tpu"], 2, "--ctx"),
    (["info", "missing-file.onnx"], 1, "missing-file.onnx"),
])
def test_errors_go_to_stderr_with_status(capsys, argv, status, match):
    got, out, err = run_main(capsys, *argv)
    assert got == status
    assert re.search(match, err), err
    assert "Traceback" not in err
    if status == 1:
        assert err.startswith("autotile: error:") and err.count("\n") == 1


def test_unwritable_output_file_is_an_error_not_a_traceback(capsys, tmp_path):
    target = tmp_path / "no" / "such" / "dir" / "plan.json"
    status, out, err = run_main(capsys, "plan", "mlp-2-64", "--devices", "2", "--batch", "8", "--no-compare",
                                "--json", str(target))
    assert status == 1
    assert err.startswith("autotile: error:") and str(target) in err


def test_closed_stdout_is_not_an_error():
    """`autotile plan ... | true`: the reader going away ends the tool quietly (status 0,
    no traceback), as Unix filters do."""
    env = dict(os.environ)
    env["PYTHONPATH"] = PKG_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.Popen([sys.executable, "-m", "autotile.cli", "plan", "mlp-2-64", "--devices", "4",
                             "--batch", "8"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    proc.stdout.close()  # before the tool has written anything (it takes a while to start)
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 0
    assert "Traceback" not in err
