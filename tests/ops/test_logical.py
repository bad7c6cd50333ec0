import itertools

import numpy as np
import pytest

import autotile as at
from gradcheck import analytic_gradient, forward, single_op
from tdl_op_checks import check_tdl

BINARY = {
    "broadcast_logical_and": lambda p, q: p and q,
    "broadcast_logical_or": lambda p, q: p or q,
    "broadcast_logical_xor": lambda p, q: p != q,
}
SHAPES = [((2, 3, 4), (3, 1)), ((4,), (2, 3, 4)), ((2, 3), (2, 3))]


def _truth(shape, seed):
    # zeros and nonzeros of both signs: nonzero is true
    return np.random.default_rng(seed).choice([0.0, 0.0, 1.0, -2.5], size=shape)


@pytest.mark.parametrize("op,shapes", list(itertools.product(sorted(BINARY), SHAPES)))
def test_binary_forward_matches_python_logic(op, shapes):
    a, b = _truth(shapes[0], 0), _truth(shapes[1], 1)
    (y,) = forward(single_op(op, ["lhs", "rhs"]), {"lhs": a, "rhs": b})
    ab, bb = np.broadcast_arrays(a, b)
    want = np.array([1.0 if BINARY[op](bool(p), bool(q)) else 0.0 for p, q in zip(ab.ravel(), bb.ravel())])
    np.testing.assert_array_equal(y, want.reshape(ab.shape))


def test_logical_not_and_isnan():
    x = np.array([[0.0, 1.0, -3.0], [np.nan, np.inf, -0.0]], np.float32)
    (y,) = forward(single_op("logical_not", ["data"]), {"data": x})
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, [[1, 0, 0], [0, 0, 1]])  # NaN is nonzero: true
    (y,) = forward(single_op("isnan", ["data"]), {"data": x})
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, [[0, 0, 0], [1, 0, 0]])


@pytest.mark.parametrize("op", ["isnan", "logical_not"])
def test_unary_no_gradient(op):
    x = _truth((2, 3), 2)
    assert analytic_gradient(single_op(op, ["data"]), {"data": x}, [np.ones((2, 3))]) == [None]


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_lhs_dtype_and_no_gradient(op):
    sym = single_op(op, ["lhs", "rhs"])
    assert sym.infer_type(lhs="float16", rhs="float16")[1] == ["float16"]
    a, b = _truth((2, 3), 3), _truth((3,), 4)
    assert analytic_gradient(sym, {"lhs": a, "rhs": b}, [np.ones((2, 3))]) == [None, None]


def test_incompatible_shapes_name_node_and_shapes():
    x, y = at.sym.Variable("x"), at.sym.Variable("y")
    with pytest.raises(at.Error) as e:
        at.sym.broadcast_logical_and(x, y, name="both").infer_shape(x=(2, 5), y=(3,))
    assert "both" in str(e.value) and "(2, 5)" in str(e.value) and "(3,)" in str(e.value)


TRUTH = {0: lambda r, s: r.choice([0.0, 1.0, -2.0], size=s), 1: lambda r, s: r.choice([0.0, 1.0, -2.0], size=s)}


@pytest.mark.parametrize("op", ["isnan", "logical_not"])
def test_unary_tdl(op):
    x = _truth((6, 12), 5)
    x[0, :3] = np.nan
    check_tdl(op, [x], perturb={0: TRUTH[0]})


@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("shapes", [((6, 12), (6, 12)), ((2, 6, 12), (12,))])
def test_binary_tdl(op, shapes):
    check_tdl(op, [_truth(shapes[0], 6), _truth(shapes[1], 7)], perturb=TRUTH)
