"""Build the API reference (HTML, from the docstrings) with pdoc into docs/api/; any warning pdoc
gives (a name in __all__ that does not resolve, a module that fails to import, a docstring it
cannot render) fails the build.

    pip install --no-build-isolation '.[docs]'       # pdoc
    python bench/build_api_docs.py [-o docs/api]     # then open docs/api/index.html

The modules documented are MODULES below: the package's public API (``autotile.__all__``) and
the engines' subpackages. docs/api/ is not committed (CI builds it).
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: what the reference covers: the package (with the modules its __all__ names: backend, onnx,
#: models, training, autodiff, ops) and the modules behind the classes users hold or the calls
#: they make (Plan, ExecGraph, Symbol, hardware profiles, the engines)
MODULES = ["autotile", "autotile.planner", "autotile.execgraph", "autotile.symbol", "autotile.ndarray",
           "autotile.errors", "autotile.sim", "autotile.jax", "autotile.torch"]


def build(out_dir: str, modules=MODULES) -> list:
    """Render `modules` into out_dir; returns pdoc's warnings (as strings)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import common  # noqa: F401  (this checkout's python/ first when it has a development build)
    import pdoc
    import pdoc.render
    from pathlib import Path

    import autotile

    for name in autotile.__all__:  # the lazily loaded parts become attributes pdoc can read
        getattr(autotile, name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pdoc.render.configure(docformat="restructuredtext", footer_text=f"autotile {autotile.__version__}",
                              search=True, show_source=False)
        pdoc.pdoc(*modules, output_directory=Path(out_dir))
    return [f"{w.category.__name__}: {w.message}" for w in caught]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", default=os.path.join(ROOT, "docs", "api"), help="output directory")
    args = ap.parse_args(argv)
    problems = build(args.output)
    pages = sum(len([f for f in files if f.endswith(".html")]) for _, _, files in os.walk(args.output))
    for p in problems:
        print(p, file=sys.stderr)
    print(f"{args.output}: {pages} pages; {len(problems)} warnings" + (" (errors here)" if problems else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
