# cython: language_level=3
# distutils: language = c++
"""Thin bindings over the C++ core (csrc/). Each .pxi under _bindings/ binds one part of it:
it declares the C++ externs and wraps them in small classes or functions that own their
lifetimes. C++ autotile::Error surfaces as autotile.errors.Error."""

include "common.pxi"
include "graph.pxi"
include "tdl.pxi"
include "search.pxi"
include "exec.pxi"
