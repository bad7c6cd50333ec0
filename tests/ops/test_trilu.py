import numpy as np
import pytest

import autotile as at
from gradcheck import check_gradient, forward, single_op
from tdl_op_checks import check_tdl

CONFIGS = [(True, 0), (True, 1), (True, -2), (False, 0), (False, 2), (False, -1), (True, 7), (False, -7)]


def _naive(x, upper, k):
    out = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        row, col = idx[-2], idx[-1]
        if (col - row >= k) if upper else (col - row <= k):
            out[idx] = x[idx]
    return out


@pytest.mark.parametrize("upper,k", CONFIGS)
@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 4), (2, 1, 5, 3)])
def test_forward_matches_naive_loop(upper, k, shape):
    x = np.random.default_rng(0).standard_normal(shape)
    (y,) = forward(single_op("trilu", ["data"], upper=upper, k=k), {"data": x})
    np.testing.assert_array_equal(y, _naive(x, upper, k))


@pytest.mark.parametrize("upper,k", CONFIGS[:6])
def test_gradient_matches_finite_differences(upper, k):
    check_gradient("trilu", {"data": np.random.default_rng(1).standard_normal((2, 3, 4))}, {"upper": upper, "k": k})


def test_float32_stays_float32():
    (y,) = forward(single_op("trilu", ["data"]), {"data": np.ones((3, 3), np.float32)})
    assert y.dtype == np.float32


def test_rank_one_is_an_error_naming_node_and_shape():
    with pytest.raises(at.Error) as e:
        at.sym.trilu(at.sym.Variable("x"), name="mask").infer_shape(x=(5,))
    assert "mask" in str(e.value) and "trilu" in str(e.value) and "(5,)" in str(e.value)


@pytest.mark.parametrize("upper,k", CONFIGS[:6])
def test_tdl(upper, k):
    x = np.random.default_rng(2).standard_normal((2, 6, 12))
    fns = {"trilu": lambda v, d: v if ((d >= k) if upper else (d <= k)) else 0.0}
    check_tdl("trilu", [x], {"upper": upper, "k": k}, exact=True, fns=fns)
