"""Logical ops on 0/1 (zero = false) data: isnan, logical_not, and the broadcasting
broadcast_logical_and/or/xor. Outputs keep the (first) input's dtype with values 0/1
(MXNet's convention); none has a gradient."""
from __future__ import annotations

import numpy as np

from ._ew_util import register_unary_without_gradient
from .compare import register_predicates

_UNARY = {
    "isnan": (np.isnan, "1 where an element is NaN else 0, in the input's dtype."),
    "logical_not": (np.logical_not, "1 where an element is zero else 0, in the input's dtype."),
}

register_unary_without_gradient(_UNARY)

register_predicates({
    "broadcast_logical_and": np.logical_and,
    "broadcast_logical_or": np.logical_or,
    "broadcast_logical_xor": np.logical_xor,
}, "Logical {} of lhs and rhs (nonzero = true) as 0/1 in lhs's dtype (NumPy broadcasting).")
