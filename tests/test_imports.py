"""The package's layers import one way: symbol (graphs) and ndarray (.params files) share
only autotile.dtype_flags; autodiff (training graphs) never reaches into backend (running
them), which builds on it. Read from the source, every import statement at any depth
(function-level imports included), so a circle cannot hide behind a lazy import."""
import ast
import os

import pytest

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python", "autotile")

#: the parts whose imports must not form a circle (issue #13.6)
PARTS = ("symbol", "ndarray", "dtype_flags", "autodiff", "backend")


def _modules(part):
    path = os.path.join(ROOT, part)
    if os.path.isdir(path):
        return [os.path.join(dirpath, f) for dirpath, _, files in os.walk(path) for f in files if f.endswith(".py")]
    return [path + ".py"]


def _imported(path):
    """The autotile parts (first component below autotile) a source file imports."""
    rel = os.path.relpath(path, ROOT)[:-3].split(os.sep)
    package = ["autotile"] + (rel[:-1] if rel[-1] != "__init__" else rel[:-1])
    found = set()
    for node in ast.walk(ast.parse(open(path).read(), path)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                names = base + (node.module.split(".") if node.module else [])
                targets = [names] if node.module else [base + [a.name] for a in node.names]
            else:
                targets = [node.module.split(".")] if node.module else []
        elif isinstance(node, ast.Import):
            targets = [a.name.split(".") for a in node.names]
        else:
            continue
        for t in targets:
            if t[0] == "autotile" and len(t) > 1:
                found.add(t[1])
    return found


def _graph():
    return {part: {p for m in _modules(part) for p in _imported(m) if p in PARTS and p != part} for part in PARTS}


def test_parts_import_without_circles():
    graph = _graph()
    state = {}

    def visit(part, path):
        state[part] = "open"
        for dep in sorted(graph[part]):
            if state.get(dep) == "open":
                pytest.fail(f"import circle: {' -> '.join(path + [dep])}")
            if dep not in state:
                visit(dep, path + [dep])
        state[part] = "done"

    for part in PARTS:
        if part not in state:
            visit(part, [part])


@pytest.mark.parametrize("part,never", [("symbol", {"ndarray", "autodiff", "backend"}),
                                        ("dtype_flags", {"symbol", "ndarray"}),
                                        ("autodiff", {"backend"})])
def test_lower_layers_do_not_reach_up(part, never):
    assert not _graph()[part] & never


def test_the_reader_sees_lazy_imports():
    """The scan is not blind: backend's lazy imports of autodiff are found."""
    assert "autodiff" in _graph()["backend"]


def test_public_api_is_listed_and_importable():
    # Every name of __all__ resolves (lazy ones load on first use) and dir() shows them, so
    # `from autotile import *` and tab completion see plan, transform, onnx, models, Plan.
    import autotile

    for name in ("plan", "Plan", "transform", "train", "onnx", "models", "nd"):
        assert name in autotile.__all__ and name in dir(autotile)
    namespace = {}
    exec("from autotile import *", namespace)
    assert callable(namespace["plan"]) and callable(namespace["transform"])
    assert namespace["Plan"].__name__ == "Plan"
