"""bench/build_api_docs.py: the API reference builds from the docstrings with no pdoc warning,
and a warning (here: a name in __all__ that does not resolve) fails the build."""
import os
import sys

import pytest

from doc_blocks import ROOT

pytest.importorskip("pdoc")
sys.path.insert(0, os.path.join(ROOT, "bench"))
import build_api_docs  # noqa: E402


def test_a_broken_all_is_reported(tmp_path, monkeypatch):
    pkg = tmp_path / "src" / "brokenpkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""A package whose __all__ names nothing."""\n__all__ = ["missing"]\n')
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    problems = build_api_docs.build(str(tmp_path / "out"), modules=["brokenpkg"])
    assert any("missing" in p for p in problems), problems


@pytest.mark.slow  # ~15 s unloaded; CI's "docs: API reference" stage builds it every run
def test_the_reference_builds_without_warnings(tmp_path):
    assert build_api_docs.build(str(tmp_path)) == []
    import inspect

    import autotile

    page = (tmp_path / "autotile.html").read_text()
    for name in autotile.__all__:  # a page of its own (a module) or an entry on autotile's page
        obj = getattr(autotile, name)
        if inspect.ismodule(obj):
            assert (tmp_path / (obj.__name__.replace(".", "/") + ".html")).is_file(), name
        else:
            assert f'id="{name}"' in page, name
