import math

import numpy as np
import pytest

import autotile as at
from gradcheck import check_gradient, forward, single_op
from tdl_op_checks import check_tdl

SHAPES = [((2, 3, 4), (3, 1)), ((4,), (2, 3, 4)), ((2, 3), (2, 3))]


def _operands(lshape, rshape, seed):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-7.0, 7.0, lshape)
    b = rng.uniform(0.7, 2.5, rshape) * rng.choice([-1.0, 1.0], rshape)
    return a, b


def _away_from_jumps(a, b):
    """True when no a / b sits within finite-difference reach of an integer (mod jumps there)."""
    ab, bb = np.broadcast_arrays(a, b)
    q = ab / bb
    return bool(np.all(np.abs(q - np.round(q)) > 0.01))


@pytest.mark.parametrize("fmod", [False, True])
@pytest.mark.parametrize("shapes", SHAPES)
def test_forward_matches_python_math(fmod, shapes):
    a, b = _operands(*shapes, 0)
    (y,) = forward(single_op("broadcast_mod", ["lhs", "rhs"], fmod=fmod), {"lhs": a, "rhs": b})
    ab, bb = np.broadcast_arrays(a, b)
    fn = math.fmod if fmod else (lambda p, q: p % q)  # Python's % takes the sign of the divisor
    want = np.array([fn(p, q) for p, q in zip(ab.ravel(), bb.ravel())]).reshape(ab.shape)
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("fmod", [False, True])
@pytest.mark.parametrize("shapes", SHAPES)
def test_gradient_matches_finite_differences(fmod, shapes):
    for seed in range(1, 50):
        a, b = _operands(*shapes, seed)
        if _away_from_jumps(a, b):
            break
    check_gradient("broadcast_mod", {"lhs": a, "rhs": b}, {"fmod": fmod})


def test_float32_stays_float32():
    a, b = _operands((2, 3), (3,), 3)
    values = {"lhs": a.astype(np.float32), "rhs": b.astype(np.float32)}
    (y,) = forward(single_op("broadcast_mod", ["lhs", "rhs"]), values)
    assert y.dtype == np.float32


def test_incompatible_shapes_name_node_and_shapes():
    x, y = at.sym.Variable("x"), at.sym.Variable("y")
    with pytest.raises(at.Error) as e:
        at.sym.broadcast_mod(x, y, name="rem").infer_shape(x=(2, 3), y=(2,))
    assert "rem" in str(e.value) and "broadcast_mod" in str(e.value) and "(2, 3)" in str(e.value)


@pytest.mark.parametrize("fmod", [False, True])
def test_tdl(fmod):
    a, b = _operands((2, 6, 12), (6, 1), 4)
    check_tdl("broadcast_mod", [a, b], {"fmod": fmod})
    dy = np.random.default_rng(5).standard_normal((2, 6, 12))
    check_tdl("_backward_broadcast_mod_rhs", [dy, a, b], {"fmod": fmod})
