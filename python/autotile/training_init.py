"""Parameter initialisation as MXNet's ``Initializer`` does it: a parameter's name picks the rule.

``*_weight`` (and any other name not listed below) is drawn by the chosen initializer; ``*_bias``,
``*_beta`` and ``*_moving_mean`` start at 0; ``*_gamma`` and ``*_moving_var`` at 1. The default,
``xavier``, is ``mx.init.Xavier(rnd_type='uniform', factor_type='avg', magnitude=3)``: uniform on
[-s, s] with s = sqrt(3 / ((fan_in + fan_out) / 2)), fan_in = shape[1] * receptive field, fan_out =
shape[0] * receptive field (MXNet's initializer.py), so a layer's outputs keep the scale of its
inputs whatever its width. ``normal`` is ``mx.init.Normal(0.01)``, ``uniform`` ``mx.init.Uniform(0.07)``.
"""
from __future__ import annotations

from typing import Dict, Iterable, Mapping, Sequence, Tuple

import numpy as np

from .errors import Error

#: initializer names accepted by ``init_params`` (and ``--init``)
INITIALIZERS = ("xavier", "normal", "uniform")

#: name suffix -> constant value (MXNet's Initializer.__call__ dispatch)
_CONSTANTS = (("_bias", 0.0), ("_beta", 0.0), ("_moving_mean", 0.0), ("_moving_avg", 0.0),
              ("_gamma", 1.0), ("_moving_var", 1.0), ("_moving_inv_var", 0.0))


def xavier_scale(shape: Sequence[int], magnitude: float = 3.0) -> float:
    """Half-width of MXNet's uniform Xavier ('avg' factor) for a weight of `shape`."""
    shape = tuple(int(d) for d in shape)
    if len(shape) < 2:  # a vector weight (MXNet refuses these): fan_in = fan_out = its length
        fan_in = fan_out = max(1, shape[0] if shape else 1)
    else:
        receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
        fan_in, fan_out = shape[1] * receptive, shape[0] * receptive
    return float(np.sqrt(magnitude / ((fan_in + fan_out) / 2.0)))


def init_value(name: str, shape: Sequence[int], rng: np.random.Generator, init: str = "xavier") -> np.ndarray:
    """The initial float32 value of parameter `name` of `shape` (see the module docstring)."""
    if init not in INITIALIZERS:
        raise Error(f"unknown initializer '{init}' (known: {', '.join(INITIALIZERS)})")
    shape = tuple(int(d) for d in shape)
    for suffix, value in _CONSTANTS:
        if name.endswith(suffix):
            return np.full(shape, value, dtype=np.float32)
    if init == "xavier":
        s = xavier_scale(shape)
        return rng.uniform(-s, s, size=shape).astype(np.float32)
    if init == "normal":
        return (rng.standard_normal(shape) * 0.01).astype(np.float32)
    return rng.uniform(-0.07, 0.07, size=shape).astype(np.float32)


def init_params(shapes: Mapping[str, Sequence[int]], seed: int = 0, init: str = "xavier",
                skip: Iterable[str] = ()) -> Dict[str, np.ndarray]:
    """Initial values of the parameters ``{name: shape}`` (in the order given, one generator
    seeded with `seed`), leaving out the names in `skip`."""
    skip = set(skip)
    rng = np.random.default_rng(seed)
    return {n: init_value(n, s, rng, init) for n, s in shapes.items() if n not in skip}


def param_shapes(sym) -> Tuple[Dict[str, Tuple[int, ...]], Dict[str, Tuple[int, ...]]]:
    """({argument: shape}, {auxiliary state: shape}) of a Symbol whose inputs have their shapes
    set (a zoo model); Error naming an input whose shape cannot be inferred."""
    from .symbol.infer import infer_entry_shapes

    known = infer_entry_shapes(sym, {})
    shapes = {}
    for n in sym.topo_nodes():
        if n.is_variable:
            shape = known.get((id(n), 0))
            if shape is None:
                raise Error(f"cannot initialise: the shape of input '{n.name}' is unknown")
            shapes[n.name] = tuple(shape)
    aux_names = set(sym.list_auxiliary_states())
    return ({k: v for k, v in shapes.items() if k not in aux_names},
            {k: v for k, v in shapes.items() if k in aux_names})
