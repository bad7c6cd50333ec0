"""Test setup: use the in-tree package when a development build put _core next to it
(cmake -S . -B build && cmake --build build), else the installed package. Tests that start
subprocesses inherit the choice through PYTHONPATH and must not set it themselves."""
import glob
import os
import sys

_TREE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python")
if glob.glob(os.path.join(_TREE, "autotile", "_core*.so")):
    sys.path.insert(0, _TREE)
    # Subprocesses started by tests (benchmarks, mpirun) import the same package.
    os.environ["PYTHONPATH"] = _TREE + os.pathsep + os.environ.get("PYTHONPATH", "")
