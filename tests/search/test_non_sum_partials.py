"""The search never splits a reduction whose partials need a max, min or product: the
execution graph only sums partials and refuses such plans, so every planner's plan must
lower (a random-graph fuzz seed found the model-parallel baseline splitting a max)."""
import pytest

from autotile import _core


def _max_graph(reducer: str, rows: int = 8):
    g = _core.Graph()
    x = g.add_tensor("x", (rows, 64))
    w = g.add_tensor("w", (64,), is_param=True)
    y = g.add_tensor("y", (rows,))
    g.add_node("red", "Reduce", [x, w], [y], f"x, w -> y: y[i] = {reducer}(k) {{ x[i, k] * w[k] }}")
    return g


@pytest.mark.parametrize("reducer", ["max", "min", "prod"])
@pytest.mark.parametrize("algorithm", ["tofu", "model", "allrow", "spartan", "owt"])
@pytest.mark.parametrize("devices", [2, 4])
def test_plans_of_non_sum_reductions_lower(reducer, algorithm, devices):
    g = _max_graph(reducer)
    plan = _core.plan_graph(g, devices, algorithm, None, True, None, None)
    assert all(s != "k" for s in plan["node_strategies"][0]), plan["node_strategies"]
    eg = _core.build_exec_graph(g, plan["factors"], plan["tensor_tilings"], plan["node_strategies"], True)
    assert eg.devices == devices


def test_sum_reductions_still_split():
    """With one row only the reduction can split the weight: a sum does, a max may not."""
    plan = _core.plan_graph(_max_graph("sum", rows=1), 4, "model", None, True, None, None)
    assert "k" in plan["node_strategies"][0]
    plan = _core.plan_graph(_max_graph("max", rows=1), 4, "model", None, True, None, None)
    assert "k" not in plan["node_strategies"][0]
