"""``autotile bench NAME [args]``: run a benchmark of :mod:`autotile.bench`.

    autotile bench speedup|mlp|algorithms|memory|search|validate|multifetch|... [--quick] [...]
    autotile bench calibrate [--quick] [--out PROFILE.json]   (a profile of this machine, measured)
    autotile bench all [--quick]

Arguments after NAME go to the benchmark (``autotile bench speedup --help`` lists its own).
Each runs in a child process (``python -m autotile.bench.MODULE``) with one BLAS thread per
process (the host profile's assumption; see autotile/sim/profiles/host.json), prints its table
and writes a PNG and a JSON of the raw numbers (autotile.bench.common.default_out_dir). Scripts
that exist only in a source checkout's bench/ directory (optimality, transformers, scaling...)
run from there when the package is imported from a checkout."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import List, Optional, Tuple

from .bench import BENCHES
from .errors import Error

#: what `autotile bench all` runs, in order (validate calibrates the host profile first)
ALL = ("validate", "speedup", "mlp", "algorithms", "memory", "search")


def tree_bench_dir() -> Optional[str]:
    """bench/ of the source checkout this package was imported from, or None when installed."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.normpath(os.path.join(here, "..", "..", "bench"))
    return path if os.path.isfile(os.path.join(path, "common.py")) else None


def _env() -> dict:
    env = dict(os.environ)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, "1")
    python_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = python_dir + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def target(name: str) -> Tuple[str, str]:
    """(kind, what) of benchmark `name`: ("module", "autotile.bench.X"), ("script", path of a
    checkout's bench/X.py) or ("call", "module:function"); Error naming the known ones."""
    if name == "calibrate":
        return "call", "autotile.sim.calibrate:main"
    if name in BENCHES:
        return "module", f"autotile.bench.{BENCHES[name][0]}"
    tree = tree_bench_dir()
    script = os.path.join(tree, f"{name}.py") if tree and name != "common" else None
    if script and os.path.isfile(script):
        return "script", script
    known = ", ".join(sorted(list(BENCHES) + ["calibrate", "all"]))
    where = "" if tree else " (scripts only in a source checkout's bench/ need one)"
    raise Error(f"unknown benchmark '{name}'; known: {known}{where}")


def command(name: str, extra: List[str]) -> List[str]:
    """The child process's argv for benchmark `name`: :func:`child_main` running it, so that a
    reader that goes away (``autotile bench NAME | head -1``) ends it quietly."""
    kind, what = target(name)
    return [sys.executable, "-m", "autotile.bench_cli", kind, what, *extra]


def child_main(argv: List[str]) -> int:
    """Run one benchmark in this process (``python -m autotile.bench_cli KIND WHAT ARGS...``,
    KIND and WHAT as :func:`target` gives them) with ARGS as its command line; its exit status,
    or 0 when stdout's reader has gone (a BrokenPipeError, then stdout to /dev/null, so the
    interpreter's last flush does not print another)."""
    import runpy

    from .cli import quiet_closed_stdout

    kind, what, extra = argv[0], argv[1], list(argv[2:])
    try:
        try:
            if kind == "call":
                module, _, fn = what.partition(":")
                code = getattr(__import__(module, fromlist=[fn]), fn)(extra)
            else:
                sys.argv = [what, *extra]
                if kind == "module":
                    runpy.run_module(what, run_name="__main__", alter_sys=True)
                else:  # as `python SCRIPT` runs it: its directory first on the path
                    sys.path.insert(0, os.path.dirname(os.path.abspath(what)))
                    runpy.run_path(what, run_name="__main__")
                code = 0
        except SystemExit as e:
            code = e.code
        sys.stdout.flush()  # inside the try: the last lines may be what meets the closed pipe
    except BrokenPipeError:
        quiet_closed_stdout()
        return 0
    return code


def run_one(name: str, extra: List[str]) -> int:
    """Run benchmark `name` with `extra` arguments; returns its exit status."""
    return subprocess.call(command(name, extra), env=_env())


def cmd_bench(args) -> int:
    if args.what != "all":
        return run_one(args.what, args.args)
    unknown = [a for a in args.args if a != "--quick"]
    if unknown:
        raise Error(f"`autotile bench all` takes only --quick, got {' '.join(unknown)}")
    status = 0
    for name in ALL:
        print(f"== autotile bench {name}", flush=True)
        status = status or run_one(name, list(args.args))
    return status


def add_parser(sub) -> None:
    """Register ``bench`` on the ``autotile`` command's subparsers."""
    lines = [f"  {name:<12} {desc}" for name, (_, desc) in BENCHES.items()]
    lines += [f"  {'calibrate':<12} measure this machine's kernels and write a hardware profile (--out my-host.json)",
              f"  {'all':<12} {', '.join(ALL)} in turn"]
    sp = sub.add_parser("bench", help="run a benchmark (tables on stdout, PNG and JSON files)",
                        description="benchmarks:\n" + "\n".join(lines),
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    sp.add_argument("what", metavar="NAME", help="benchmark name (above)")
    sp.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the benchmark, e.g. --quick")
    sp.set_defaults(fn=cmd_bench)


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
