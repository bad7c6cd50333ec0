"""Embedding: row gather forward, scatter-add weight gradient, MXNet's index clipping."""
import numpy as np
import pytest

import autotile as at
from autotile import _core
from autotile.errors import Error
from gradcheck import analytic_gradient, check_gradient, forward, single_op
import mx_shape_fixtures
from tdl_interp import check_op_tdl

W = np.random.default_rng(0).standard_normal((5, 3))
ATTRS = {"input_dim": 5, "output_dim": 3}


def test_forward_gathers_rows():
    data = np.array([[0.0, 4.0], [2.0, 2.0]])
    (out,) = forward(single_op("Embedding", ["data", "weight"], **ATTRS), {"data": data, "weight": W})
    assert out.shape == (2, 2, 3)
    for i in range(2):
        for j in range(2):
            np.testing.assert_array_equal(out[i, j], W[int(data[i, j])])


def test_out_of_range_indices_are_clipped():
    data = np.array([-3.0, 7.0, 4.9, -0.5])
    (out,) = forward(single_op("Embedding", ["data", "weight"], **ATTRS), {"data": data, "weight": W})
    np.testing.assert_array_equal(out, W[[0, 4, 4, 0]])


def test_weight_gradient_accumulates_repeated_indices():
    data = np.array([[1.0, 3.0, 1.0], [1.0, 0.0, 9.0]])
    dy = np.random.default_rng(1).standard_normal((2, 3, 3))
    g_data, g_w = analytic_gradient(single_op("Embedding", ["data", "weight"], **ATTRS), {"data": data, "weight": W}, [dy])
    assert g_data is None
    want = np.zeros_like(W)
    for i in range(2):
        for j in range(3):
            want[min(int(data[i, j]), 4)] += dy[i, j]
    np.testing.assert_allclose(g_w, want, rtol=1e-12)


def test_weight_gradient_finite_differences():
    check_gradient("Embedding", {"data": np.array([[1.0, 3.0], [1.0, 1.0]]), "weight": W}, ATTRS, wrt=["weight"])


def test_shape_inference_and_errors():
    e = at.sym.Embedding(at.sym.Variable("d"), input_dim=5, output_dim=3, name="emb")
    args, outs, _ = e.infer_shape(d=(4, 7))
    assert args == [(4, 7), (5, 3)] and outs == [(4, 7, 3)]
    with pytest.raises(Error, match=r"emb.*Embedding.*\(6, 3\).*\(5, 3\)"):
        e.infer_shape(d=(4, 7), emb_weight=(6, 3))
    assert e.infer_type(d="float32")[1] == ["float32"]
    e16 = at.sym.Embedding(at.sym.Variable("d"), input_dim=5, output_dim=3, dtype="float16")
    assert e16.infer_type(d="float32")[0] == ["float32", "float16"]


@pytest.mark.parametrize("name", mx_shape_fixtures.names("embedding"))
def test_matches_mxnet(name):
    mx_shape_fixtures.check(name)


def test_tdl_reads_and_strategies():
    perturb = {"data": lambda rng, shape: rng.integers(0, 5, shape).astype(float)}
    data = np.array([[1.0, 3.0], [4.0, 1.0]])
    text = check_op_tdl("Embedding", [data, W], ATTRS, perturb=perturb)
    got = {s["var"]: s for s in _core.analyze_tdl(text, [(2, 2), (5, 3)], [(2, 2, 3)], 2)["strategies"]}
    assert got["i0"]["inputs"][1]["replicate"]  # batch split: every worker needs the whole table
    assert got["i0"]["inputs"][0]["per_worker"] == [(0, 1), (1, 2)]
    dy = np.random.default_rng(2).standard_normal((2, 2, 3))
    text = check_op_tdl("_backward_Embedding", [dy, data], ATTRS, perturb=perturb)
    got = {s["var"]: s for s in _core.analyze_tdl(text, [(2, 2, 3), (2, 2)], [(5, 3)], 2)["strategies"]}
    assert got["i0"]["outputs"][0]["partial"]  # a batch split leaves partial weight gradients
