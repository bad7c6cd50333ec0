"""The ONNX front end's modules import one way: the converter families (onnx_ops*) depend on
onnx_registry (the registry and the shared helpers), which depends on none of them, and no
module of autotile.frontend imports a module that imports it back. Read from the source, every
import statement at any depth (function-level imports included), so a circle cannot hide
behind a lazy import."""
import ast
import graphlib
import os

import pytest

FRONTEND = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        "python", "autotile", "frontend")


def _frontend_imports(module: str) -> set:
    """The autotile.frontend modules that `module`'s source imports."""
    tree = ast.parse(open(os.path.join(FRONTEND, module + ".py")).read())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:  # from .x import y / from . import x, y
                found.update([node.module.split(".")[0]] if node.module else [a.name for a in node.names])
            elif node.level == 0 and node.module and node.module.startswith("autotile.frontend"):
                rest = node.module.split(".")[2:]
                found.update(rest[:1] if rest else [a.name for a in node.names])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[2] for a in node.names
                         if a.name.startswith("autotile.frontend.") and a.name.count(".") >= 2)
    return found


def _graph() -> dict:
    modules = [f[:-3] for f in os.listdir(FRONTEND) if f.endswith(".py") and f != "__init__.py"]
    return {m: _frontend_imports(m) & set(modules) for m in modules}


def test_frontend_modules_import_without_circles():
    try:
        list(graphlib.TopologicalSorter(_graph()).static_order())
    except graphlib.CycleError as e:
        pytest.fail(f"import circle: {' -> '.join(e.args[1])}")


def test_families_depend_on_the_registry_only():
    graph = _graph()
    families = sorted(m for m in graph if m.startswith("onnx_ops"))
    assert len(families) >= 5
    assert not graph["onnx_registry"] & set(families)
    for family in families:
        assert "onnx_registry" in graph[family], family
        assert not graph[family] & set(families), f"{family} imports another family: {graph[family]}"


def test_the_registry_holds_every_family():
    from autotile.frontend.onnx_converters import CONVERTERS

    # one op of each family: core, index, math, nn, rnn
    assert {"Conv", "GatherElements", "Where", "Softmax", "LSTM"} <= set(CONVERTERS)
