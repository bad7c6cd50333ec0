"""Checks of the arguments of ``plan``, ``transform`` and ``run``: a wrong type or value gets
an :class:`~autotile.errors.Error` naming the argument, before it reaches code deep inside."""
from __future__ import annotations

import math
import numbers
from typing import Dict, Optional

import numpy as np

from .errors import Error

#: The largest integer magnitude each float dtype holds exactly (2^mantissa bits + 1).
_EXACT_INT = {"float16": 2 ** 11, "float32": 2 ** 24, "float64": 2 ** 53}


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def check_shapes(shapes, what: str = "shapes") -> Optional[Dict[str, tuple]]:
    """`shapes` as {input name: tuple of non-negative ints}; an Error names the input whose
    shape is not a sequence of integers (8.5 is refused, not truncated to 8)."""
    if shapes is None:
        return None
    if not isinstance(shapes, dict):
        raise Error(f"{what} must be a dict {{input name: shape tuple}}, got {type(shapes).__name__}")
    result = {}
    for name, shape in shapes.items():
        if not isinstance(name, str):
            raise Error(f"{what} keys must be input names (str), got {name!r}")
        if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
            raise Error(f"{what}['{name}'] must be a tuple of integers, got {shape!r}")
        dims = tuple(shape)
        bad = [d for d in dims if not _is_int(d) or d < 0]
        if bad:
            raise Error(f"{what}['{name}'] = {dims!r}: dimension {bad[0]!r} is not a non-negative integer")
        result[name] = tuple(int(d) for d in dims)
    return result


def check_bandwidths(bandwidths, what: str = "bandwidths"):
    """`bandwidths` as a list of positive finite numbers (bytes/s, one per cut) or a dict of
    them by mesh axis name."""
    if bandwidths is None:
        return None

    def number(key, v):
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or v <= 0:
            raise Error(f"{what}[{key!r}] must be a positive number of bytes/s, got {v!r}")
        return float(v)

    if isinstance(bandwidths, dict):
        return {k: number(k, v) for k, v in bandwidths.items()}
    if isinstance(bandwidths, (str, bytes)) or not hasattr(bandwidths, "__iter__"):
        raise Error(f"{what} must be a list of bytes/s (one per cut) or a dict by mesh axis, "
                    f"got {type(bandwidths).__name__}")
    return [number(i, v) for i, v in enumerate(bandwidths)]


def check_seed(seed, what: str = "seed") -> int:
    """`seed` as a non-negative integer (NumPy's generators take no negative seed)."""
    if not _is_int(seed) or seed < 0:
        raise Error(f"{what} must be a non-negative integer, got {seed!r}")
    return int(seed)


def check_flag(value, what: str) -> bool:
    """`value` as a bool: True, False or a NumPy bool (a string such as "no" is truthy, and
    would silently mean True)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise Error(f"{what} must be True or False, got {value!r}")


def check_arrays(values, what: str) -> Optional[Dict[str, object]]:
    """`values` (params, inputs, aux, states) as a dict {name: array}."""
    if values is None:
        return None
    if not isinstance(values, dict):
        raise Error(f"{what} must be a dict {{name: array}}, got {type(values).__name__}")
    bad = [k for k in values if not isinstance(k, str)]
    if bad:
        raise Error(f"{what} keys must be names (str), got {bad[0]!r}")
    return values


def check_plan(plan, what: str = "plan"):
    """`plan` must be a :class:`~autotile.planner.plan.Plan` (from ``autotile.plan`` or
    ``Plan.from_json``)."""
    from .planner.plan import Plan

    if not isinstance(plan, Plan):
        raise Error(f"{what} must be a Plan (from autotile.plan or Plan.from_json), got {type(plan).__name__}")
    plan.validate()
    return plan


def cast_inputs(sym, values: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Integer and boolean inputs cast to the dtype the model declares for them (float32
    unless a Variable's ``__dtype__`` says otherwise), so every device count computes on the
    same numbers. Inputs declared integer (token ids) stay integer; an integer a float dtype
    cannot hold exactly (> 2^24 for float32) is refused naming the input."""
    from .ops.gather import check_index_inputs, first_non_integer
    from .symbol.infer import infer_entry_types

    for name, v in values.items():  # strings or objects would fail (or turn NaN) deep in a kernel
        kind = np.asarray(v).dtype.kind
        if kind not in "biufc":
            raise Error(f"input '{name}' holds {np.asarray(v).dtype} data, not numbers: pass a numeric array")
    check_index_inputs(sym, values)
    todo = [n for n in values if np.asarray(values[n]).dtype.kind in "biuf"]
    if not todo:
        return values
    types = infer_entry_types(sym, {})
    declared = {n.name: types.get((id(n), 0), "float32") for n in sym.topo_nodes() if n.is_variable}
    result = dict(values)
    for name in todo:
        value = np.asarray(values[name])
        target = np.dtype(declared.get(name, "float32"))
        if target.kind in "iub":
            bad = first_non_integer(value)  # token ids given as floats: 3.5 is not an id
            if bad is not None:
                raise Error(f"input '{name}' is declared {target.name} but holds {bad}, which is not an integer")
            if value.size and target.kind in "iu" and value.dtype.kind in "iuf":
                info = np.iinfo(target)
                lo, hi = value.min().item(), value.max().item()  # Python numbers: exact comparisons
                if lo < info.min or hi > info.max:
                    raise Error(f"input '{name}' holds {lo if lo < info.min else hi}, outside the range of its "
                                f"declared dtype {target.name}")
            result[name] = value.astype(target)
            continue
        if value.dtype.kind == "f":
            continue  # float data for a float input: as given
        limit = _EXACT_INT.get(target.name)
        if limit is not None and value.size and value.dtype.kind in "iu":
            largest = max(abs(int(value.min())), abs(int(value.max())))
            if largest > limit:
                raise Error(f"input '{name}' holds the integer {largest}, which {target.name} (the dtype the model "
                            f"declares for it) cannot hold exactly (limit 2^{int(math.log2(limit))}): "
                            f"cast it yourself or declare the input integer")
        result[name] = value.astype(target)
    return result
