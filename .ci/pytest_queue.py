"""Runs the test suite as several pytest processes, N at a time (CI: 2, one per core): one
process per directory of tests/ (the files directly in tests/ make one more), plus any extra
pytest command lines given with --also. A worker takes the next unit when its last one ends,
the units listed first in --first going first (the long ones, so the short ones fill in at the
end). Each unit's output is printed whole when it ends, with its wall time; the exit status is
1 if any unit failed (pytest's 5, no test selected, counts as passing: tests/gpu without a GPU).

    python3 .ci/pytest_queue.py --jobs 2 --first ops,frontend -- --durations=5
    python3 .ci/pytest_queue.py --also "-m 'slow and not gpu' tests/x.py::test_y"

Arguments after `--` go to every directory unit. Every test pytest would collect from tests/
is in exactly one directory unit, so the union is the README's `python3 -m pytest`.
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def units(first: list[str]) -> list[tuple[str, list[str]]]:
    tests = os.path.join(ROOT, "tests")
    dirs = sorted(d for d in os.listdir(tests) if os.path.isdir(os.path.join(tests, d)) and not d.startswith((".", "_"))
                  and any(f.startswith("test_") and f.endswith(".py")
                          for _, _, files in os.walk(os.path.join(tests, d)) for f in files))
    top = sorted(f for f in os.listdir(tests) if f.startswith("test_") and f.endswith(".py"))
    order = [d for d in first if d in dirs] + [d for d in dirs if d not in first]
    out = [(f"tests/{d}", [f"tests/{d}"]) for d in order]
    if top:
        out.append(("tests/test_*.py", [f"tests/{f}" for f in top]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--first", default="", help="comma-separated directories of tests/ to start first")
    ap.add_argument("--also", action="append", default=[],
                    help="an extra unit, run first: pytest arguments as shell words (write --also=...)")
    ap.add_argument("--only", default="", help="comma-separated directories of tests/: run these units alone")
    ap.add_argument("pytest_args", nargs="*", help="after --: arguments for every directory unit")
    opts = ap.parse_args()
    only = {f"tests/{d}" for d in opts.only.split(",") if d}
    todo = [(name, args + opts.pytest_args) for name, args in units([d for d in opts.first.split(",") if d])
            if not only or name in only]
    todo = [(f"pytest {a}", shlex.split(a)) for a in opts.also] + todo if opts.also else todo
    lock, results, outputs, t_start = threading.Lock(), [], [], time.time()

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                name, args = todo.pop(0)
            t0 = time.time()
            proc = subprocess.run([sys.executable, "-m", "pytest", *args], cwd=ROOT, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, errors="replace")
            dt = time.time() - t0
            ok = proc.returncode in (0, 5)
            with lock:
                results.append((name, dt, proc.returncode))
                outputs.append(proc.stdout)
                print(f"===== {name}: {dt / 60:.1f} min, exit {proc.returncode}{'' if ok else '  FAILED'} "
                      f"(at {(time.time() - t_start) / 60:.1f} min) =====")
                print(proc.stdout.rstrip(), flush=True)

    threads = [threading.Thread(target=worker) for _ in range(max(1, opts.jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"===== pytest units, {opts.jobs} at a time: {(time.time() - t_start) / 60:.1f} min wall =====")
    for name, dt, rc in sorted(results, key=lambda r: -r[1]):
        print(f"  {dt / 60:5.1f} min  exit {rc}  {name}")
    failed = [name for name, _, rc in results if rc not in (0, 5)]
    if failed:
        print("FAILED units: " + ", ".join(failed))
    # One closing line for the whole run, in pytest's words (each unit printed its own above).
    counts = {word: sum(counts_of(out).get(word, 0) for out in outputs) for word in ("passed", "failed", "skipped", "error")}
    print(f"total: {counts['passed']} passed, {counts['failed'] + counts['error']} failed, {counts['skipped']} skipped")
    return 1 if failed else 0


def counts_of(output: str) -> dict:
    """pytest's closing counts ('3 failed, 7380 passed, 135 skipped in ...') of one unit's output."""
    lines = [line for line in output.splitlines() if re.search(r"\d+ (passed|failed|skipped|errors?)\b", line)]
    if not lines:
        return {}
    return {("error" if word.startswith("error") else word): int(n)
            for n, word in re.findall(r"(\d+) (passed|failed|skipped|errors?)\b", lines[-1])}


if __name__ == "__main__":
    sys.exit(main())
