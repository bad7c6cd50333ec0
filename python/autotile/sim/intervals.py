"""Per-device time accounting of a simulated step (autotile.sim.simulator): the length of a
union of intervals and the time covered by some intervals and by none of others, computed
with NumPy but adding their terms one after another, left to right, as a plain loop does (so
the floats are those of the loop's ``total +=``)."""
from __future__ import annotations

import numpy as np


def running_sum(terms) -> float:
    """The terms added one after another, left to right (as a Python loop of ``+=`` does)."""
    total = 0.0
    for x in terms:
        total += x
    return total


def union_length(starts, ends) -> float:
    """Length of the union of the intervals [starts[i], ends[i]] (NumPy arrays): walked in
    (start, end) order, each adds what reaches past the furthest end before it."""
    if not len(starts):
        return 0.0
    order = np.lexsort((ends, starts))
    a, b = starts[order], ends[order]
    reach = np.empty_like(b)  # the furthest end before each interval
    reach[0] = -np.inf
    np.maximum.accumulate(b[:-1], out=reach[1:])
    past = b > reach
    return running_sum((b[past] - np.maximum(a[past], reach[past])).tolist())


def exposed_length(comm_starts, comm_ends, comp_starts, comp_ends) -> float:
    """Length of the time covered by comm intervals and by no compute interval: the gaps
    between consecutive interval ends or starts (in time order) during which at least one
    comm interval and no compute interval is open, added in time order."""
    if not len(comm_starts):
        return 0.0
    times = np.concatenate((comm_starts, comm_ends, comp_starts, comp_ends))
    nc, np_ = len(comm_starts), len(comp_starts)
    comm = np.concatenate((np.ones(nc, np.int64), np.full(nc, -1, np.int64), np.zeros(2 * np_, np.int64)))
    comp = np.concatenate((np.zeros(2 * nc, np.int64), np.ones(np_, np.int64), np.full(np_, -1, np.int64)))
    order = np.argsort(times, kind="stable")  # events at one time add nothing between them
    t = times[order]
    open_comm = np.cumsum(comm[order])[:-1]  # after the events before each gap's end
    open_comp = np.cumsum(comp[order])[:-1]
    return running_sum((t[1:] - t[:-1])[(open_comm > 0) & (open_comp == 0)].tolist())
