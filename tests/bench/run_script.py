"""Runs a checkout's bench/NAME.py in a child process with its output directory in a test's
tmp_path (the scripts call the installed package's autotile.bench modules)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_bench(name: str, tmp_path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """bench/`name`.py with `args`, AUTOTILE_BENCH_OUT=tmp_path; asserts it exits 0."""
    env = dict(os.environ, AUTOTILE_BENCH_OUT=str(tmp_path))
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "bench", f"{name}.py"), *args], env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc
