"""``import common`` for the scripts in bench/: puts this checkout's python/ first on the path when
it has a development build (as tests/conftest.py does, so the scripts measure the code next to
them), then re-exports the shared helpers, which live in the package (autotile.bench.common)."""
import glob
import os
import sys


def use_tree_package() -> None:
    """Import autotile from this checkout (python/) when a development build is there."""
    tree = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python")
    if glob.glob(os.path.join(tree, "autotile", "_core*.so")) and tree not in sys.path:
        sys.path.insert(0, tree)


use_tree_package()

from autotile.bench.common import *  # noqa: E402,F401,F403
from autotile.bench.common import OUT_DIR  # noqa: E402,F401
