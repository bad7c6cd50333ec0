"""broadcast_to and broadcast_like."""
import numpy as np
import pytest

import autotile as at
from autotile.errors import Error
from gradcheck import check_gradient, forward, single_op
import mx_shape_fixtures
from tdl_interp import check_op_tdl

X = np.random.default_rng(0).standard_normal((1, 3, 1))


def test_forward():
    (out,) = forward(single_op("broadcast_to", ["data"], shape=(2, 0, 4)), {"data": X})
    want = np.empty((2, 3, 4))
    for i in range(2):
        for k in range(4):
            want[i, :, k] = X[0, :, 0]
    np.testing.assert_array_equal(out, want)
    (like,) = forward(single_op("broadcast_like", ["lhs", "rhs"], lhs_axes=(0,), rhs_axes=(2,)),
                      {"lhs": X, "rhs": np.zeros((2, 5, 4))})
    assert like.shape == (4, 3, 1)


def test_errors():
    x = at.sym.Variable("x")
    with pytest.raises(Error, match=r"bt.*broadcast_to.*\(1, 3, 1\).*\(2, 4, 4\)"):
        at.sym.broadcast_to(x, shape=(2, 4, 4), name="bt").infer_shape(x=(1, 3, 1))
    with pytest.raises(Error, match=r"bt2.*broadcast_to.*\(1, 3, 1\)"):
        at.sym.broadcast_to(x, shape=(3, 1), name="bt2").infer_shape(x=(1, 3, 1))
    with pytest.raises(Error, match=r"bl.*broadcast_like.*\(1, 3\).*\(2, 3, 4\)"):
        at.sym.broadcast_like(x, at.sym.Variable("y"), name="bl").infer_shape(x=(1, 3), y=(2, 3, 4))


def test_gradients():
    check_gradient("broadcast_to", {"data": X}, {"shape": (2, 3, 4)})
    check_gradient("broadcast_to", {"data": X}, {"shape": (0, 3, 0)})
    check_gradient("broadcast_like", {"lhs": X, "rhs": np.zeros((2, 3, 4))}, wrt=["lhs"])


@pytest.mark.parametrize("name", mx_shape_fixtures.names("broadcast"))
def test_matches_mxnet(name):
    mx_shape_fixtures.check(name)


def test_tdl_is_exact():
    check_op_tdl("broadcast_to", [X], {"shape": (2, 3, 4)}, exact=True)
    check_op_tdl("broadcast_like", [X, np.zeros((2, 3, 4))])
