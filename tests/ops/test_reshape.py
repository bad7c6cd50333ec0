"""Reshape, Flatten, reshape_like, expand_dims, squeeze."""
import numpy as np
import pytest

import autotile as at
from autotile.errors import Error
from gradcheck import check_gradient, forward, single_op
import mx_shape_fixtures
from tdl_interp import check_op_tdl

# MXNet's documented Reshape examples (Reshape's docstring, MXNet 1.x): input shape,
# shape attribute, reverse, expected output shape.
DOC_TABLE = [
    ((2, 3, 4), (4, 0, 2), False, (4, 3, 2)),
    ((2, 3, 4), (2, 0, 0), False, (2, 3, 4)),
    ((2, 3, 4), (6, 1, -1), False, (6, 1, 4)),
    ((2, 3, 4), (3, -1, 8), False, (3, 1, 8)),
    ((2, 3, 4), (-1,), False, (24,)),
    ((2, 3, 4), (-2,), False, (2, 3, 4)),
    ((2, 3, 4), (2, -2), False, (2, 3, 4)),
    ((2, 3, 4), (-2, 1, 1), False, (2, 3, 4, 1, 1)),
    ((2, 3, 4), (-3, 4), False, (6, 4)),
    ((2, 3, 4, 5), (-3, -3), False, (6, 20)),
    ((2, 3, 4), (0, -3), False, (2, 12)),
    ((2, 3, 4), (-3, -2), False, (6, 4)),
    ((2, 3, 4), (-4, 1, 2, -2), False, (1, 2, 3, 4)),
    ((2, 3, 4), (2, -4, -1, 3, -2), False, (2, 1, 3, 4)),
    ((10, 5, 4), (-1, 0), False, (40, 5)),
    ((10, 5, 4), (-1, 0), True, (50, 4)),
]


@pytest.mark.parametrize("shape,spec,reverse,want", DOC_TABLE)
def test_reshape_codes_match_mxnet_docs(shape, spec, reverse, want):
    x = at.sym.Variable("x")
    y = at.sym.Reshape(x, shape=spec, reverse=reverse, name="r")
    assert y.infer_shape(x=shape)[1] == [want]
    data = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    (out,) = forward(y, {"x": data})
    np.testing.assert_array_equal(out, data.reshape(want))  # row-major order is kept


def test_legacy_target_shape():
    x = at.sym.Variable("x")
    assert at.sym.Reshape(x, target_shape=(0, 4)).infer_shape(x=(2, 3, 4))[1] == [(6, 4)]
    assert at.sym.Reshape(x, target_shape=(5, 0, 3), keep_highest=True).infer_shape(x=(2, 3, 4))[1] == [(2, 4, 3)]


@pytest.mark.parametrize("spec", [(5, -1), (7,), (-1, -1), (2, -4, 2, 2, -2), (0, 0, 0, 0), (-5, 2)])
def test_incompatible_reshape_names_node_op_and_shapes(spec):
    y = at.sym.Reshape(at.sym.Variable("x"), shape=spec, name="bad_reshape")
    with pytest.raises(Error) as e:
        y.infer_shape(x=(2, 3, 4))
    msg = str(e.value)
    assert "bad_reshape" in msg and "Reshape" in msg and "(2, 3, 4)" in msg


def test_reverse_split_is_rejected_like_mxnet():
    with pytest.raises(Error, match="-4"):
        at.sym.Reshape(at.sym.Variable("x"), shape=(-4, 1, 2, -2), reverse=True).infer_shape(x=(2, 3, 4))


def test_flatten_expand_squeeze_forward():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 1, 3, 1))
    (f,) = forward(single_op("Flatten", ["data"]), {"data": x})
    np.testing.assert_array_equal(f, x.reshape(2, 3))
    (e,) = forward(single_op("expand_dims", ["data"], axis=-2), {"data": x})
    assert e.shape == (2, 1, 3, 1, 1)
    (s,) = forward(single_op("squeeze", ["data"]), {"data": x})
    np.testing.assert_array_equal(s, x[:, 0, :, 0])
    (s1,) = forward(single_op("squeeze", ["data"], axis=(1,)), {"data": x})
    assert s1.shape == (2, 3, 1)


def test_shape_errors():
    x = at.sym.Variable("x")
    with pytest.raises(Error, match=r"sq.*squeeze.*axis 0.*\(2, 1, 3\)"):
        at.sym.squeeze(x, axis=(0,), name="sq").infer_shape(x=(2, 1, 3))
    with pytest.raises(Error, match=r"ed.*expand_dims.*axis=4.*\(2, 3\)"):
        at.sym.expand_dims(x, axis=4, name="ed").infer_shape(x=(2, 3))
    with pytest.raises(Error, match=r"rl.*reshape_like.*\(2, 3\).*\(4, 2\)"):
        at.sym.reshape_like(x, at.sym.Variable("y"), name="rl").infer_shape(x=(2, 3), y=(4, 2))


@pytest.mark.parametrize("op,attrs,shape", [
    ("Reshape", {"shape": (0, -3)}, (2, 3, 4)),
    ("Reshape", {"shape": (-1, 2, 2)}, (3, 4)),
    ("Flatten", {}, (2, 3, 2)),
    ("expand_dims", {"axis": 1}, (2, 3)),
    ("squeeze", {}, (2, 1, 3)),
])
def test_gradients(op, attrs, shape):
    check_gradient(op, {"data": np.random.default_rng(1).standard_normal(shape)}, attrs)


def test_reshape_like_gradient_only_for_lhs():
    rng = np.random.default_rng(2)
    check_gradient("reshape_like", {"lhs": rng.standard_normal((2, 6)), "rhs": rng.standard_normal((3, 4))}, wrt=["lhs"])


@pytest.mark.parametrize("name", mx_shape_fixtures.names("reshape"))
def test_matches_mxnet(name):
    mx_shape_fixtures.check(name)


# Exact descriptions (splits only) are evaluated; merges use ':' and are checked for
# covering every element the kernel reads.
@pytest.mark.parametrize("op,attrs,shape,exact", [
    ("Reshape", {"shape": (2, 3, 4)}, (2, 12), True),
    ("Reshape", {"shape": (0, 2, -1)}, (3, 4, 5), False),
    ("Reshape", {"shape": (4, 6)}, (6, 4), False),
    ("Reshape", {"shape": (-3, -2)}, (2, 3, 4), False),
    ("Flatten", {}, (2, 3, 2, 2), False),
    ("expand_dims", {"axis": 0}, (3, 4), True),
    ("squeeze", {}, (3, 1, 4, 1), True),
])
def test_tdl(op, attrs, shape, exact):
    text = check_op_tdl(op, [np.random.default_rng(3).standard_normal(shape)], attrs, exact=exact)
    assert text.startswith("data -> out:")


def test_flatten_tdl_keeps_batch_split_exact():
    from autotile import _core

    text = check_op_tdl("Flatten", [np.zeros((4, 3, 2, 2))])
    got = _core.analyze_tdl(text, [(4, 3, 2, 2)], [(4, 12)], 2)
    batch = next(s for s in got["strategies"] if s["var"] == "i0")
    assert batch["inputs"][0]["dim"] == 0 and batch["inputs"][0]["per_worker"] == [(0, 2), (2, 4)]
