import numpy as np
import pytest

import autotile as at
from gradcheck import analytic_gradient, check_gradient, forward, single_op
from tdl_op_checks import check_tdl

SHAPES = [((2, 3, 4), (2, 3, 4), (2, 3, 4)), ((3, 1), (2, 3, 4), (4,)), ((2, 1, 4), (1, 3, 1), (3, 4)),
          ((4,), (2, 1, 1), (1, 3, 1))]


def _values(shapes, seed):
    rng = np.random.default_rng(seed)
    cond = rng.choice([0.0, 1.0, -2.0], size=shapes[0])
    return cond, rng.standard_normal(shapes[1]), rng.standard_normal(shapes[2])


@pytest.mark.parametrize("shapes", SHAPES)
def test_forward_matches_numpy_where(shapes):
    c, x, y = _values(shapes, 0)
    (out,) = forward(single_op("where", ["condition", "x", "y"]), {"condition": c, "x": x, "y": y})
    np.testing.assert_array_equal(out, np.where(c != 0, x, y))


@pytest.mark.parametrize("shapes", SHAPES)
def test_gradient_to_x_and_y_matches_finite_differences(shapes):
    c, x, y = _values(shapes, 1)
    check_gradient("where", {"condition": c, "x": x, "y": y}, wrt=["x", "y"])
    g = analytic_gradient(single_op("where", ["condition", "x", "y"]), {"condition": c, "x": x, "y": y},
                          [np.ones(np.broadcast_shapes(*shapes))])
    assert g[0] is None  # the condition gets no gradient


def test_boolean_condition_and_dtypes():
    c = np.array([[True, False, True]])
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.full((2, 3), -1.0, np.float32)
    (out,) = forward(single_op("where", ["condition", "x", "y"]), {"condition": c, "x": x, "y": y})
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [[0, -1, 2], [3, -1, 5]])
    sym = single_op("where", ["condition", "x", "y"])
    assert sym.infer_type(condition="bool", x="float32", y="float32")[1] == ["float32"]
    with pytest.raises(at.Error) as e:
        sym.infer_type(condition="float32", x="float32", y="float64")
    assert "where" in str(e.value) and "float64" in str(e.value)


def test_incompatible_shapes_name_node_and_all_three_shapes():
    c, x, y = (at.sym.Variable(n) for n in ("c", "x", "y"))
    with pytest.raises(at.Error) as e:
        at.sym.where(c, x, y, name="sel").infer_shape(c=(2, 3), x=(2, 3), y=(4, 3))
    msg = str(e.value)
    assert "sel" in msg and "where" in msg and "(2, 3)" in msg and "(4, 3)" in msg


COND = {0: lambda r, s: r.choice([0.0, 1.0], size=s)}


@pytest.mark.parametrize("shapes", [((6, 12), (6, 12), (6, 12)), ((6, 1), (2, 6, 12), (12,))])
def test_tdl(shapes):
    c, x, y = _values(shapes, 2)
    check_tdl("where", [c, x, y], perturb=COND)
    dy = np.random.default_rng(3).standard_normal(np.broadcast_shapes(*shapes))
    for branch in ("x", "y"):
        check_tdl("_backward_where", [dy, c], {"branch": branch}, perturb={1: COND[0]})
