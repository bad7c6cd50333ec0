"""Running a hostile input in a child process with a time limit: a hang fails the test
instead of hanging the suite, and the child's peak memory can be read back."""
import os
import subprocess
import sys
import textwrap

#: seconds a child may take; each of these cases is refused in well under a second
LIMIT = 120

#: appended to a child's code: its peak resident memory (bytes) as the last line of stdout.
#: VmHWM belongs to the child's own address space; ru_maxrss would not do: Linux keeps it across
#: execve, so it would report the (large) pytest process the child was forked from.
PRINT_PEAK = """
import resource, sys
try:
    with open("/proc/self/status") as f:
        _peak = next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith("VmHWM:"))
except (OSError, StopIteration):  # no procfs: ru_maxrss (bytes on macOS, KiB elsewhere)
    _peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
print("peak_rss", _peak, flush=True)
"""


def run_python(code: str, *args, env=None, timeout: float = LIMIT, cwd=None) -> subprocess.CompletedProcess:
    """Run `code` (dedented) in a fresh interpreter importing the same autotile; fails the
    test (subprocess.TimeoutExpired) when it runs past `timeout` seconds."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd)


def run_cli(*args, env=None, timeout: float = LIMIT) -> subprocess.CompletedProcess:
    """`autotile ARGS...` in a child process, with a time limit."""
    return subprocess.run([sys.executable, "-m", "autotile.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def peak_rss(stdout: str) -> int:
    """The peak resident bytes a child printed with PRINT_PEAK."""
    line = [ln for ln in stdout.splitlines() if ln.startswith("peak_rss ")][-1]
    return int(line.split()[1])


def env_without(tmp_path, module: str) -> dict:
    """The environment of a child in which `module` cannot be imported (as after a plain
    ``pip install .`` without the extra that brings it): a sitecustomize on PYTHONPATH puts a
    finder in front of sys.meta_path that refuses it. Children of the child inherit it."""
    d = tmp_path / f"without_{module}"
    d.mkdir(exist_ok=True)
    (d / "sitecustomize.py").write_text(textwrap.dedent(f"""
        import sys

        class _Hide:
            def find_spec(self, name, path=None, target=None):
                if name == {module!r} or name.startswith({module + '.'!r}):
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
                return None

        sys.meta_path.insert(0, _Hide())
        """))
    env = dict(os.environ)
    env["PYTHONPATH"] = str(d) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env
