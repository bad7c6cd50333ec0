"""``autotile bench``: names map to the package's benchmark modules (so the command works where
autotile is installed), arguments pass through, unknown names and bad `all` options are errors."""
import subprocess
import sys

import pytest

from autotile import bench_cli, cli
from autotile.bench import BENCHES
from autotile.errors import Error


def test_every_bench_is_a_module_with_a_main():
    import importlib

    for name, (module, _) in BENCHES.items():
        mod = importlib.import_module(f"autotile.bench.{module}")
        assert callable(mod.main), name
        assert bench_cli.target(name) == ("module", f"autotile.bench.{module}")
        assert bench_cli.command(name, ["--quick"]) == [sys.executable, "-m", "autotile.bench_cli", "module",
                                                        f"autotile.bench.{module}", "--quick"]


def test_checkout_only_scripts_and_unknown_names():
    tree = bench_cli.tree_bench_dir()
    if tree is not None:  # imported from a checkout (dev build): its bench/ scripts run
        assert bench_cli.command("optimality", ["--quick"])[3:] == ["script", f"{tree}/optimality.py", "--quick"]
    else:  # installed (as CI tests it): checkout-only scripts are refused with a reason
        with pytest.raises(Error, match="source checkout"):
            bench_cli.command("optimality", ["--quick"])
    with pytest.raises(Error, match="unknown benchmark 'nosuch'; known: ") as err:
        bench_cli.command("nosuch", [])
    known = str(err.value).split("known: ")[1].split(" (")[0].split(", ")
    assert known == sorted(known) and set(BENCHES) <= set(known)  # every packaged bench is listed
    with pytest.raises(Error, match="unknown benchmark 'common'"):
        bench_cli.command("common", [])


def test_all_takes_only_quick(capsys):
    assert cli.main(["bench", "all", "--profile", "host"]) == 1
    assert "`autotile bench all` takes only --quick, got --profile host" in capsys.readouterr().err


def test_arguments_reach_the_benchmark():
    proc = subprocess.run([sys.executable, "-m", "autotile.cli", "bench", "speedup", "--help"],
                          capture_output=True, text=True, timeout=120, env=bench_cli._env())
    assert proc.returncode == 0 and "--quick" in proc.stdout and "--profile" in proc.stdout
