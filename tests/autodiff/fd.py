"""Finite-difference oracle for whole-model gradients: central differences of a scalar loss
that the test writes explicitly from the forward pass (float64)."""
from __future__ import annotations

from typing import Callable, Dict

import numpy as np

from autotile.backend.reference import execute


def forward_outputs(sym, values, is_train=True):
    outs, _, _ = execute(sym, values, is_train=is_train, rng=np.random.default_rng(0))
    return outs


def numeric_grad(loss: Callable[[Dict[str, np.ndarray]], float], values: Dict[str, np.ndarray], wrt: str,
                 eps: float = 1e-5, max_entries: int = 40, seed: int = 0):
    """(indices, d loss / d values[wrt] at those flat indices); at most `max_entries` random
    entries are probed so large weights stay cheap."""
    vals = {k: v.copy() for k, v in values.items()}
    flat = vals[wrt].reshape(-1)
    rng = np.random.default_rng(seed)
    idx = np.arange(flat.size) if flat.size <= max_entries else rng.choice(flat.size, max_entries, replace=False)
    out = np.empty(len(idx))
    for n, j in enumerate(idx):
        old = flat[j]
        flat[j] = old + eps
        plus = loss(vals)
        flat[j] = old - eps
        minus = loss(vals)
        flat[j] = old
        out[n] = (plus - minus) / (2 * eps)
    return idx, out


def check_grads(loss, values, grads, names, rtol=1e-5, atol=1e-7, eps=1e-5):
    """Asserts grads[name] equals finite differences of `loss` for every name in `names`."""
    for name in names:
        idx, num = numeric_grad(loss, values, name, eps=eps)
        got = np.asarray(grads[name]).reshape(-1)[idx]
        np.testing.assert_allclose(got, num, rtol=rtol, atol=atol, err_msg=f"gradient of '{name}'")


def random_values(sym, shapes, seed=0, scale=0.5, skip=()):
    """float64 random values for every input of `sym` given all input shapes."""
    rng = np.random.default_rng(seed)
    return {k: scale * rng.standard_normal(s) for k, s in shapes.items() if k not in skip}
