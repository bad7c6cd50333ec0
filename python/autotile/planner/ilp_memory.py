"""The exact memory-constrained plan, to measure the memory-aware search against.

The memory-aware search (planner/memory_fit.py) prices ``w x (bytes each device holds)`` in
the DP and searches the multiplier ``w``: a Lagrangian method, greedy across cuts. The quantity
an integer program can hold exactly is the same linear one: the bytes each device holds of
all tensors together, a tensor split at a cut of k devices holding 1/k, replicated or partial
holding all of it (summed over every tensor, not only those live at once: the execution
graph's arena, which the budget is checked on, depends on liveness and placement and is not
linear in the layouts). :func:`constrained_optimum` solves the joint program of all cuts
(planner/ilp_joint.py) with that sum bounded, i.e. the least communication of any plan
holding at most the bound; planner/memory_fit.search_weights with :func:`held_bytes` as its
measure is what the memory-aware search returns against the same bound. The bench (`autotile bench memory-ilp`) compares them.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np

from .ilp_joint import joint_optimum
from .memory_fit import tensor_bytes  # noqa: F401  (bytes of every tensor, by id)


def held_fraction(tilings: Sequence[str], factors: Sequence[int]) -> float:
    """Fraction of a tensor one device holds under its tiling per cut ('split(i)' keeps 1/k
    of the cut's k devices' share; 'replicate' and partial sums keep all of it)."""
    frac = 1.0
    for tiling, k in zip(tilings, factors):
        if tiling.startswith("split"):
            frac /= k
    return frac


def held_bytes(tensor_tilings: Sequence[Sequence[str]], factors: Sequence[int], nbytes: np.ndarray) -> float:
    """Bytes each device holds of all tensors together under a plan's tilings (per tensor id)."""
    return float(sum(b * held_fraction(t, factors) for t, b in zip(tensor_tilings, nbytes)))


def held_weights(problem: dict, nbytes: np.ndarray) -> List[np.ndarray]:
    """Per variable of a joint problem, the bytes a device holds of its tensors for each value."""
    weights = [np.zeros(d) for d in problem["domain"]]
    for t, v in enumerate(problem["tensor_var"]):
        if v < 0:
            continue
        for a, tilings in enumerate(problem["tensor_values"][v]):
            weights[v][a] += nbytes[t] * held_fraction(tilings, problem["factors"])
    return weights


def constrained_optimum(core, devices: int, nbytes: np.ndarray, bound: float, replicate_fallback: bool = False,
                        time_limit: Optional[float] = None) -> dict:
    """The joint optimum (planner/ilp_joint.joint_optimum's dict) among plans whose devices
    hold at most `bound` bytes each, with ``held_bytes`` added. Error when none does."""
    j = joint_optimum(core, devices, replicate_fallback=replicate_fallback, time_limit=time_limit,
                      at_most=lambda problem: (held_weights(problem, nbytes), bound))
    j["held_bytes"] = held_bytes(j["tensor_tilings"], j["factors"], nbytes)
    return j
