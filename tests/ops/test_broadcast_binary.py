import itertools

import numpy as np
import pytest

import autotile as at
from autotile.ops.grad import GradContext
from autotile.symbol.symbol import Symbol
from gradcheck import check_gradient, forward, single_op

OPS = {
    "broadcast_add": lambda a, b: a + b,
    "broadcast_sub": lambda a, b: a - b,
    "broadcast_mul": lambda a, b: a * b,
    "broadcast_div": lambda a, b: a / b,
    "broadcast_maximum": lambda a, b: np.where(a >= b, a, b),
    "broadcast_minimum": lambda a, b: np.where(a <= b, a, b),
    "broadcast_power": lambda a, b: np.exp(b * np.log(a)),
}
SHAPES = [((2, 3, 4), (3, 1)), ((2, 1, 4), (1, 3, 1)), ((4,), (2, 3, 4)), ((2, 3), (2, 3)), ((1,), (2, 2))]


def _operands(op, lshape, rshape, seed):
    rng = np.random.default_rng(seed)
    if op == "broadcast_power":
        return rng.uniform(0.5, 2.0, lshape), rng.uniform(-1.5, 1.5, rshape)
    if op in ("broadcast_maximum", "broadcast_minimum"):
        # distinct values so no tie sits within finite-difference reach
        vals = rng.permutation(np.prod(lshape) + np.prod(rshape)) * 0.1
        return vals[:np.prod(lshape)].reshape(lshape), vals[np.prod(lshape):].reshape(rshape)
    return rng.standard_normal(lshape), rng.uniform(0.5, 2.0, rshape)


def _naive_broadcast_shape(a, b):
    rank = max(len(a), len(b))
    a, b = (1,) * (rank - len(a)) + a, (1,) * (rank - len(b)) + b
    return tuple(max(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("op,shapes", list(itertools.product(sorted(OPS), SHAPES)))
def test_forward_matches_numpy(op, shapes):
    a, b = _operands(op, *shapes, 0)
    (y,) = forward(single_op(op, ["lhs", "rhs"]), {"lhs": a, "rhs": b})
    assert y.shape == _naive_broadcast_shape(*shapes)
    np.testing.assert_allclose(y, OPS[op](a, b), rtol=1e-12)


@pytest.mark.parametrize("op,shapes", list(itertools.product(sorted(OPS), SHAPES[:3])))
def test_gradient_sums_over_broadcast_dims(op, shapes):
    a, b = _operands(op, *shapes, 1)
    check_gradient(op, {"lhs": a, "rhs": b})


def test_gradient_without_shapes_in_context_uses_like_input():
    # An autodiff that passes no shapes still gets correctly reduced gradients.
    from autotile.backend.reference import execute

    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((3, 1))
    lhs, rhs = at.sym.Variable("lhs"), at.sym.Variable("rhs")
    net = at.sym.broadcast_mul(lhs, rhs, name="m")
    node = net.entries[0][0]
    dy = at.sym.Variable("dy")
    ctx = GradContext(name="m", attrs={}, raw_attrs={}, inputs=[lhs, rhs], outputs=[net], out_grads=[dy])
    glhs, grhs = node.opdef().gradient(ctx)
    g = rng.standard_normal((2, 3, 4))
    vals = {"lhs": a, "rhs": b, "dy": g}
    got_l = execute(glhs, {k: v for k, v in vals.items() if k in glhs.list_inputs()})[0][0]
    got_r = execute(grhs, {k: v for k, v in vals.items() if k in grhs.list_inputs()})[0][0]
    np.testing.assert_allclose(got_l, g * b)
    np.testing.assert_allclose(got_r, (g * a).sum(axis=(0, 2)).reshape(3, 1))


def test_maximum_ties_go_to_lhs_like_mxnet():
    from gradcheck import analytic_gradient

    a, b = np.array([[1.0, 2.0, 3.0]]), np.array([[2.0], [1.0]])
    sym = single_op("broadcast_maximum", ["lhs", "rhs"])
    gl, gr = analytic_gradient(sym, {"lhs": a, "rhs": b}, [np.ones((2, 3))])
    np.testing.assert_array_equal(gl, [[1.0, 2.0, 2.0]])  # (1 vs 2: rhs), (2 vs 2: tie -> lhs)
    np.testing.assert_array_equal(gr, [[1.0], [0.0]])


@pytest.mark.parametrize("lshape,rshape", [((2, 3), (3, 2)), ((4, 5), (2, 5)), ((2, 3, 4), (3, 5))])
def test_incompatible_shapes_name_node_and_shapes(lshape, rshape):
    x, y = at.sym.Variable("x"), at.sym.Variable("y")
    with pytest.raises(at.Error) as e:
        at.sym.broadcast_add(x, y, name="bc").infer_shape(x=lshape, y=rshape)
    msg = str(e.value)
    assert "bc" in msg and "broadcast_add" in msg and str(lshape) in msg and str(rshape) in msg


def test_reduce_op_shapes_and_values():
    rng = np.random.default_rng(4)
    dy = rng.standard_normal((2, 3, 4))
    (y,) = forward(single_op("_backward_broadcast_reduce", ["dy"], shape=(3, 1)), {"dy": dy})
    naive = np.zeros((3, 1))
    for i, j, k in np.ndindex(2, 3, 4):
        naive[j, 0] += dy[i, j, k]
    np.testing.assert_allclose(y, naive)
    with pytest.raises(at.Error) as e:
        single_op("_backward_broadcast_reduce", ["dy"], shape=(2, 4)).infer_shape(dy=(2, 3, 4))
    assert "(2, 3, 4)" in str(e.value) and "(2, 4)" in str(e.value)


def test_aliases():
    assert at.ops.get("broadcast_plus") is at.ops.get("broadcast_add")
    assert at.ops.get("broadcast_minus") is at.ops.get("broadcast_sub")


def test_symbol_shape_inference():
    x, y = at.sym.Variable("x"), at.sym.Variable("y")
    _, outs, _ = at.sym.broadcast_div(x, y).infer_shape(x=(5, 1, 3), y=(4, 1))
    assert outs == [(5, 4, 3)]
    assert isinstance(at.sym.broadcast_div(x, y), Symbol)
