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


def get_include() -> str:
    """Directory of the C API headers (``autotile/c_api.h``, ``autotile/autotile.hpp``);
    docs/embedding.md. In a source checkout without an installed wheel: csrc/include."""
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.path.join(here, "include"), os.path.join(here, "..", "..", "csrc", "include")):
        if os.path.isfile(os.path.join(path, "autotile", "c_api.h")):
            return os.path.normpath(path)
    raise Error(f"the C API headers are not installed next to {here} (pip install autotile)")


def get_cmake_dir() -> str:
    """Directory of ``autotileConfig.cmake``, for ``find_package(autotile CONFIG PATHS ...)``
    and ``target_link_libraries(app autotile::core)``. Installed with the wheel only."""
    import os

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cmake")
    if not os.path.isfile(os.path.join(path, "autotileConfig.cmake")):
        raise Error(f"autotile's CMake package is not installed in {path}: it comes with the wheel "
                    "(pip install .), not with an in-tree development build")
    return path


def __getattr__(name):
    # Heavier or optional parts load on first use (onnx needs the onnx package); each is kept
    # as a module attribute once loaded, so tools that read the module (pdoc) find it there.
    import importlib

    lazy = {"onnx": ".onnx", "nd": ".ndarray", "models": ".models", "autodiff": ".autodiff", "training": ".training"}
    if name in lazy:
        value = importlib.import_module(lazy[name], __name__)
    elif name == "train":  # autotile.train(...): training.train
        from .training import train as value
    elif name in ("plan", "Plan"):
        from . import planner

        value = getattr(planner, name)
    elif name == "transform":
        from .execgraph import transform as value
    else:
        raise AttributeError(f"module 'autotile' has no attribute '{name}'")
    globals()[name] = value
    return value


# The public API, the lazily loaded parts included (`autotile.jax` and `autotile.torch` are
# subpackages for the optional engines: `import autotile.jax`, `import autotile.torch`).
__all__ = ["Error", "Plan", "autodiff", "backend", "get_cmake_dir", "get_include", "models", "nd", "onnx",
           "ops", "plan", "sym", "train", "training", "transform"]


def __dir__():
    return sorted(set(globals()) | set(__all__))
