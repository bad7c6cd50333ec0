"""Piecewise-constant element-wise ops: sign, floor, ceil. Their derivative is zero wherever
it exists, so no gradient flows through them (MXNet's backward gives zeros)."""
from __future__ import annotations

import numpy as np

from ._ew_util import register_unary_without_gradient

_ROUNDING = {
    "sign": (np.sign, "-1, 0 or 1 by the sign of each element (0 for 0)."),
    "floor": (np.floor, "Largest integer not above each element."),
    "ceil": (np.ceil, "Smallest integer not below each element."),
}

register_unary_without_gradient(_ROUNDING)
