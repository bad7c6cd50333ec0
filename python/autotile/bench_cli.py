"""``autotile bench ...``: run the benchmark scripts of the source tree's bench/ directory.

    autotile bench speedup|mlp|algorithms|memory|search|validate [--quick] [--profile NAME]
    autotile bench calibrate [--quick] [--out PATH]
    autotile bench all [--quick]

Each script prints its table and writes a PNG and a JSON of the raw numbers to bench/out/.
Scripts run in a child process with one BLAS thread per process (the host profile's
assumption; see autotile/sim/profiles/host.json)."""
from __future__ import annotations

import os
import subprocess
import sys
from typing import List

from .errors import Error

#: subcommand -> script in bench/
SCRIPTS = {"speedup": "speedup.py", "mlp": "mlp.py", "algorithms": "algorithms.py", "memory": "memory_fit.py",
           "search": "search_time.py", "validate": "sim_validate.py"}
#: what `autotile bench all` runs, in order
ALL = ("validate", "speedup", "mlp", "algorithms", "memory", "search")  # validate calibrates


def bench_dir() -> str:
    """bench/ of the source tree this package was imported from (python/autotile/../../bench)."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.normpath(os.path.join(here, "..", "..", "bench"))
    if not os.path.isdir(path):
        raise Error("the benchmark scripts live in the source tree's bench/ directory, which this installed "
                    "package has not got: run autotile from a checkout (PYTHONPATH=python)")
    return path


def _env() -> dict:
    env = dict(os.environ)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, "1")
    python_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = python_dir + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run_one(name: str, extra: List[str]) -> int:
    """Run benchmark `name` with `extra` arguments; returns its exit status."""
    if name == "calibrate":
        cmd = [sys.executable, "-c", "import sys; from autotile.sim.calibrate import main; "
                                     "sys.exit(main(sys.argv[1:]))", *extra]
    else:
        script = os.path.join(bench_dir(), SCRIPTS[name])
        if not os.path.exists(script):
            raise Error(f"bench/{SCRIPTS[name]} is not in this checkout yet")
        cmd = [sys.executable, script, *extra]
    return subprocess.call(cmd, env=_env())


def cmd_bench(args) -> int:
    extra = []
    if args.quick:
        extra.append("--quick")
    if args.out:
        if args.what != "calibrate":
            raise Error("--out is an option of `autotile bench calibrate`")
        extra += ["--out", args.out]
    for p in args.profile or []:
        if args.what in ("calibrate", "search"):
            raise Error(f"`autotile bench {args.what}` takes no --profile")
        extra += ["--profile", p]
    if args.what != "all":
        return run_one(args.what, extra)
    status = 0
    for name in ALL:
        print(f"== autotile bench {name}", flush=True)
        try:
            rc = run_one(name, ["--quick"] if args.quick else [])
        except Error as e:
            print(f"skipped: {e}", flush=True)
            continue
        status = status or rc
    return status


def add_parser(sub) -> None:
    """Register ``bench`` on the ``autotile`` command's subparsers."""
    sp = sub.add_parser("bench", help="run benchmarks (tables, plots and JSON to bench/out/)")
    sp.add_argument("what", choices=sorted(list(SCRIPTS) + ["calibrate", "all"]))
    sp.add_argument("--quick", action="store_true", help="small sizes (under 2 minutes)")
    sp.add_argument("--profile", action="append", default=None,
                    help="hardware profile (p2.8xlarge, dgx-a100, 2x8-ib, host or a JSON path); repeatable")
    sp.add_argument("--out", default=None, help="calibrate: where to write the calibration JSON")
    sp.set_defaults(fn=cmd_bench)
