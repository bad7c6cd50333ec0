import numpy as np
import pytest

import autotile as at
from gradcheck import check_gradient, forward, single_op

BINARY = {
    "elemwise_add": lambda a, b: a + b,
    "elemwise_sub": lambda a, b: a - b,
    "elemwise_mul": lambda a, b: a * b,
    "elemwise_div": lambda a, b: a / b,
}


@pytest.mark.parametrize("op", sorted(BINARY))
def test_forward_matches_numpy(op):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.uniform(0.5, 2, (3, 4))
    (y,) = forward(single_op(op, ["lhs", "rhs"]), {"lhs": a, "rhs": b})
    np.testing.assert_allclose(y, BINARY[op](a, b), rtol=1e-12)


@pytest.mark.parametrize("op", sorted(BINARY))
def test_gradient(op):
    rng = np.random.default_rng(1)
    check_gradient(op, {"lhs": rng.standard_normal((2, 3, 2)), "rhs": rng.uniform(0.5, 2, (2, 3, 2))})


@pytest.mark.parametrize("op", sorted(BINARY))
def test_shape_mismatch_names_node_and_both_shapes(op):
    x, y = at.sym.Variable("x"), at.sym.Variable("y")
    net = at.sym.create(op, x, y, name="bad")
    with pytest.raises(at.Error) as e:
        net.infer_shape(x=(2, 3), y=(3, 2))
    msg = str(e.value)
    assert "bad" in msg and op in msg and "(2, 3)" in msg and "(3, 2)" in msg


def test_unknown_operand_shape_is_deduced():
    x, y = at.sym.Variable("x"), at.sym.Variable("y")
    args, outs, _ = at.sym.create("elemwise_mul", x, y).infer_shape(x=(4, 5))
    assert args == [(4, 5), (4, 5)] and outs == [(4, 5)]


def test_symbol_arithmetic_builds_these_ops():
    x, y = at.sym.Variable("x"), at.sym.Variable("y")
    net = (x + y) * x - y / x
    a, b = np.array([[1.0, 2.0]]), np.array([[3.0, -4.0]])
    (out,) = forward(net, {"x": a, "y": b})
    np.testing.assert_allclose(out, (a + b) * a - b / a)
    ops = {n.op for n in net.topo_nodes()}
    assert {"elemwise_add", "elemwise_mul", "elemwise_sub", "elemwise_div"} <= ops


def test_add_n_forward_and_gradient():
    rng = np.random.default_rng(2)
    xs = {f"x{i}": rng.standard_normal((2, 3)) for i in range(4)}
    sym = single_op("add_n", list(xs), num_args=4)
    (y,) = forward(sym, xs)
    np.testing.assert_allclose(y, xs["x0"] + xs["x1"] + xs["x2"] + xs["x3"])
    check_gradient("add_n", xs, {"num_args": 4})


def test_add_n_variadic_constructor_and_alias():
    xs = [at.sym.Variable(f"v{i}") for i in range(3)]
    s = at.sym.add_n(*xs, name="s")
    assert s.list_arguments() == ["v0", "v1", "v2"]
    assert s.attr("num_args") == "3"
    t = at.sym.ElementWiseSum(*xs)
    vals = {f"v{i}": np.full((2,), float(i + 1)) for i in range(3)}
    np.testing.assert_allclose(forward(t, vals)[0], [6.0, 6.0])


def test_add_n_shape_mismatch_names_inputs():
    xs = [at.sym.Variable(f"v{i}") for i in range(3)]
    with pytest.raises(at.Error) as e:
        at.sym.add_n(*xs, name="summer").infer_shape(v0=(2, 3), v1=(2, 3), v2=(2, 4))
    assert "summer" in str(e.value) and "(2, 3)" in str(e.value) and "(2, 4)" in str(e.value)


def test_float32_stays_float32():
    a = np.ones((2, 2), np.float32)
    for op in BINARY:
        (y,) = forward(single_op(op, ["lhs", "rhs"]), {"lhs": a, "rhs": a})
        assert y.dtype == np.float32, op


def test_kernel_does_not_broadcast_silently():
    from autotile.backend.reference import execute

    x, y = at.sym.Variable("x"), at.sym.Variable("y")
    with pytest.raises(at.Error) as e:
        execute(at.sym.elemwise_add(x, y, name="adder"), {"x": np.ones((2, 3)), "y": np.ones(3)})
    assert "adder" in str(e.value) and "(2, 3)" in str(e.value) and "(3,)" in str(e.value)
