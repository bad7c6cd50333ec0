"""MXNet's dtype flags (mshadow TypeFlag) and NumPy dtypes: shared by the Symbol (a variable's
``__dtype__``) and ``.params`` files (each array's dtype), which need no other part of each other."""
from __future__ import annotations

from typing import Dict

import numpy as np

from .errors import Error

#: MXNet dtype flag (mshadow TypeFlag) -> NumPy dtype, little-endian.
DTYPE_OF_FLAG: Dict[int, np.dtype] = {
    0: np.dtype("<f4"), 1: np.dtype("<f8"), 2: np.dtype("<f2"), 3: np.dtype("u1"),
    4: np.dtype("<i4"), 5: np.dtype("i1"), 6: np.dtype("<i8"), 7: np.dtype("?"),
    8: np.dtype("<i2"), 9: np.dtype("<u2"), 10: np.dtype("<u4"), 11: np.dtype("<u8"),
}
#: native-order NumPy dtype -> MXNet dtype flag
FLAG_OF_DTYPE: Dict[np.dtype, int] = {d.newbyteorder("="): f for f, d in DTYPE_OF_FLAG.items()}


def dtype_name(text: str) -> str:
    """NumPy dtype name of a variable's ``__dtype__``: MXNet writes its type flag ("0" for
    float32); a NumPy name is accepted too."""
    text = str(text).strip()
    if text.lstrip("-").isdigit():
        flag = int(text)
        if flag not in DTYPE_OF_FLAG:
            raise Error(f"__dtype__ {text!r} is not an MXNet dtype flag")
        return DTYPE_OF_FLAG[flag].newbyteorder("=").name
    try:
        return np.dtype(text).name
    except TypeError:
        raise Error(f"__dtype__ {text!r} is not a dtype") from None


def flag_or_name(dtype) -> str:
    """A variable's ``__dtype__`` text for `dtype`: MXNet's flag where it has one, else the NumPy name."""
    dt = np.dtype(dtype)
    return str(FLAG_OF_DTYPE[dt]) if dt in FLAG_OF_DTYPE else dt.name


#: Mixed-precision compute dtypes ``backend.run(dtype=...)`` accepts besides float32.
LOW_PRECISION = ("bfloat16", "float16")


def bfloat16() -> np.dtype:
    """NumPy's bfloat16 dtype (from ``ml_dtypes``, which also registers the name "bfloat16"
    with NumPy); an Error naming the package when it is not installed."""
    try:
        import ml_dtypes
    except ImportError:
        raise Error("dtype 'bfloat16' needs the ml_dtypes package (NumPy has no bfloat16 type): "
                    "pip install ml_dtypes") from None
    return np.dtype(ml_dtypes.bfloat16)


def numpy_dtype(name) -> np.dtype:
    """``np.dtype(name)``, registering bfloat16 first when `name` is "bfloat16"."""
    if isinstance(name, str) and name == "bfloat16":
        return bfloat16()
    return np.dtype(name)


def is_bfloat16(dtype) -> bool:
    """Whether `dtype` (a NumPy dtype, or an array's) is bfloat16, without importing ml_dtypes."""
    return getattr(dtype, "name", None) == "bfloat16"
