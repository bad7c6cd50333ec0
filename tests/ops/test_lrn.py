import numpy as np
import pytest

import autotile as at
from autotile.backend.reference import execute
from autotile.symbol.symbol import Symbol
from autotile.errors import Error
from gradcheck import check_gradient, forward, single_op
from mxfixtures import case_ids, cases, check_case
from tdl_interp import check_op_tdl


def naive_lrn(x, alpha, beta, knorm, nsize):
    y = np.zeros_like(x)
    c_total = x.shape[1]
    for n, c, i, j in np.ndindex(*x.shape):
        lo = c - nsize // 2
        acc = sum(x[n, cc, i, j] ** 2 for cc in range(lo, lo + nsize) if 0 <= cc < c_total)
        y[n, c, i, j] = x[n, c, i, j] / (knorm + alpha / nsize * acc) ** beta
    return y


CASES = [dict(alpha=0.3, beta=0.75, knorm=2.0, nsize=5), dict(alpha=1e-4, beta=0.75, knorm=2.0, nsize=3),
         dict(alpha=0.8, beta=0.5, knorm=1.0, nsize=7), dict(alpha=0.5, beta=1.2, knorm=1.0, nsize=1)]


@pytest.mark.parametrize("attrs", CASES)
def test_forward_matches_naive_loops(attrs):
    x = np.random.default_rng(0).standard_normal((2, 6, 3, 2))
    (y,) = forward(single_op("LRN", ["data"], **attrs), {"data": x})
    np.testing.assert_allclose(y, naive_lrn(x, **attrs), rtol=1e-12)


@pytest.mark.parametrize("attrs", CASES)
def test_gradient_matches_finite_differences(attrs):
    x = np.random.default_rng(1).standard_normal((2, 6, 2, 2)) * 1.5
    check_gradient("LRN", {"data": x}, attrs)


def test_tmp_norm_is_hidden_second_output():
    sym = single_op("LRN", ["data"], nsize=3)
    assert len(sym.entries) == 1
    assert sym.entries[0][0].output_names() == ["op_output", "op_tmp_norm"]


@pytest.mark.parametrize("name", case_ids("lrn.npz"))
def test_matches_mxnet(name):
    case, arrays = next((c, a) for c, a in cases("lrn.npz") if c["name"] == name)
    check_case(case, arrays)


@pytest.mark.parametrize("nsize", [1, 3])
def test_tdl_covers_what_the_kernel_reads(nsize):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 6, 2, 2))
    attrs = dict(alpha=0.5, beta=0.75, knorm=1.0, nsize=nsize)
    check_op_tdl("LRN", [x], attrs, samples=15)
    node = single_op("LRN", ["data"], **attrs).entries[0][0]
    _, norm = execute(Symbol([(node, 0), (node, 1)]), {"data": x})[0]
    check_op_tdl("_backward_LRN", [rng.standard_normal(x.shape), x, norm], attrs, samples=15,
                 perturb={"tmp_norm": lambda r, s: r.random(s) + 1.0})


@pytest.mark.parametrize("attrs, shape, needle", [
    (dict(nsize=0), (1, 3, 2, 2), "nsize"),
    (dict(nsize=4), (1, 3, 2, 2), "nsize"),
    (dict(nsize=3), (1, 3, 2), "4-D"),
])
def test_bad_input_names_node(attrs, shape, needle):
    sym = at.sym.create("LRN", at.sym.Variable("data"), name="lrn_bad", **attrs)
    with pytest.raises(Error, match=needle) as info:
        sym.infer_shape(data=shape)
    assert "lrn_bad" in str(info.value)


def test_planner_regions_cover_what_the_kernels_read():
    from tdl_regions import check_regions

    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 6, 2, 4))
    attrs = dict(alpha=0.5, beta=0.75, knorm=1.0, nsize=3)
    check_regions("LRN", [x], attrs)
    node = single_op("LRN", ["data"], **attrs).entries[0][0]
    _, norm = execute(Symbol([(node, 0), (node, 1)]), {"data": x})[0]
    check_regions("_backward_LRN", [rng.standard_normal(x.shape), x, norm], attrs,
                  perturb={2: lambda r, s: r.random(s) + 1.0})
