"""`autotile.__all__` is the public API: what the docs use is in it, and all of it resolves."""
import re

import autotile

from doc_blocks import all_blocks

# subpackages of the optional engines (jax, torch): reached as `import autotile.jax`, not by
# `from autotile import *` (which would import jax or torch for everybody)
ENGINES = {"jax", "torch"}


def _doc_names():
    """Every `at.NAME` / `autotile.NAME` the python blocks of README.md and docs/*.md use."""
    names = {}
    for b in all_blocks():
        if b.kind == "python":
            for n in re.findall(r"(?<![\w.])(?:at|autotile)\.([A-Za-z_]\w*)", b.code):
                names.setdefault(n, b.id)
    return names


def test_all_resolves_and_is_documented():
    for name in autotile.__all__:
        obj = getattr(autotile, name)
        assert (getattr(obj, "__doc__", None) or "").strip(), f"autotile.{name} has no docstring"


def test_star_import_gives_all():
    ns = {}
    exec("from autotile import *", ns)
    assert set(ns) - {"__builtins__"} == set(autotile.__all__)


def test_dir_shows_all():
    assert set(autotile.__all__) <= set(dir(autotile))


def test_what_the_docs_use_is_public():
    names = _doc_names()
    assert {"plan", "transform", "backend", "sym", "onnx", "models"} <= set(names), sorted(names)
    hidden = {n: where for n, where in names.items()
              if n not in autotile.__all__ and n not in ENGINES and not n.startswith("_")}
    # submodules the docs import explicitly (`from autotile.planner.swap_search import ...`) are
    # public through their own path; anything else used as at.NAME must be in __all__
    imported = {n for n in hidden if any(f"autotile.{n}" in b.code and "import" in b.code for b in all_blocks())}
    assert not set(hidden) - imported, {n: hidden[n] for n in set(hidden) - imported}
