"""sum, mean, max, min, prod with MXNet's axis/keepdims/exclude semantics."""
import itertools

import numpy as np
import pytest

import autotile as at
from autotile import _core
from autotile.errors import Error
from gradcheck import analytic_gradient, check_gradient, forward, single_op
import mx_shape_fixtures
from tdl_interp import check_op_tdl

OPS = ["sum", "mean", "max", "min", "prod"]
NP = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}
X = np.random.default_rng(0).uniform(0.5, 1.5, (2, 3, 4))


def _want(op, axis, keepdims, exclude):
    if axis is None or axis == ():
        axes = (0, 1, 2)
    else:
        axes = tuple(a % 3 for a in (axis if isinstance(axis, tuple) else (axis,)))
        if exclude:
            axes = tuple(d for d in range(3) if d not in axes)
    y = NP[op](X, axis=axes, keepdims=keepdims)
    return y.reshape(1) if y.ndim == 0 else y


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axis,keepdims,exclude", [
    (None, False, False), ((), True, False), (1, False, False), (-1, True, False), ((0, 2), False, False),
    ((0, 2), True, True), (1, False, True), ((0, 1, 2), False, True)])
def test_forward(op, axis, keepdims, exclude):
    attrs = dict(keepdims=keepdims, exclude=exclude)
    if axis is not None:
        attrs["axis"] = axis
    (out,) = forward(single_op(op, ["data"], **attrs), {"data": X})
    want = _want(op, axis, keepdims, exclude)
    assert out.shape == want.shape
    np.testing.assert_allclose(out, want, rtol=1e-12)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("attrs", [{}, {"axis": 1}, {"axis": (0, 2), "keepdims": True}, {"axis": 0, "exclude": True}])
def test_gradient(op, attrs):
    check_gradient(op, {"data": X}, attrs)


def test_max_min_route_gradient_to_every_tie():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 0.5, 5.0]])
    dy = np.array([0.7, -2.0])
    for op, data in (("max", x), ("min", -x)):
        (g,) = analytic_gradient(single_op(op, ["data"], axis=1), {"data": data}, [dy])
        np.testing.assert_array_equal(g, [[0, 0.7, 0.7], [0, 0, -2.0]])


def test_prod_gradient_is_exact_at_zero():
    x = np.array([[2.0, 0.0, 5.0], [0.0, 3.0, 0.0]])
    (g,) = analytic_gradient(single_op("prod", ["data"], axis=1), {"data": x}, [np.ones(2)])
    want = np.array([[np.prod(np.delete(row, j)) for j in range(3)] for row in x])
    np.testing.assert_array_equal(g, want)  # [[0, 10, 0], [0, 0, 0]]


def test_axis_out_of_range_names_node_and_shape():
    with pytest.raises(Error, match=r"red.*sum.*axis=3.*\(2, 3, 4\)"):
        at.sym.sum(at.sym.Variable("x"), axis=3, name="red").infer_shape(x=(2, 3, 4))
    with pytest.raises(Error, match=r"red2.*max.*twice"):
        at.sym.max(at.sym.Variable("x"), axis=(1, -2), name="red2").infer_shape(x=(2, 3, 4))


@pytest.mark.parametrize("name", mx_shape_fixtures.names("reduce"))
def test_matches_mxnet(name):
    mx_shape_fixtures.check(name)


@pytest.mark.parametrize("op,attrs", itertools.product(OPS, [{"axis": 1}, {}, {"axis": (0, 2), "keepdims": True}]))
def test_tdl_is_exact(op, attrs):
    check_op_tdl(op, [X], attrs, exact=True)


def test_backward_tdl():
    r = np.random.default_rng(1).standard_normal
    for op in ("_backward_sum", "_backward_mean"):
        check_op_tdl(op, [r((2, 4))], {"axis": 1, "shape": (2, 3, 4)}, exact=True)
        check_op_tdl(op, [r((1, 3, 1))], {"axis": (0, 2), "keepdims": True, "shape": (2, 3, 4)}, exact=True)
        check_op_tdl(op, [r((1,))], {"shape": (2, 3)}, exact=True)
    for op, red in (("_backward_max", np.max), ("_backward_min", np.min)):
        check_op_tdl(op, [r((2, 4)), X, red(X, axis=1)], {"axis": 1})
    check_op_tdl("_backward_prod", [r((3,)), X], {"axis": 1, "exclude": True})


def test_reduction_split_gives_partial_output():
    text = check_op_tdl("sum", [X], {"axis": 1})
    got = {s["var"]: s for s in _core.analyze_tdl(text, [(2, 3, 4)], [(2, 4)], 2)["strategies"]}
    assert got["i0"]["outputs"][0] == {"partial": False, "reducer": None, "dim": 0}
    assert got["i1"]["outputs"][0]["dim"] == 1 and got["i1"]["inputs"][0]["dim"] == 2
    assert "r1" not in got  # 3 is not divisible by 2
    got3 = {s["var"]: s for s in _core.analyze_tdl(text, [(2, 3, 4)], [(2, 4)], 3)["strategies"]}
    assert got3["r1"]["outputs"][0]["partial"] and got3["r1"]["outputs"][0]["reducer"] == "sum"
