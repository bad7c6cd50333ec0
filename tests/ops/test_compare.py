import itertools
import operator

import numpy as np
import pytest

import autotile as at
from gradcheck import analytic_gradient, forward, single_op
from tdl_op_checks import check_tdl

ORACLES = {
    "broadcast_equal": operator.eq,
    "broadcast_not_equal": operator.ne,
    "broadcast_lesser": operator.lt,
    "broadcast_lesser_equal": operator.le,
    "broadcast_greater": operator.gt,
    "broadcast_greater_equal": operator.ge,
}
SHAPES = [((2, 3, 4), (3, 1)), ((2, 1, 4), (1, 3, 1)), ((4,), (2, 3, 4)), ((2, 3), (2, 3))]


def _operands(lshape, rshape, seed):
    # small integers so that equal values (ties) occur
    rng = np.random.default_rng(seed)
    return rng.integers(-2, 3, lshape).astype(np.float64), rng.integers(-2, 3, rshape).astype(np.float64)


def _naive(fn, a, b):
    """Element by element with explicit index arithmetic (independent of NumPy broadcasting)."""
    rank = max(a.ndim, b.ndim)
    a2, b2 = a.reshape((1,) * (rank - a.ndim) + a.shape), b.reshape((1,) * (rank - b.ndim) + b.shape)
    shape = tuple(max(x, y) for x, y in zip(a2.shape, b2.shape))
    out = np.zeros(shape)
    for idx in np.ndindex(*shape):
        ia = tuple(i if n > 1 else 0 for i, n in zip(idx, a2.shape))
        ib = tuple(i if n > 1 else 0 for i, n in zip(idx, b2.shape))
        out[idx] = 1.0 if fn(a2[ia], b2[ib]) else 0.0
    return out


@pytest.mark.parametrize("op,shapes", list(itertools.product(sorted(ORACLES), SHAPES)))
def test_forward_matches_naive_loop(op, shapes):
    a, b = _operands(*shapes, 0)
    (y,) = forward(single_op(op, ["lhs", "rhs"]), {"lhs": a, "rhs": b})
    np.testing.assert_array_equal(y, _naive(ORACLES[op], a, b))


@pytest.mark.parametrize("op", sorted(ORACLES))
def test_output_has_lhs_dtype_and_no_gradient(op):
    a, b = _operands((2, 3), (3,), 1)
    sym = single_op(op, ["lhs", "rhs"])
    (y,) = forward(sym, {"lhs": a.astype(np.float32), "rhs": b.astype(np.float32)})
    assert y.dtype == np.float32 and set(np.unique(y)) <= {0.0, 1.0}
    assert sym.infer_type(lhs="float32", rhs="float32")[1] == ["float32"]
    assert analytic_gradient(sym, {"lhs": a, "rhs": b}, [np.ones((2, 3))]) == [None, None]


def test_incompatible_shapes_name_node_op_and_shapes():
    x, y = at.sym.Variable("x"), at.sym.Variable("y")
    with pytest.raises(at.Error) as e:
        at.sym.broadcast_lesser(x, y, name="mask").infer_shape(x=(2, 3), y=(4, 3))
    msg = str(e.value)
    assert "mask" in msg and "broadcast_lesser" in msg and "(2, 3)" in msg and "(4, 3)" in msg


@pytest.mark.parametrize("op", sorted(ORACLES))
@pytest.mark.parametrize("shapes", [((6, 12), (6, 12)), ((2, 6, 12), (6, 1))])
def test_tdl(op, shapes):
    a, b = _operands(*shapes, 2)
    ints = {i: (lambda r, s: r.integers(-2, 3, s).astype(np.float64)) for i in (0, 1)}
    check_tdl(op, [a, b], perturb=ints)
