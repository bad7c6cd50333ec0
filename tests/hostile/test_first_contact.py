"""What a new user meets first (issue #25): the benchmarks and the README's first Python
example after a plain ``pip install .`` (matplotlib, the plot extra, missing: hidden from the
child processes here), and ``autotile run`` at a learning rate that makes training diverge."""
import os
import re

import pytest

from subprocess_util import env_without, run_cli, run_python

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOTE = "no plot written: matplotlib is not installed; pip install matplotlib (autotile's 'plot' extra"


@pytest.fixture(scope="module")
def no_matplotlib(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plain_install")
    env = env_without(tmp, "matplotlib")
    env["AUTOTILE_BENCH_OUT"] = str(tmp / "out")
    proc = run_python("import matplotlib", env=env)
    assert proc.returncode != 0 and "No module named 'matplotlib'" in proc.stderr
    return env, tmp / "out"


@pytest.mark.parametrize("bench, table, json_name", [("speedup", "SIMULATED", "speedup.json"),
                                                     ("search", "Search time", "search_time.json"),
                                                     ("mlp", "SIMULATED", "mlp.json"),
                                                     ("memory-plan", "per-device peak", "memory.json")])
def test_quick_benches_cost_only_the_plot_without_matplotlib(no_matplotlib, bench, table, json_name):
    env, out = no_matplotlib
    proc = run_cli("bench", bench, "--quick", env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert table in proc.stdout and (out / json_name).stat().st_size > 0
    assert proc.stderr.count(NOTE) == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and not list(out.glob("*.png"))


def _readme_first_python_block() -> str:
    with open(os.path.join(ROOT, "README.md")) as f:
        return re.search(r"```python\n(.*?)```", f.read(), re.S).group(1)


def test_readme_first_python_example_runs_without_matplotlib(no_matplotlib, tmp_path):
    """The README's first Python block, run as a new user would (in an empty directory, no
    plot extra); and the picture the README shows, drawn without matplotlib, says what to
    install instead of failing after the plan was made."""
    env, _ = no_matplotlib
    proc = run_python(_readme_first_python_block(), env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    draw = ("import autotile as at\n"
            "plan = at.plan('alexnet', devices=8, batch=256)\n"
            "print(plan.summary())\n"
            "plan.draw('plan.png')\n")
    proc = run_python(draw, env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 1 and "communication per step" in proc.stdout  # the summary, then the picture
    assert "Plan.draw needs matplotlib: pip install matplotlib" in proc.stderr, proc.stderr[-2000:]


@pytest.mark.parametrize("devices", ["1", "2"])
def test_run_stops_when_training_diverges(devices):
    # lr 1e6 on this MLP: the loss saturates, then the logits overflow and it turns NaN
    proc = run_cli("run", "mlp-2-16", "--batch", "8", "--devices", devices, "--steps", "12", "--lr", "1e6")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    step = re.search(r"training diverged at step (\d+) \(loss nan\): lower --lr \(now 1e\+06\)", proc.stderr)
    assert step, proc.stderr[-2000:]
    assert f"step {step.group(1)}/12: loss nan" in proc.stdout
    assert f"step {int(step.group(1)) + 1}/12" not in proc.stdout  # nothing runs after it


def test_run_at_a_sane_rate_is_unaffected():
    proc = run_cli("run", "mlp-2-16", "--batch", "8", "--steps", "3", "--lr", "0.1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "step 3/3: loss" in proc.stdout
