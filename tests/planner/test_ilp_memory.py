"""The exact memory-constrained plan (planner/ilp_memory.py, issue #15) and the memory-aware
search measured against it.

Oracles: brute force over every assignment of the joint problem's variables on a graph small
enough to enumerate (one FullyConnected layer's training step on 2 devices: 41472 plans), the
objective evaluated independently from the problem's edge tables (each node at its cheapest
option); the held bytes recomputed from the solution's tilings and the tensors' shapes; and
the DP itself: no plan the search returns at any memory weight holds at most the bound and
moves fewer bytes than the program's optimum."""
import itertools

import numpy as np
import pytest

import autotile as at
from autotile import _core
from autotile.planner import lowered_training_graph
from autotile.planner.ilp_joint import joint_optimum
from autotile.planner.ilp_memory import constrained_optimum, held_bytes, held_weights, tensor_bytes
from autotile.planner.memory_fit import search_weights

pytest.importorskip("scipy.optimize", reason="the integer program needs SciPy")


def one_layer():
    x = at.sym.Variable("data")
    h = at.sym.FullyConnected(x, num_hidden=6, name="fc")
    sym = at.sym.LinearRegressionOutput(h, name="out")
    return lowered_training_graph(sym, shapes={"data": (8, 12), "out_label": (8, 6)})[3]


def two_layers():
    x = at.sym.Variable("data")
    h = at.sym.FullyConnected(x, num_hidden=16, name="fc1")
    h = at.sym.Activation(h, act_type="relu", name="relu")
    h = at.sym.FullyConnected(h, num_hidden=8, name="fc2")
    sym = at.sym.LinearRegressionOutput(h, name="out")
    return lowered_training_graph(sym, shapes={"data": (32, 24), "out_label": (32, 8)})[3]


def brute_force(problem, weights):
    """(comm, held) of every assignment of the problem's variables, by enumeration."""
    assert all(v < 0 for v in problem["node_var"])  # no shared strategy variables here
    combos = np.array(list(itertools.product(*[range(d) for d in problem["domain"]])))
    comm = np.zeros(len(combos))
    for n, edges in enumerate(problem["edges"]):
        per_option = np.zeros((problem["num_options"][n], len(combos)))
        for v, cost in edges:
            per_option += np.asarray(cost, dtype=np.float64)[:, combos[:, v]]
        comm += per_option.min(axis=0)
    held = sum(np.asarray(w)[combos[:, v]] for v, w in enumerate(weights))
    return comm, held


def test_constrained_optimum_equals_brute_force():
    low = one_layer()
    nbytes = tensor_bytes(low)
    problem = _core.joint_problem(low.core, 2, max_values=4096)
    comm, held = brute_force(problem, held_weights(problem, nbytes))
    feasible = np.isfinite(comm)
    levels = sorted(set(np.round(held[feasible], 6)))
    assert len(levels) >= 3  # the bound really bites at several levels
    for bound in levels:
        want = comm[feasible & (held <= bound + 1e-6)].min()
        got = constrained_optimum(low.core, 2, nbytes, bound)
        assert got["optimal"]
        assert got["total_bytes"] == pytest.approx(want, rel=1e-9, abs=1e-6)
        # held bytes recomputed from the plan's tilings and the shapes
        again = sum(float(np.prod(s)) * 4 * (0.5 if t[0].startswith("split") else 1.0)
                    for s, t in zip(low.tensor_shapes, got["tensor_tilings"]))
        assert got["held_bytes"] == pytest.approx(again) and again <= bound + 1e-6


def test_below_every_plan_is_an_error():
    low = one_layer()
    nbytes = tensor_bytes(low)
    with pytest.raises(at.Error, match="no solution"):
        constrained_optimum(low.core, 2, nbytes, float(nbytes.sum()) / 2 * 0.5)


@pytest.mark.parametrize("devices", [2, 4])
def test_search_never_beats_the_constrained_optimum(devices):
    low = two_layers()
    nbytes = tensor_bytes(low)

    def search(w):
        return _core.plan_graph(low.core, devices, "tofu", None, False, memory_weight=w)

    def held(raw):
        return held_bytes(raw["tensor_tilings"], raw["factors"], nbytes)

    free = search(0.0)
    unbounded = joint_optimum(low.core, devices)
    assert constrained_optimum(low.core, devices, nbytes, held(free))["total_bytes"] <= free["total_bytes"] + 1e-6
    assert constrained_optimum(low.core, devices, nbytes, 1e18)["total_bytes"] == \
        pytest.approx(unbounded["total_bytes"], rel=1e-9, abs=1e-6)
    plans = [search(w) for w in [0.0] + [4.0 ** i / 64 for i in range(10)]]
    for raw in plans:
        bound = held(raw)
        exact = constrained_optimum(low.core, devices, nbytes, bound)
        assert exact["held_bytes"] <= bound + 1e-6
        assert exact["total_bytes"] <= raw["total_bytes"] + 1e-6
        found = search_weights(search, held, bound)
        assert found is not None and found[1] <= bound and found[0]["total_bytes"] >= exact["total_bytes"] - 1e-6


def test_the_memory_program_builds_on_the_joint_one():
    # issue 24: ilp_memory imports ilp_joint, and nothing in ilp_joint points back
    import ast
    import inspect

    from autotile.planner import ilp_joint, ilp_memory

    def imported(module):
        tree = ast.parse(inspect.getsource(module))
        return {(n.module or "").split(".")[-1] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | \
               {a.name.split(".")[-1] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}

    assert "ilp_joint" in imported(ilp_memory)
    assert "ilp_memory" not in imported(ilp_joint)
