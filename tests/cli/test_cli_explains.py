"""The CLI explains itself: --version, defaults and choices in --help, the zoo's names, the
baseline table on request (and under the plan's constraints), progress lines, `run` with a
saved plan or constraints, --shape for ONNX inputs, and errors that name the right thing."""
import re

import pytest

import autotile as at
from autotile import cli
from autotile.cli import plan as plan_cmd
from autotile.cli.args import HelpFormatter, Progress
from autotile.planner import ALGORITHMS

from .test_cli import run_main


def _losses(out):
    return [float(v) for v in re.findall(r"step \d+/\d+: loss (-?\d+\.\d+)", out)]


def test_version(capsys):
    status, out, _ = run_main(capsys, "--version")
    assert status == 0 and out.strip() == f"autotile {at.__version__}"


def _subparsers():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.choices and "plan" in a.choices)
    return {name: sp for name, sp in sub.choices.items() if name != "bench"}


@pytest.mark.parametrize("command", ["info", "plan", "run", "train"])
def test_help_shows_every_default_and_choice(command):
    sp = _subparsers()[command]
    assert sp.formatter_class is HelpFormatter
    text = " ".join(sp.format_help().split())  # argparse wraps lines
    for action in sp._actions:
        if action.help in (None, "==SUPPRESS==") or action.dest == "help":
            continue
        assert action.help, f"{command} {action.option_strings}: no help"
        if action.default is not None and action.default is not False and not isinstance(action.default, list):
            assert f"(default: {action.default})" in text, (command, action.option_strings)
        if action.choices:
            assert "{" + ",".join(map(str, action.choices)) + "}" in text


def test_help_names_zoo_models_and_algorithms():
    subs = _subparsers()
    text = " ".join(subs["plan"].format_help().split())
    for algo in ALGORITHMS:
        assert algo in text
    for desc in at.models.zoo.known_names() if hasattr(at.models, "zoo") else []:
        assert " ".join(desc.split()) in text.replace("- ", "-"), desc
    for word in ("--devices", "--steps"):
        assert word in " ".join(subs["run"].format_help().split())


def test_baselines_only_on_request_or_when_cheap(capsys, monkeypatch):
    argv = ["plan", "mlp-2-16", "--devices", "2", "--batch", "8", "-q"]
    monkeypatch.setattr(plan_cmd, "AUTO_BASELINE_SECONDS", 0.0)  # any graph is too slow for the default
    status, out, _ = run_main(capsys, *argv)
    assert status == 0 and "algorithm " not in out and "--baselines prints their table" in out
    status, out, _ = run_main(capsys, *argv, "--baselines")
    assert status == 0 and re.search(r"^algorithm +comm/step", out, re.M)
    monkeypatch.setattr(plan_cmd, "AUTO_BASELINE_SECONDS", 1e9)  # any graph is cheap enough
    status, out, _ = run_main(capsys, *argv)
    assert status == 0 and re.search(r"^algorithm +comm/step", out, re.M)
    status, out, _ = run_main(capsys, *argv, "--no-baselines")
    assert status == 0 and "algorithm " not in out and "baselines skipped" not in out


def _rows(out):
    table = out[out.index("algorithm "):].splitlines()[1:]
    return {line.split()[0]: line for line in table if line.strip()}


def test_baselines_run_under_the_plans_constraints(capsys):
    """With --mesh/--layout, a baseline that takes them is planned with them (its bytes are
    at.plan's with the same constraints); one that cannot is run without and says so."""
    sym = at.models.get("mlp-2-16", batch=8)
    mesh, layout = {"batch": 2, "model": 2}, {"fc1_weight": {0: "model"}}
    status, out, err = run_main(capsys, "plan", "mlp-2-16", "--batch", "8", "--mesh", "batch=2,model=2",
                                "--layout", "fc1_weight:0=model", "--baselines", "-q")
    assert status == 0, err
    rows = _rows(out)
    assert "unconstrained" in rows["soybean"]
    free = at.plan(sym, devices=4, batch=8, algorithm="soybean")
    assert plan_cmd.fmt_bytes(free.comm_bytes) in rows["soybean"]
    try:
        data = at.plan(sym, batch=8, algorithm="data", mesh=mesh, layout=layout)
        assert plan_cmd.fmt_bytes(data.comm_bytes) in rows["data"] and "unconstrained" not in rows["data"]
    except at.Error:  # data parallelism cannot honour the rule: run without it, and labelled
        free = at.plan(sym, devices=4, batch=8, algorithm="data")
        assert plan_cmd.fmt_bytes(free.comm_bytes) in rows["data"] and "unconstrained" in rows["data"]


def test_baselines_under_a_memory_budget(capsys):
    """--memory: each baseline row is that algorithm's plan within the budget, or its refusal."""
    status, out, err = run_main(capsys, "plan", "mlp", "--devices", "8", "--batch", "64", "--memory", "256MiB",
                                "--baselines", "-q")
    assert status == 0, err
    rows = _rows(out)
    sym = at.models.get("mlp", batch=64)
    for algo in ("soybean", "owt"):
        try:
            p = at.plan(sym, devices=8, batch=64, algorithm=algo, device_memory=256 * 2 ** 20)
            assert plan_cmd.fmt_bytes(p.comm_bytes) in rows[algo]
        except at.Error as e:
            assert rows[algo].split()[1] == "-" and str(e)[:30] in rows[algo]


def test_progress_lines_only_for_long_phases(capsys):
    import time

    with Progress("search", enabled=True, after=0.05):
        time.sleep(0.3)
    err = capsys.readouterr().err
    assert re.fullmatch(r"autotile: search \.\.\. \d+\.\ds\n", err), err
    with Progress("search", enabled=True, after=5):
        pass
    assert capsys.readouterr().err == ""
    Progress.quiet = True
    try:
        assert not Progress("search").enabled
    finally:
        Progress.quiet = False
    run_main(capsys, "info", "mlp-2-16", "-q")
    assert Progress.quiet and not Progress("x").enabled
    run_main(capsys, "info", "mlp-2-16")
    assert not Progress.quiet


def test_run_with_constraints_and_a_saved_plan(capsys, tmp_path):
    """run --mesh/--layout/--memory plans under them; run --plan FILE runs that plan; each
    step's loss is the single-device run's."""
    base = ["run", "mlp-2-16", "--batch", "8", "--steps", "2", "-q"]
    status, out, _ = run_main(capsys, *base)
    single = _losses(out)
    assert status == 0 and len(single) == 2
    status, out, err = run_main(capsys, *base, "--mesh", "batch=2,model=2", "--layout", "fc1_weight:0=model")
    assert status == 0, err
    assert "plan: 4 devices" in out and _losses(out) == pytest.approx(single, abs=1e-5)
    status, out, err = run_main(capsys, *base, "--devices", "2", "--memory", "1GiB")
    assert status == 0 and "plan: 2 devices" in out and _losses(out) == pytest.approx(single, abs=1e-5), err
    plan_file = tmp_path / "p.json"
    assert run_main(capsys, "plan", "mlp-2-16", "--devices", "2", "--batch", "8", "--json", str(plan_file),
                    "--no-compare", "-q")[0] == 0
    status, out, err = run_main(capsys, *base, "--plan", str(plan_file))
    assert status == 0, err
    assert f"(from {plan_file})" in out and _losses(out) == pytest.approx(single, abs=1e-5)
    status, _, err = run_main(capsys, *base, "--plan", str(plan_file), "--mesh", "batch=2")
    assert status == 1 and "--plan runs a saved plan as it is" in err
    status, _, err = run_main(capsys, "run", "cnn-digits", "--batch", "8", "--plan", str(plan_file), "-q")
    assert status == 1 and "plan was made for another graph" in err and "conv1_weight" in err


@pytest.fixture(scope="module")
def dynamic_cnn(tmp_path_factory):
    """An ONNX CNN whose image size is symbolic (dynamic axes), its Linear sized for 8x8."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnx")
    import warnings

    class CNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
            self.fc = torch.nn.Linear(4 * 8 * 8, 10)

        def forward(self, x):
            return self.fc(torch.relu(self.conv(x)).flatten(1))

    path = tmp_path_factory.mktemp("onnx") / "cnn.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(CNN(), (torch.randn(2, 1, 8, 8),), str(path), input_names=["image"], output_names=["logits"],
                          dynamic_axes={"image": {0: "n", 2: "h", 3: "w"}}, dynamo=False)
    return path


def test_shape_sets_onnx_inputs(capsys, dynamic_cnn):
    status, _, err = run_main(capsys, "plan", str(dynamic_cnn), "--no-compare", "-q")
    assert status == 1 and "input 'image'" in err and "--shape image=DIMS" in err
    status, out, err = run_main(capsys, "info", str(dynamic_cnn), "--shape", "image=4x1x8x8")
    assert status == 0 and "image(4, 1, 8, 8)" in out, err
    status, out, err = run_main(capsys, "run", str(dynamic_cnn), "--shape", "image=4x1x8x8", "--loss",
                                "cross_entropy", "-q")
    assert status == 0 and len(_losses(out)) == 1, err
    # a wrong image size: the error leads with the input, whatever weight it then reaches
    status, _, err = run_main(capsys, "plan", str(dynamic_cnn), "--shape", "image=4x1x16x16", "--no-compare")
    assert status == 1 and err.startswith("autotile: error: --shape: input 'image' (4, 1, 16, 16) does not fit")
    status, _, err = run_main(capsys, "plan", str(dynamic_cnn), "--shape", "pixels=4x1x8x8", "--no-compare")
    assert status == 1 and "'pixels'" in err and "image" in err
    status, _, err = run_main(capsys, "plan", "mlp", "--shape", "data=4x8", "--no-compare")
    assert status == 1 and "--shape sets the inputs of an .onnx file" in err
    status, _, err = run_main(capsys, "plan", "mlp", "--shape", "data=4xq")
    assert status == 2 and "--shape" in err


def test_model_name_errors(capsys, tmp_path, dynamic_cnn, monkeypatch):
    monkeypatch.chdir(dynamic_cnn.parent)
    status, _, err = run_main(capsys, "plan", "cnn.onx", "-q")
    assert status == 1 and "no such file 'cnn.onx'" in err and "'cnn.onnx'" in err and "unknown model" not in err
    status, _, err = run_main(capsys, "plan", str(tmp_path / "nothing" / "m.onnx"), "-q")
    assert status == 1 and "no such file" in err
    status, _, err = run_main(capsys, "plan", "resnet18", "-q")
    assert status == 1 and "unknown model 'resnet18'" in err and "wresnet: depth" not in err
    close = re.search(r"close matches: ([^(]*)", err).group(1)
    assert "resnet50" in close
    status, _, err = run_main(capsys, "info", "alexnett")
    assert status == 1 and "unknown model 'alexnett'; close matches: alexnet" in err
    status, _, err = run_main(capsys, "info", "gpt2-tiny")
    assert status == 1 and "gpt2-small" in re.search(r"close matches: ([^(]*)", err).group(1)


def test_objective_time_without_hardware_names_the_flag(capsys):
    status, out, err = run_main(capsys, "plan", "mlp-digits", "--devices", "2", "--objective", "time")
    assert status != 0 and "--hardware" in err and "dgx-h100" in err and "hardware=" not in err
