# Shared declarations: STL types and the translation of core errors into autotile.Error.
from libcpp.string cimport string
from libcpp.vector cimport vector
from libcpp.map cimport map as cmap
from libcpp.pair cimport pair
from libcpp cimport bool as cbool
from libc.stdint cimport int32_t, int64_t, uint8_t

from autotile.errors import Error as _AutotileError


cdef extern from "util/error.h" namespace "autotile":
    cdef cppclass CoreError "autotile::Error":
        const char* what()


cdef inline string _s(object text):
    try:
        return str(text).encode("utf-8")
    except UnicodeEncodeError as e:  # lone surrogates: bad input, reported as such
        raise _AutotileError(f"{str(text)!r} is not valid text ({e.reason})") from None


cdef inline str _u(string text):
    return text.decode("utf-8", "replace")


def _raise_core(exc):
    """Re-raise a RuntimeError coming out of the core as autotile.Error."""
    raise _AutotileError(str(exc)) from None
