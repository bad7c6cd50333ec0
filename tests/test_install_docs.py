"""The install instructions in README.md and docs/ use one form (issue 35, item 3).

autotile is installed from a checkout, not from PyPI (no ``pip install autotile``), and always
as ``pip install --no-build-isolation [-v] '.[extra,...]'``: without build isolation
scikit-build-core keeps pyproject.toml's ``build-dir`` between installs, so an extra installed
after the first install recompiles nothing. These tests read every ``pip install`` command in the
docs (lines of fenced code blocks and inline code spans starting with it) and check that each one
that installs autotile uses that form, names only extras pyproject.toml declares, and that the
build requirements the README installs are the ones pyproject.toml declares.
"""
import glob
import os
import re
import shlex

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))


def _pyproject():
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        tomllib = pytest.importorskip("tomli")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def _commands(text):
    """(line number, command) for every `pip install ...` in code blocks and inline code."""
    out = []
    fence = False
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if fence:
            for part in re.split(r"&&|;", line.split("#", 1)[0]):
                part = part.strip()
                if part.startswith("pip install"):
                    out.append((n, part))
        else:
            for span in re.findall(r"`([^`]+)`", line):
                if span.startswith("pip install"):
                    out.append((n, span))
    return out


def _installs_autotile(arg):
    return arg == "." or arg.startswith(".[") or re.match(r"autotile($|\[)", arg) is not None


def _all_commands():
    found = []
    for path in DOCS:
        with open(path, encoding="utf-8") as f:
            for n, cmd in _commands(f.read()):
                found.append((f"{os.path.relpath(path, ROOT)}:{n}", cmd))
    return found


def test_the_docs_have_install_commands():
    where = [w for w, cmd in _all_commands() if any(_installs_autotile(a) for a in shlex.split(cmd)[2:])]
    assert any(w.startswith("README.md:") for w in where), "README.md shows no install command"


def test_every_install_of_autotile_uses_the_one_form():
    extras = set(_pyproject()["project"]["optional-dependencies"])
    bad = []
    for where, cmd in _all_commands():
        words = shlex.split(cmd)
        targets = [a for a in words[2:] if _installs_autotile(a)]
        if not targets:
            continue  # a third-party package (mpi4py, torch from its CPU index, ...)
        options = [a for a in words[2:] if a.startswith("-")]
        if re.match(r"autotile($|\[)", targets[0]):
            bad.append(f"{where}: {cmd!r} installs autotile from PyPI, where it is not published")
        elif "--no-build-isolation" not in options or set(options) - {"--no-build-isolation", "-v"}:
            bad.append(f"{where}: {cmd!r}: use pip install --no-build-isolation [-v] '.[extra]'")
        elif "[" in targets[0]:
            m = re.fullmatch(r"'?\.\[([a-z0-9,-]+)\]'?", targets[0])
            named = m.group(1).split(",") if m else []
            unknown = [e for e in named if e not in extras]
            if not m or unknown:
                bad.append(f"{where}: {cmd!r}: extras {unknown or targets[0]} not in pyproject.toml")
            # a bracketed argument must be quoted in the text, or zsh expands it
            raw = cmd[cmd.index("pip install"):]
            if f"'{targets[0]}'" not in raw and f'"{targets[0]}"' not in raw:
                bad.append(f"{where}: {cmd!r}: quote '{targets[0]}'")
    assert not bad, "\n".join(bad)


def test_the_build_requirements_and_the_kept_build_directory():
    pp = _pyproject()
    requires = {re.split(r"[<>=!~ \[]", r, 1)[0].lower() for r in pp["build-system"]["requires"]}
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    readme_reqs = None
    for _, cmd in _commands(readme):
        words = shlex.split(cmd)
        if not any(_installs_autotile(a) for a in words[2:]) and "scikit-build-core" in words:
            readme_reqs = {w.lower() for w in words[2:] if not w.startswith("-")}
    # without build isolation pip does not bring CMake and Ninja either: the README installs them too
    assert readme_reqs is not None and readme_reqs - {"cmake", "ninja"} == requires, \
        f"README installs {readme_reqs}, pyproject.toml needs {requires} (and CMake, Ninja)"
    # the kept build directory that makes --no-build-isolation installs incremental
    assert pp["tool"]["scikit-build"].get("build-dir", "").startswith("build/")
