"""slice_axis and slice (crop) with their backward ops."""
import numpy as np
import pytest

import autotile as at
from autotile.errors import Error
from gradcheck import check_gradient, forward, single_op
import mx_shape_fixtures
from tdl_interp import check_op_tdl

X = np.arange(60.0).reshape(3, 4, 5)


@pytest.mark.parametrize("axis,begin,end,want", [
    (1, 1, 3, X[:, 1:3]), (-1, -2, None, X[..., 3:]), (0, 0, -1, X[:2]), (2, 0, 5, X),
])
def test_slice_axis_forward(axis, begin, end, want):
    (out,) = forward(single_op("slice_axis", ["data"], axis=axis, begin=begin, end=end), {"data": X})
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("begin,end", [(3, 1), (2, 2), (0, 6), (-6, None)])
def test_slice_axis_rejects_empty_or_out_of_range(begin, end):
    s = at.sym.slice_axis(at.sym.Variable("x"), axis=2, begin=begin, end=end, name="sa")
    with pytest.raises(Error, match=r"sa.*slice_axis.*\(3, 4, 5\)"):
        s.infer_shape(x=X.shape)


@pytest.mark.parametrize("begin,end,step", [
    ((1, None), (None, 3), ()),
    ((None, 3, 1), (None, None, None), (2, -1, 2)),
    ((0, -1), (3, -4), (1, -1)),
    ((-5, 1), (7, 10), ()),
    ((2,), (None,), (-1,)),
])
def test_slice_matches_python_slicing(begin, end, step):
    idx = tuple(slice(b, e, s) for b, e, s in zip(begin, end, step or [None] * len(begin)))
    (out,) = forward(single_op("slice", ["data"], begin=begin, end=end, step=step), {"data": X})
    np.testing.assert_array_equal(out, X[idx])


def test_slice_bad_attrs():
    with pytest.raises(Error, match=r"sl.*slice.*zero step"):
        at.sym.slice(at.sym.Variable("x"), begin=(0,), end=(2,), step=(0,), name="sl").infer_shape(x=(3, 4))
    with pytest.raises(Error, match=r"sl2.*slice.*\(3, 4\)"):
        at.sym.slice(at.sym.Variable("x"), begin=(0, 0, 0), end=(1, 1, 1), name="sl2").infer_shape(x=(3, 4))


@pytest.mark.parametrize("op,attrs", [
    ("slice_axis", {"axis": 1, "begin": 1, "end": -1}),
    ("slice", {"begin": (None, 3, 1), "end": (None, None, None), "step": (2, -1, 2)}),
    ("slice", {"begin": (1,), "end": (3,)}),
])
def test_gradients(op, attrs):
    check_gradient(op, {"data": np.random.default_rng(0).standard_normal((3, 4, 5))}, attrs)


@pytest.mark.parametrize("name", mx_shape_fixtures.names("slicing"))
def test_matches_mxnet(name):
    mx_shape_fixtures.check(name)


def test_tdl():
    r = np.random.default_rng(1).standard_normal
    check_op_tdl("slice_axis", [r((3, 4, 5))], {"axis": 2, "begin": 1, "end": 4}, exact=True)
    check_op_tdl("slice", [r((3, 4, 5))], {"begin": (None, 3, 1), "end": (None, None, None), "step": (2, -1, 2)},
                 exact=True)
    check_op_tdl("_backward_slice_axis", [r((3, 4, 3))], {"axis": 2, "begin": 1, "end": 4, "shape": (3, 4, 5)},
                 exact=True)
    check_op_tdl("_backward_slice", [r((3, 2))], {"begin": (None, 1), "end": (None, 3), "shape": (3, 4)}, exact=True)
    check_op_tdl("_backward_slice", [r((2, 4, 2))], {"begin": (None, 3, 1), "end": (None, None, None),
                                                      "step": (2, -1, 2), "shape": (3, 4, 5)})
