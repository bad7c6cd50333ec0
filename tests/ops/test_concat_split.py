"""Concat and SliceChannel (split) with their backward ops."""
import numpy as np
import pytest

import autotile as at
from autotile import _core
from autotile.errors import Error
from gradcheck import check_gradient, forward
import mx_shape_fixtures
from tdl_interp import check_op_tdl


def test_concat_positional_api_and_forward():
    rng = np.random.default_rng(0)
    a, b, c = rng.standard_normal((2, 1, 3)), rng.standard_normal((2, 2, 3)), rng.standard_normal((2, 3, 3))
    s = at.sym.Concat(at.sym.Variable("a"), at.sym.Variable("b"), at.sym.Variable("c"), dim=1, name="cat")
    assert s.list_arguments() == ["a", "b", "c"]
    assert s.infer_shape(a=a.shape, b=b.shape, c=c.shape)[1] == [(2, 6, 3)]
    (out,) = forward(s, {"a": a, "b": b, "c": c})
    np.testing.assert_array_equal(out[:, :1], a)
    np.testing.assert_array_equal(out[:, 1:3], b)
    np.testing.assert_array_equal(out[:, 3:], c)


def test_concat_mismatch_names_node_and_shapes():
    s = at.sym.concat(at.sym.Variable("a"), at.sym.Variable("b"), dim=1, name="cat0")
    with pytest.raises(Error) as e:
        s.infer_shape(a=(2, 3, 4), b=(2, 3, 5))
    msg = str(e.value)
    assert "cat0" in msg and "Concat" in msg and "(2, 3, 5)" in msg and "(2, 3, 4)" in msg and "arg1" in msg
    with pytest.raises(Error, match=r"cat1.*dim=3.*out of range"):
        at.sym.Concat(at.sym.Variable("a"), at.sym.Variable("b"), dim=3, name="cat1").infer_shape(a=(2, 3), b=(2, 3))


def test_split_outputs_and_errors():
    s = at.sym.split(at.sym.Variable("x"), num_outputs=3, axis=1, name="sp")
    assert s.list_outputs() == ["sp_output0", "sp_output1", "sp_output2"]
    x = np.arange(24.0).reshape(2, 6, 2)
    outs = forward(s, {"x": x})
    for k, o in enumerate(outs):
        np.testing.assert_array_equal(o, x[:, 2 * k:2 * k + 2])
    with pytest.raises(Error, match=r"sp2.*SliceChannel.*\(2, 5\).*num_outputs=2"):
        at.sym.SliceChannel(at.sym.Variable("x"), num_outputs=2, name="sp2").infer_shape(x=(2, 5))
    with pytest.raises(Error, match=r"squeeze_axis"):
        at.sym.SliceChannel(at.sym.Variable("x"), num_outputs=2, axis=1, squeeze_axis=True).infer_shape(x=(2, 4))


def test_concat_gradient():
    rng = np.random.default_rng(1)
    check_gradient("Concat", {"arg0": rng.standard_normal((2, 3)), "arg1": rng.standard_normal((2, 1)),
                              "arg2": rng.standard_normal((2, 2))}, {"dim": -1, "num_args": 3})


@pytest.mark.parametrize("attrs,shape", [({"num_outputs": 2}, (2, 4, 3)),
                                         ({"num_outputs": 3, "axis": 0, "squeeze_axis": True}, (3, 2, 2)),
                                         ({"num_outputs": 2, "axis": -1}, (3, 4))])
def test_split_gradient(attrs, shape):
    check_gradient("SliceChannel", {"data": np.random.default_rng(2).standard_normal(shape)}, attrs)


@pytest.mark.parametrize("name", mx_shape_fixtures.names("concat_split"))
def test_matches_mxnet(name):
    mx_shape_fixtures.check(name)


def test_tdl():
    rng = np.random.default_rng(3)
    r = rng.standard_normal
    check_op_tdl("Concat", [r((2, 3, 2)), r((2, 1, 2))], {"dim": 1, "num_args": 2})
    check_op_tdl("_backward_Concat", [r((2, 4, 2))], {"dim": 1, "sizes": (3, 1)}, exact=True)
    check_op_tdl("SliceChannel", [r((2, 6))], {"num_outputs": 3, "axis": 1}, exact=True)
    check_op_tdl("SliceChannel", [r((3, 2, 2))], {"num_outputs": 3, "axis": 0, "squeeze_axis": True}, exact=True)
    check_op_tdl("_backward_SliceChannel", [r((2, 2))] * 2, {"num_outputs": 2, "axis": 1})
    check_op_tdl("_backward_SliceChannel", [r((2, 2))] * 3, {"num_outputs": 3, "axis": 1, "squeeze_axis": True})


def test_concat_strategies_split_other_dims_exactly():
    """Batch split reads each input's half; a concat-dim split reads inputs whole (':')."""
    text = check_op_tdl("Concat", [np.zeros((4, 3)), np.zeros((4, 5))], {"dim": 1, "num_args": 2})
    got = {s["var"]: s for s in _core.analyze_tdl(text, [(4, 3), (4, 5)], [(4, 8)], 2)["strategies"]}
    for need in got["i0"]["inputs"]:
        assert need["dim"] == 0 and need["per_worker"] == [(0, 2), (2, 4)]
    assert all(need["replicate"] for need in got["i1"]["inputs"])
