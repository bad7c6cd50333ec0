"""``autotile.sym``: the MXNet-1.x-style Symbol API.

Every registered operator is available as a constructor: ``sym.Convolution(...)``."""
from ..ops import registry as _registry
from . import infer as _infer  # noqa: F401 - registers Symbol.infer_shape/infer_type (symbol.METHODS)
from .json_io import load, load_json
from .ops_api import constructor as _constructor
from .ops_api import create
from .symbol import Group, Node, Symbol, Variable, var


def __getattr__(name):
    if not name.startswith("__") and _registry.exists(name):
        fn = _constructor(name)
        globals()[name] = fn
        return fn
    raise AttributeError(f"module 'autotile.sym' has no attribute '{name}'")


def __dir__():
    return sorted(list(globals()) + [n for n in _registry.all_ops() if not n.startswith("_")])
