"""transpose and SwapAxis."""
import numpy as np
import pytest

import autotile as at
from autotile.errors import Error
from gradcheck import check_gradient, forward, single_op
import mx_shape_fixtures
from tdl_interp import check_op_tdl


def test_forward():
    x = np.random.default_rng(0).standard_normal((2, 3, 4))
    (rev,) = forward(single_op("transpose", ["data"]), {"data": x})
    np.testing.assert_array_equal(rev, np.einsum("abc->cba", x))
    (p,) = forward(single_op("transpose", ["data"], axes=(1, -1, 0)), {"data": x})
    np.testing.assert_array_equal(p, np.einsum("abc->bca", x))
    (s,) = forward(single_op("SwapAxis", ["data"], dim1=0, dim2=1), {"data": x})
    np.testing.assert_array_equal(s, np.einsum("abc->bac", x))


@pytest.mark.parametrize("axes", [(0, 1), (0, 1, 1), (0, 1, 3)])
def test_bad_axes(axes):
    with pytest.raises(Error, match=r"tp.*transpose.*axes.*\(2, 3, 4\)"):
        at.sym.transpose(at.sym.Variable("x"), axes=axes, name="tp").infer_shape(x=(2, 3, 4))


def test_swapaxis_out_of_range():
    with pytest.raises(Error, match=r"sw.*SwapAxis.*dim2=3"):
        at.sym.SwapAxis(at.sym.Variable("x"), dim1=0, dim2=3, name="sw").infer_shape(x=(2, 3, 4))


@pytest.mark.parametrize("op,attrs", [("transpose", {"axes": (2, 0, 1)}), ("transpose", {}),
                                      ("SwapAxis", {"dim1": 0, "dim2": 2})])
def test_gradient(op, attrs):
    check_gradient(op, {"data": np.random.default_rng(1).standard_normal((2, 3, 4))}, attrs)


@pytest.mark.parametrize("name", mx_shape_fixtures.names("transpose"))
def test_matches_mxnet(name):
    mx_shape_fixtures.check(name)


@pytest.mark.parametrize("op,attrs", [("transpose", {"axes": (2, 0, 1)}), ("transpose", {}),
                                      ("SwapAxis", {"dim1": -1, "dim2": 0})])
def test_tdl_is_exact(op, attrs):
    check_op_tdl(op, [np.random.default_rng(2).standard_normal((2, 3, 4))], attrs, exact=True)
