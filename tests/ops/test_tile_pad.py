import numpy as np
import pytest

import autotile as at
from gradcheck import check_gradient, forward, single_op
from tdl_op_checks import check_tdl

R = np.random.default_rng(0).standard_normal
TILES = [((2, 3), (2, 2)), ((2, 3), (3,)), ((3,), (2, 1, 2)), ((1, 3), (4, 1)), ((2, 1, 3), (1, 3, 1))]


@pytest.mark.parametrize("shape,reps", TILES)
def test_tile_matches_numpy(shape, reps):
    x = R(shape)
    (y,) = forward(single_op("tile", ["data"], reps=reps), {"data": x})
    np.testing.assert_array_equal(y, np.tile(x, reps))


@pytest.mark.parametrize("shape,reps", TILES)
def test_tile_gradient_matches_finite_differences(shape, reps):
    check_gradient("tile", {"data": R(shape)}, {"reps": reps})


PADS = [
    ((3, 4), (1, 2, 0, 3)),
    ((2, 3, 4), (0, 0, 2, 1, 1, 1)),
    ((5,), (4, 6)),  # reflect wider than the axis: NumPy keeps mirroring
    ((3, 4), (-1, 2, 1, -2)),  # negative widths crop (ONNX)
    ((1, 4), (2, 1, 0, 0)),
]
MODES = ["constant", "edge", "reflect"]


def _np_pad(x, widths, mode, value):
    """ONNX Pad from np.pad: pad by the positive widths, then crop the negative ones."""
    pos = [(max(b, 0), max(e, 0)) for b, e in widths]
    kw = {"constant_values": value} if mode == "constant" else {}
    y = np.pad(x, pos, mode=mode, **kw)
    return y[tuple(slice(-min(b, 0), y.shape[d] + min(e, 0)) for d, (b, e) in enumerate(widths))]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,pad_width", PADS)
def test_pad_matches_numpy(mode, shape, pad_width):
    x = R(shape)
    attrs = {"mode": mode, "pad_width": pad_width, "constant_value": 1.5}
    (y,) = forward(single_op("pad", ["data"], **attrs), {"data": x})
    widths = list(zip(pad_width[0::2], pad_width[1::2]))
    np.testing.assert_array_equal(y, _np_pad(x, widths, mode, 1.5))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,pad_width", PADS)
def test_pad_gradient_matches_finite_differences(mode, shape, pad_width):
    check_gradient("pad", {"data": R(shape)}, {"mode": mode, "pad_width": pad_width})


def test_float32_stays_float32():
    x = R((2, 3)).astype(np.float32)
    for op, attrs in [("tile", {"reps": (2, 1)}), ("pad", {"pad_width": (1, 1, 1, 1), "constant_value": 0.5})]:
        (y,) = forward(single_op(op, ["data"], **attrs), {"data": x})
        assert y.dtype == np.float32, op


def test_bad_attributes_name_node_and_shape():
    x = at.sym.Variable("x")
    with pytest.raises(at.Error) as e:
        at.sym.pad(x, pad_width=(1, 1), name="p0").infer_shape(x=(2, 3))
    assert "p0" in str(e.value) and "pad_width" in str(e.value) and "(2, 3)" in str(e.value)
    with pytest.raises(at.Error) as e:
        at.sym.pad(x, pad_width=(0, 0, -2, -1), name="p1").infer_shape(x=(2, 3))
    assert "p1" in str(e.value) and "axis 1" in str(e.value)
    with pytest.raises(at.Error) as e:
        at.sym.tile(x, reps=(2, 0), name="t0").infer_shape(x=(2, 3))
    assert "t0" in str(e.value) and "reps" in str(e.value)
    with pytest.raises(at.Error) as e:
        at.sym.pad(x, pad_width=(1, 1), mode="wrap", name="p2")
    assert "p2" in str(e.value) and "wrap" in str(e.value)


@pytest.mark.parametrize("shape,reps", [((6, 4), (2, 3)), ((3, 12), (2, 1)), ((6,), (2, 1, 2)), ((1, 6), (6, 2))])
def test_tile_tdl(shape, reps):
    x = R(shape)
    check_tdl("tile", [x], {"reps": reps}, exact=True)
    dy = R(np.tile(x, reps).shape)
    check_tdl("_backward_tile", [dy], {"reps": reps, "shape": shape}, fns={"untile": lambda v: v})


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,pad_width", [((6, 8), (0, 0, 2, 2)), ((4, 6), (1, 1, 3, 3)), ((6, 6), (-1, 1, 0, 0)),
                                             ((6, 10), (3, 3, -1, -3)), ((6, 4), (0, 0, 4, 4))])
def test_pad_tdl(mode, shape, pad_width):
    x = R(shape)
    attrs = {"mode": mode, "pad_width": pad_width}
    exact = mode == "constant"  # zero fill: the reader's out-of-range reads are zero too
    check_tdl("pad", [x], attrs, exact=exact, fns={"pad": lambda v: v})
    (y,) = forward(single_op("pad", ["data"], **attrs), {"data": x})
    check_tdl("_backward_pad", [R(y.shape)], attrs, exact=exact, fns={"unpad": lambda v: v})


def test_mxnet_name():
    assert at.ops.get("Pad") is at.ops.get("pad")
