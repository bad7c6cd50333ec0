"""dot (MXNet N-D semantics) and batch_dot, all transpose combinations."""
import itertools

import numpy as np
import pytest

import autotile as at
from autotile import _core
from autotile.errors import Error
from gradcheck import check_gradient, forward, single_op
import mx_shape_fixtures
from tdl_interp import check_op_tdl

R = np.random.default_rng(0).standard_normal
TT = list(itertools.product([False, True], repeat=2))


@pytest.mark.parametrize("ta,tb", TT)
def test_dot_forward(ta, tb):
    lhs, rhs = R((2, 3, 4)), R((4, 5))
    # transpose_a: an N-D lhs is stored with the contracted axis first, the rest in order
    stored_l = np.moveaxis(lhs, -1, 0) if ta else lhs
    stored_r = rhs.T if tb else rhs
    (out,) = forward(single_op("dot", ["lhs", "rhs"], transpose_a=ta, transpose_b=tb),
                     {"lhs": stored_l, "rhs": stored_r})
    np.testing.assert_allclose(out, np.einsum("abk,kn->abn", lhs, rhs), rtol=1e-12)


def test_dot_nd_contracts_last_with_first():
    a, b = R((2, 3, 4)), R((4, 5, 6))
    (out,) = forward(single_op("dot", ["lhs", "rhs"]), {"lhs": a, "rhs": b})
    want = np.zeros((2, 3, 5, 6))
    for i, j, k, m, n in itertools.product(range(2), range(3), range(4), range(5), range(6)):
        want[i, j, m, n] += a[i, j, k] * b[k, m, n]
    np.testing.assert_allclose(out, want, rtol=1e-12)


def test_dot_vectors():
    a, b = R(3), R(3)
    (out,) = forward(single_op("dot", ["lhs", "rhs"]), {"lhs": a, "rhs": b})
    assert out.shape == (1,)
    np.testing.assert_allclose(out[0], sum(a[i] * b[i] for i in range(3)))


@pytest.mark.parametrize("ta,tb", TT)
def test_batch_dot_forward(ta, tb):
    a, b = R((2, 3, 4)), R((2, 4, 5))
    sa = np.swapaxes(a, 1, 2) if ta else a
    sb = np.swapaxes(b, 1, 2) if tb else b
    (out,) = forward(single_op("batch_dot", ["lhs", "rhs"], transpose_a=ta, transpose_b=tb), {"lhs": sa, "rhs": sb})
    np.testing.assert_allclose(out, np.einsum("bik,bkj->bij", a, b), rtol=1e-12)


@pytest.mark.parametrize("ta,tb", TT)
@pytest.mark.parametrize("lshape,rshape", [((3, 4), (4, 2)), ((2, 3, 4), (4, 2, 2))])
def test_dot_gradient(ta, tb, lshape, rshape):
    ls = (lshape[-1],) + lshape[:-1] if ta else lshape
    rs = rshape[1:] + (rshape[0],) if tb else rshape
    check_gradient("dot", {"lhs": R(ls), "rhs": R(rs)}, {"transpose_a": ta, "transpose_b": tb})


@pytest.mark.parametrize("lshape,rshape", [((3,), (3,)), ((3,), (3, 2)), ((2, 3), (3,))])
def test_dot_vector_gradient(lshape, rshape):
    check_gradient("dot", {"lhs": R(lshape), "rhs": R(rshape)})


@pytest.mark.parametrize("ta,tb", TT)
def test_batch_dot_gradient(ta, tb):
    check_gradient("batch_dot", {"lhs": R((2, 4, 3) if ta else (2, 3, 4)), "rhs": R((2, 2, 4) if tb else (2, 4, 2))},
                   {"transpose_a": ta, "transpose_b": tb})


def test_shape_errors_name_node_and_shapes():
    a, b = at.sym.Variable("a"), at.sym.Variable("b")
    with pytest.raises(Error, match=r"mm.*dot.*\(2, 3\).*\(4, 5\)"):
        at.sym.dot(a, b, name="mm").infer_shape(a=(2, 3), b=(4, 5))
    with pytest.raises(Error, match=r"bmm.*batch_dot.*\(2, 3, 4\).*\(3, 4, 5\)"):
        at.sym.batch_dot(a, b, name="bmm").infer_shape(a=(2, 3, 4), b=(3, 4, 5))
    with pytest.raises(Error, match=r"bmm2.*batch_dot.*contracted"):
        at.sym.batch_dot(a, b, transpose_b=True, name="bmm2").infer_shape(a=(2, 3, 4), b=(2, 4, 5))


@pytest.mark.parametrize("name", mx_shape_fixtures.names("matmul"))
def test_matches_mxnet(name):
    mx_shape_fixtures.check(name)


@pytest.mark.parametrize("ta,tb", TT)
def test_tdl_is_exact(ta, tb):
    check_op_tdl("dot", [R((4, 2, 3) if ta else (2, 3, 4)), R((5, 4) if tb else (4, 5))],
                 {"transpose_a": ta, "transpose_b": tb}, exact=True)
    check_op_tdl("batch_dot", [R((2, 4, 3) if ta else (2, 3, 4)), R((2, 5, 4) if tb else (2, 4, 5))],
                 {"transpose_a": ta, "transpose_b": tb}, exact=True)
    lshape = (4, 2, 3) if ta else (2, 3, 4)
    rshape = (2, 5, 4) if tb else (4, 2, 5)
    check_op_tdl("_backward_dot_lhs", [R((2, 3, 2, 5)), R(rshape)],
                 {"transpose_a": ta, "transpose_b": tb, "shape": lshape}, exact=True)
    check_op_tdl("_backward_dot_rhs", [R((2, 3, 2, 5)), R(lshape)],
                 {"transpose_a": ta, "transpose_b": tb, "shape": rshape}, exact=True)


def test_vector_tdl_is_exact():
    check_op_tdl("dot", [R(3), R(3)], exact=True)
    check_op_tdl("_backward_dot_lhs", [R(1), R(3)], {"shape": (3,)}, exact=True)
    check_op_tdl("_backward_dot_rhs", [R(1), R(3)], {"shape": (3,)}, exact=True)


def test_dot_strategies():
    """out[i, j] = sum(k) lhs[i, k] rhs[k, j]: i and j splits replicate the other operand,
    a k split leaves a partial sum (the classic data/model/reduction parallel choices)."""
    text = check_op_tdl("dot", [R((4, 6)), R((6, 8))])
    got = {s["var"]: s for s in _core.analyze_tdl(text, [(4, 6), (6, 8)], [(4, 8)], 2)["strategies"]}
    assert set(got) == {"i0", "j0", "k"}
    assert got["i0"]["inputs"][1]["replicate"] and got["j0"]["inputs"][0]["replicate"]
    assert got["k"]["outputs"][0]["partial"] and got["k"]["outputs"][0]["reducer"] == "sum"
