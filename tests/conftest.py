"""Test setup: use the in-tree package when a development build put _core next to it
(cmake -S . -B build && cmake --build build), else the installed package."""
import glob
import os
import sys

_TREE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python")
if glob.glob(os.path.join(_TREE, "autotile", "_core*.so")):
    sys.path.insert(0, _TREE)
