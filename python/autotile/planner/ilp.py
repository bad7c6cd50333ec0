"""The exact optimum of one cut as an integer program (HiGHS through scipy.optimize.milp).

The core hands each cut's problem over as plain data (csrc/search/external_solver.h): tensor
tiling variables with their domains, and per node its options (strategies) and edges, each a
cost matrix ``C[option][value]`` of one variable (the bytes the node moves to convert that
tensor's tiling into what the option needs; infinity = not allowed). A node's cost is the
cost of its chosen option summed over its edges, so the cut's cost is

    min  sum_n sum_e C_ne[o_n][x_v(e)]

over one value per variable and one option per node. As an integer program (the form Alpa
and PyTorch's autoparallel use): binaries ``x[v, a]`` (variable v takes value a) and
``y[n, o]`` (node n runs option o), each summing to one; per edge a continuous ``z[n, e, o, a]``
whose marginals are ``y[n, o]`` and ``x[v, a]`` (the local-polytope linearisation of the
product, exact when x and y are integral); forbidden pairs have ``z = 0``. A node that shares a
strategy variable (merged RNN steps) has ``y`` given by that variable's values. Edges whose
costs do not depend on the option go straight onto ``x``, and nodes with a single option have
no ``y``, which keeps the program small.
"""
from __future__ import annotations

import time
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import Error


class _Builder:
    """Columns (variables) and rows (equalities) of the program, added as they are met."""

    def __init__(self):
        self.cost: List[float] = []
        self.ub: List[float] = []
        self.integral: List[int] = []
        self.rows: List[int] = []
        self.cols: List[int] = []
        self.vals: List[float] = []
        self.rhs: List[float] = []

    def add(self, n: int, integral: bool, ub: Optional[np.ndarray] = None) -> np.ndarray:
        start = len(self.cost)
        self.cost.extend([0.0] * n)
        self.ub.extend([1.0] * n if ub is None else list(ub))
        self.integral.extend([1 if integral else 0] * n)
        return np.arange(start, start + n)

    def equal(self, terms: Dict[int, float], rhs: float):
        r = len(self.rhs)
        for c, v in terms.items():
            self.rows.append(r)
            self.cols.append(int(c))
            self.vals.append(v)
        self.rhs.append(rhs)


def solve_cut(problem: dict, time_limit: Optional[float] = None, stats: Optional[dict] = None,
              at_most: Optional[Tuple[Sequence[np.ndarray], float]] = None) -> List[int]:
    """Values of every variable of a cut problem (the dict the core passes, see
    ``autotile._core._cut_problem_dict``) at the program's optimum. With `time_limit` (s) the
    best solution found so far is returned and `stats` gets its optimality gap. With
    ``at_most=(weights, bound)`` the solution also keeps ``sum_v weights[v][value of v]`` at or
    below `bound` (planner/ilp_memory.py: bytes each device holds)."""
    try:
        from scipy.optimize import Bounds, LinearConstraint, milp
        from scipy.sparse import coo_array
    except ImportError as e:  # pragma: no cover - scipy is a dependency of the ilp algorithm
        raise Error(f"algorithm 'ilp' needs SciPy >= 1.9 (scipy.optimize.milp with HiGHS): {e}") from None
    t0 = time.perf_counter()
    domain = problem["domain"]
    b = _Builder()
    x = [b.add(d, True) for d in domain]
    for v, cols in enumerate(x):
        b.equal({c: 1.0 for c in cols}, 1.0)
    scale = 1.0 / 1e6  # bytes -> MB: keeps HiGHS's tolerances meaningful
    for n, edges in enumerate(problem["edges"]):
        num_opts = problem["num_options"][n]
        shared = problem["node_var"][n]
        if num_opts == 0:
            raise Error(f"cut {problem['cut'] + 1}: node {n} has no strategy")
        # y: option indicators as {column: coefficient} expressions
        if shared >= 0:
            y = [dict() for _ in range(num_opts)]
            for val, o in enumerate(problem["node_var_option"][n]):
                if o < 0:
                    b.ub[x[shared][val]] = 0.0
                else:
                    y[o][x[shared][val]] = 1.0
        elif num_opts == 1:
            y = None
        else:
            cols = b.add(num_opts, True)
            b.equal({c: 1.0 for c in cols}, 1.0)
            y = [{int(c): 1.0} for c in cols]
        for var, cost in edges:
            cost = np.asarray(cost, dtype=np.float64)
            forbidden = ~np.isfinite(cost)
            finite = np.where(forbidden, 0.0, cost) * scale
            if y is None or (np.all(finite == finite[:1]) and np.all(forbidden == forbidden[:1])):
                # the option does not matter for this edge (or there is one option)
                for val in range(domain[var]):
                    col = x[var][val]
                    if forbidden[0, val]:
                        b.ub[col] = 0.0
                    b.cost[col] += finite[0, val]
                continue
            z = b.add(num_opts * domain[var], False, ub=np.where(forbidden.ravel(), 0.0, 1.0))
            zz = z.reshape(num_opts, domain[var])
            for o in range(num_opts):
                for val in range(domain[var]):
                    b.cost[zz[o, val]] += finite[o, val]
                terms = {int(c): 1.0 for c in zz[o]}
                for c, coef in y[o].items():
                    terms[c] = terms.get(c, 0.0) - coef
                b.equal(terms, 0.0)
            for val in range(domain[var]):
                terms = {int(c): 1.0 for c in zz[:, val]}
                terms[int(x[var][val])] = terms.get(int(x[var][val]), 0.0) - 1.0
                b.equal(terms, 0.0)
    ncols, nrows = len(b.cost), len(b.rhs)
    A = coo_array((b.vals, (b.rows, b.cols)), shape=(nrows, ncols)).tocsr()
    options = {"mip_rel_gap": 1e-9}
    if time_limit is not None:
        options["time_limit"] = float(time_limit)
    constraints = [LinearConstraint(A, np.asarray(b.rhs), np.asarray(b.rhs))]
    if at_most is not None:
        weights, bound = at_most
        row = np.zeros(ncols)
        for cols, w in zip(x, weights):
            row[cols] = np.asarray(w, dtype=np.float64) * scale
        constraints.append(LinearConstraint(row[None, :], -np.inf, bound * scale))
    res = milp(c=np.asarray(b.cost), constraints=constraints,
               integrality=np.asarray(b.integral), bounds=Bounds(np.zeros(ncols), np.asarray(b.ub)), options=options)
    if res.x is None:
        raise Error(f"cut {problem['cut'] + 1}: the integer program has no solution ({res.message})")
    if stats is not None:
        stats.update(status=int(res.status), message=res.message, objective_bytes=float(res.fun) / scale,
                     gap=float(getattr(res, "mip_gap", 0.0) or 0.0), seconds=time.perf_counter() - t0,
                     columns=ncols, rows=nrows)
    return [int(np.argmax(res.x[cols])) for cols in x]


def make_cut_solver(time_limit: Optional[float] = None, log: Optional[list] = None):
    """A cut solver for the core (``_core.plan_graph(..., cut_solver=...)``); appends each cut's
    stats (status, gap, seconds, program size) to `log` when given."""

    def solve(problem):
        stats: dict = {"cut": int(problem["cut"])}
        values = solve_cut(problem, time_limit, stats)
        if log is not None:
            log.append(stats)
        return values

    return solve


#: Seconds the integer program may take on one cut that is too wide for the exact DP.
WIDE_CUT_SECONDS = 60.0


def wide_fallback(log: list, time_limit: float = WIDE_CUT_SECONDS):
    """The solver the search hands a cut whose exact DP table would be too large (a graph as
    wide as DenseNet's dense blocks): this integer program with a time limit, its stats
    (cut, status, gap) appended to `log`. None without SciPy (the DP's error then stands).

    SciPy is only looked up here, not imported: importing scipy.optimize costs 0.2-0.5 s (more
    on a loaded machine), paid by the first solve of a wide cut, never by a plain plan."""
    import importlib.util

    if importlib.util.find_spec("scipy") is None:
        return None
    return make_cut_solver(time_limit=time_limit, log=log)
