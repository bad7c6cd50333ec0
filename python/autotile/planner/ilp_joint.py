"""The exact optimum of a whole k-cut plan: one integer program over all cuts at once.

The recursive search makes its cuts one after another, each optimal given the earlier ones
(planner/ilp.py checks that per cut). Its final cost is a sum over graph edges of the bytes
that turn a tensor's layout over *all* cuts into what a node's strategies over all cuts read
or write (csrc/search/search_state.cc), so the whole plan has the same pairwise form as one
cut, with a tensor's variable ranging over its sequences of tilings and a node's options over
its sequences of strategies (csrc/search/joint_problem.h builds it). ``ilp.solve_cut`` solves
that program; its optimum is the true k-cut optimum of the cost model, against which the
recursion is measured. The domains grow as (rank + 2)^cuts per tensor, so this is for small
graphs and few cuts (4 and 8 devices), with a time limit whose optimality gap is reported.

Its constraints are the search's: tensors the coarsening ties (an updated weight and the
weight, element-wise chains; ties from the first cut's element-wise flags) take one tiling
sequence, merged timesteps one strategy sequence. Every plan the recursion can return is
therefore a solution of the program: tofu's cost is never below the joint optimum.
"""
from __future__ import annotations

import time
from typing import Optional

import numpy as np

from .. import _core
from ..errors import Error
from .ilp import solve_cut


def joint_optimum(core, devices: int, factors=None, replicate_fallback: bool = False, strategy_provider=None,
                  time_limit: Optional[float] = None, max_values: int = 4096, at_most=None) -> dict:
    """Solve all cuts of planning the core graph `core` on `devices` devices at once.

    Returns a dict: ``total_bytes`` (the plan's bytes per step, priced back by the core's
    ``price_plan``), ``lower_bound`` (bytes no plan goes below: the optimum when ``optimal``,
    else HiGHS's dual bound), ``optimal``, ``gap``, ``seconds`` (building and solving),
    ``columns``/``rows`` of the program, ``factors``, and the plan as ``tensor_tilings`` /
    ``node_strategies`` (per id, one entry per cut). Error when the program is too large to
    build (``max_values`` sequences per tensor or node) or has no solution. With `at_most`, a
    function of the joint problem (the dict of ``_core.joint_problem``) returning
    ``(weights, bound)``, one weight array per variable with one entry per value, only plans
    whose weights sum to at most `bound` count (planner/ilp_memory.py: bytes a device holds)."""
    t0 = time.perf_counter()
    kw = dict(replicate_fallback=replicate_fallback, strategy_provider=strategy_provider, factors=factors)
    problem = _core.joint_problem(core, devices, max_values=max_values, **kw)
    if not problem["factors"]:
        return {"total_bytes": 0.0, "lower_bound": 0.0, "optimal": True, "gap": 0.0,
                "seconds": time.perf_counter() - t0, "columns": 0, "rows": 0, "factors": [],
                "tensor_tilings": [[] for _ in problem["tensor_var"]], "node_strategies": [[] for _ in problem["edges"]]}
    stats: dict = {}
    values = solve_cut(problem, time_limit, stats, at_most(problem) if at_most is not None else None)
    tilings = [problem["tensor_values"][v][values[v]] for v in problem["tensor_var"]]
    strategies, total = [], 0.0
    for n, edges in enumerate(problem["edges"]):
        # the node's cheapest strategy sequence given its tensors' layouts
        cost = np.zeros(problem["num_options"][n])
        for v, c in edges:
            cost = cost + np.asarray(c)[:, values[v]]
        shared = problem["node_var"][n]
        if shared >= 0:  # merged timesteps: the shared variable decides the option
            only = problem["node_var_option"][n][values[shared]]
            cost = np.where(np.arange(len(cost)) == only, cost, np.inf)
        o = int(np.argmin(cost))
        if not np.isfinite(cost[o]):
            raise Error(f"joint program: node {n} has no feasible strategy under the solution ({stats.get('message')})")
        strategies.append(problem["node_values"][n][o])
        total += float(cost[o])
    priced = _core.price_plan(core, devices, tilings, strategies, **kw)["total_bytes"]
    if not np.isclose(priced, total, rtol=1e-9, atol=1e-6):
        raise Error(f"internal: the joint program's plan costs {total} bytes but prices at {priced}")
    optimal = stats["status"] == 0
    gap = 0.0 if optimal else float(stats.get("gap") or 0.0)
    return {"total_bytes": priced, "lower_bound": priced if optimal else priced * (1.0 - gap), "optimal": optimal,
            "gap": gap, "seconds": time.perf_counter() - t0, "solve_seconds": stats["seconds"],
            "columns": stats["columns"], "rows": stats["rows"], "factors": problem["factors"],
            "tensor_tilings": tilings, "node_strategies": strategies}
