"""Inside autotile.symbol, Symbol is the lowest module (issue #25): symbol.py imports none of
infer, json_io and ops_api at any depth (function-level imports included); they take a Symbol
as an argument and register what Symbol's methods call (symbol.METHODS)."""
import ast
import os

import autotile as at
from autotile.symbol import symbol as symbol_module

SYMBOL_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python", "autotile",
                          "symbol")
ABOVE = {"infer", "json_io", "ops_api"}


def _symbol_imports(path):
    found = set()
    for node in ast.walk(ast.parse(open(path).read(), path)):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found.update([node.module.split(".")[0]] if node.module else [a.name for a in node.names])
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            names = [module] if module else [a.name for a in node.names]
            found.update(n.split(".")[2] for n in names if n and n.startswith("autotile.symbol."))
    return found


def test_symbol_imports_none_of_the_modules_above_it():
    assert not _symbol_imports(os.path.join(SYMBOL_DIR, "symbol.py")) & ABOVE
    for name in ABOVE:  # ... which do import it
        assert "symbol" in _symbol_imports(os.path.join(SYMBOL_DIR, f"{name}.py")), name


def test_symbol_methods_reach_the_modules_above(tmp_path):
    assert {"infer_shapes", "infer_types", "to_json", "save", "create"} <= set(symbol_module.METHODS)
    net = at.sym.FullyConnected(at.sym.Variable("data", shape=(2, 3)), num_hidden=4, name="fc") * 2.0
    args, outs, _ = net.infer_shape()
    assert args == [(2, 3), (4, 3), (4,)] and outs == [(2, 4)]
    assert net.infer_type()[1] == ["float32"]
    path = tmp_path / "net-symbol.json"
    net.save(str(path))
    assert at.sym.load(str(path)).tojson() == net.tojson()
