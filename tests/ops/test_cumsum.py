import itertools

import numpy as np
import pytest

import autotile as at
from gradcheck import check_gradient, forward, single_op
from tdl_op_checks import check_tdl

MODES = list(itertools.product([False, True], [False, True]))  # (exclusive, reverse)


def _oracle(x, axis, exclusive, reverse):
    """ONNX CumSum from NumPy's cumsum: flip for reverse, shift by one for exclusive."""
    y = np.flip(x, axis) if reverse else x
    c = np.cumsum(y, axis=axis)
    if exclusive:
        c = np.concatenate([np.zeros_like(np.take(c, [0], axis=axis)), np.take(c, range(c.shape[axis] - 1),
                                                                               axis=axis)], axis=axis)
    return np.flip(c, axis) if reverse else c


@pytest.mark.parametrize("exclusive,reverse", MODES)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_forward_matches_numpy(exclusive, reverse, axis):
    x = np.random.default_rng(0).standard_normal((3, 4, 5))
    (y,) = forward(single_op("cumsum", ["data"], axis=axis, exclusive=exclusive, reverse=reverse), {"data": x})
    np.testing.assert_allclose(y, _oracle(x, axis, exclusive, reverse), rtol=1e-12, atol=1e-12)


def test_onnx_example():
    # the ONNX CumSum operator's documented example, all four modes
    x = np.array([1.0, 2.0, 3.0])
    want = {(False, False): [1, 3, 6], (True, False): [0, 1, 3], (False, True): [6, 5, 3], (True, True): [5, 3, 0]}
    for (exclusive, reverse), w in want.items():
        (y,) = forward(single_op("cumsum", ["data"], axis=0, exclusive=exclusive, reverse=reverse), {"data": x})
        np.testing.assert_array_equal(y, w)


@pytest.mark.parametrize("exclusive,reverse", MODES)
def test_gradient_matches_finite_differences(exclusive, reverse):
    x = np.random.default_rng(1).standard_normal((3, 4))
    check_gradient("cumsum", {"data": x}, {"axis": 1, "exclusive": exclusive, "reverse": reverse})


def test_float32_stays_float32():
    x = np.ones((2, 3), np.float32)
    (y,) = forward(single_op("cumsum", ["data"], axis=1), {"data": x})
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, [[1, 2, 3], [1, 2, 3]])


def test_axis_out_of_range_names_node_and_shape():
    with pytest.raises(at.Error) as e:
        at.sym.cumsum(at.sym.Variable("x"), axis=3, name="cs").infer_shape(x=(2, 3))
    msg = str(e.value)
    assert "cs" in msg and "cumsum" in msg and "axis=3" in msg and "(2, 3)" in msg


@pytest.mark.parametrize("exclusive,reverse", MODES)
@pytest.mark.parametrize("axis", [0, 1])
def test_tdl(exclusive, reverse, axis):
    fns = {"prefix": lambda d: float(d >= 0), "strict_prefix": lambda d: float(d > 0)}
    x = np.random.default_rng(2).standard_normal((6, 12))
    text = check_tdl("cumsum", [x], {"axis": axis, "exclusive": exclusive, "reverse": reverse}, exact=True, fns=fns)
    # the summed axis is a strategy: each worker sums its chunk into a partial output
    strategies = at._core.analyze_tdl(text, [(6, 12)], [(6, 12)], 2)["strategies"]
    assert any(s["reduction"] and s["inputs"][0]["dim"] == axis for s in strategies), text
