"""autotile: automatic tensor partitioning for deep-learning training.

    import autotile as at
    sym = at.models.get("alexnet", batch=32)
    plan = at.plan(sym, devices=8, batch=256)
    res = at.backend.run(sym, devices=1, inputs={...}, train=True)
"""
from . import backend, ops
from . import symbol as sym
from .errors import Error

__version__ = "0.1.0"


def __getattr__(name):
    # Heavier or optional parts load on first use (onnx needs the onnx package).
    import importlib

    lazy = {"onnx": ".onnx", "nd": ".ndarray", "models": ".models", "autodiff": ".autodiff"}
    if name in lazy:
        module = importlib.import_module(lazy[name], __name__)
        globals()[name] = module
        return module
    if name in ("plan", "Plan"):
        from . import planner

        return getattr(planner, name)
    if name == "transform":
        from .execgraph import transform

        return transform
    raise AttributeError(f"module 'autotile' has no attribute '{name}'")


__all__ = ["Error", "backend", "ops", "sym"]
