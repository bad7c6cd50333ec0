"""LayerNorm: forward against per-row loops, gradients against finite differences, the TDL
(batch/sequence splits read own rows, a split of the normalised axis reads whole rows and is
exact), and Transformer-shaped graphs on 2 and 4 virtual devices equal to one device."""
import numpy as np
import pytest

import autotile as at
from autotile import _core
from autotile.backend.reference import execute
from autotile.symbol.symbol import Symbol
from device_checks import check_planned_step, check_random_plans
from gradcheck import check_gradient, single_op
from tdl_op_checks import check_tdl

NAMES = ["data", "gamma", "beta"]


def _values(rng, shape, axis):
    c = shape[axis]
    return {"data": rng.standard_normal(shape) * 3 + 1, "gamma": rng.standard_normal(c), "beta": rng.standard_normal(c)}


def naive_layer_norm(x, gamma, beta, axis, eps):
    """Loops over the lines along `axis` with explicit Python sums (biased variance)."""
    x = np.moveaxis(x, axis, -1)
    out, means, stds = np.empty_like(x), np.empty(x.shape[:-1]), np.empty(x.shape[:-1])
    for idx in np.ndindex(*x.shape[:-1]):
        row = list(x[idx])
        mean = sum(row) / len(row)
        var = sum((v - mean) ** 2 for v in row) / len(row)
        std = (var + eps) ** 0.5
        out[idx] = [(v - mean) / std * g + b for v, g, b in zip(row, gamma, beta)]
        means[idx], stds[idx] = mean, std
    return np.moveaxis(out, -1, axis), np.expand_dims(means, axis), np.expand_dims(stds, axis)


@pytest.mark.parametrize("shape, axis", [((4, 6), -1), ((2, 3, 5), -1), ((2, 3, 5), 1), ((3, 4), 0), ((7,), 0)])
def test_forward_matches_loops(shape, axis):
    v = _values(np.random.default_rng(0), shape, axis)
    sym = single_op("LayerNorm", NAMES, axis=axis, eps=1e-3, output_mean_var=True)
    node = sym.entries[0][0]
    outs, _, _ = execute(Symbol([(node, i) for i in range(3)]), v)
    want = naive_layer_norm(v["data"], v["gamma"], v["beta"], axis % len(shape), 1e-3)
    for got, w in zip(outs, want):
        np.testing.assert_allclose(got, w, rtol=1e-10, atol=1e-12)


def test_default_has_one_output_and_keeps_float32():
    v = {k: a.astype(np.float32) for k, a in _values(np.random.default_rng(1), (2, 8), 1).items()}
    sym = single_op("LayerNorm", NAMES)
    assert sym.list_outputs() == ["op_output"]
    (y,) = execute(sym, v)[0]
    assert y.dtype == np.float32
    want = naive_layer_norm(v["data"].astype(np.float64), v["gamma"], v["beta"], 1, 1e-5)[0]
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape, axis", [((3, 4), -1), ((2, 2, 3), 1), ((3, 2), 0)])
def test_gradient(shape, axis):
    check_gradient("LayerNorm", _values(np.random.default_rng(2), shape, axis), {"axis": axis, "eps": 1e-2})


def test_gradient_through_statistics_outputs():
    # output_mean_var: the mean/std outputs' gradients reach data too (MXNet drops them)
    check_gradient("LayerNorm", _values(np.random.default_rng(3), (2, 4), 1), {"output_mean_var": True, "eps": 1e-2})


def test_shape_inference_and_errors():
    ln = at.sym.LayerNorm(at.sym.Variable("x"), name="ln")
    args, outs, _ = ln.infer_shape(x=(2, 5, 8))
    assert args == [(2, 5, 8), (8,), (8,)] and outs == [(2, 5, 8)]
    assert ln.list_arguments() == ["x", "ln_gamma", "ln_beta"]
    with pytest.raises(at.Error, match=r"ln.*gamma.*\(7,\).*\(8,\)"):
        ln.infer_shape(x=(2, 5, 8), ln_gamma=(7,))
    with pytest.raises(at.Error, match=r"ln.*axis=3 is out of range"):
        at.sym.LayerNorm(at.sym.Variable("x"), axis=3, name="ln").infer_shape(x=(2, 5, 8))


@pytest.mark.parametrize("shape, axis, mean_var", [((4, 6), -1, False), ((2, 4, 6), -1, False),
                                                   ((4, 2, 6), 1, False), ((4, 6), -1, True)])
def test_tdl(shape, axis, mean_var):
    rng = np.random.default_rng(4)
    v = _values(rng, shape, axis)
    attrs = {"axis": axis, "output_mean_var": mean_var}
    check_tdl("LayerNorm", [v[n] for n in NAMES], attrs)
    dy = [rng.standard_normal(shape), v["data"], v["gamma"]]
    check_tdl("_backward_LayerNorm", dy, {"axis": axis})
    if mean_var:
        stat = tuple(1 if d == axis % len(shape) else n for d, n in enumerate(shape))
        check_tdl("_backward_LayerNorm", dy + [rng.standard_normal(stat), rng.standard_normal(stat)],
                  {"axis": axis, "stat_grads": True})


def test_tdl_strategies():
    shape = (4, 6, 8)
    text = at.ops.get("LayerNorm").tdl(at.ops.parse_attrs(at.ops.get("LayerNorm"), {}, "ln"), [shape, (8,), (8,)],
                                       [shape])
    got = {s["var"]: s for s in _core.analyze_tdl(text, [shape, (8,), (8,)], [shape], 2)["strategies"]}
    assert set(got) == {"i0", "i1", "c"}
    for var, dim in (("i0", 0), ("i1", 1)):  # batch and sequence: each worker reads its own rows
        need = got[var]["inputs"][0]
        assert need["dim"] == dim and need["per_worker"] == [(0, shape[dim] // 2), (shape[dim] // 2, shape[dim])]
        assert not got[var]["reduction"]
    # the normalised axis: output split, but every worker reads whole rows (no partial statistics)
    assert not got["c"]["reduction"] and not got["c"]["outputs"][0]["partial"]
    assert got["c"]["inputs"][0]["per_worker"] == [(0, 8), (0, 8)]
    # backward: a batch split leaves partial parameter gradients, dx split by rows
    bwd = at.ops.get("_backward_LayerNorm")
    text = bwd.tdl(at.ops.parse_attrs(bwd, {}, "b"), [shape, shape, (8,)], [shape, (8,), (8,)])
    got = {s["var"]: s for s in _core.analyze_tdl(text, [shape, shape, (8,)], [shape, (8,), (8,)], 2)["strategies"]}
    assert [o["partial"] for o in got["i1"]["outputs"]] == [False, True, True]
    assert [o["partial"] for o in got["c"]["outputs"]] == [False, False, False]


def _block(d_ff=8):
    """Pre-LN residual MLP block as Transformers write it: x + W2 gelu(W1 LN(x)) then a final LN."""
    x = at.sym.Variable("data")
    h = at.sym.LayerNorm(x, name="ln1")
    h = at.sym.FullyConnected(h, num_hidden=d_ff, flatten=False, name="fc1")
    h = at.sym.gelu(h, approximate="tanh", name="act")
    h = at.sym.FullyConnected(h, num_hidden=8, flatten=False, name="fc2")
    h = at.sym.elemwise_add(x, h, name="res")
    return at.sym.LayerNorm(h, name="ln2")


def _block_values(rng, shape, d_ff=8):
    vals = {"data": rng.standard_normal(shape).astype(np.float32)}
    for ln in ("ln1", "ln2"):
        vals[f"{ln}_gamma"] = rng.uniform(0.5, 1.5, 8).astype(np.float32)
        vals[f"{ln}_beta"] = rng.standard_normal(8).astype(np.float32) * 0.1
    vals["fc1_weight"] = rng.standard_normal((d_ff, 8)).astype(np.float32) * 0.3
    vals["fc1_bias"] = rng.standard_normal(d_ff).astype(np.float32) * 0.1
    vals["fc2_weight"] = rng.standard_normal((8, d_ff)).astype(np.float32) * 0.3
    vals["fc2_bias"] = rng.standard_normal(8).astype(np.float32) * 0.1
    return vals


@pytest.mark.parametrize("devices", [2, 4])
def test_planned_block_equals_one_device(devices):
    shapes = {"data": (4, 4, 8)}
    check_planned_step(_block(), shapes, _block_values(np.random.default_rng(5), shapes["data"]), devices)


@pytest.mark.parametrize("factors", [[2], [2, 2]])
def test_every_split_of_layer_norm_on_tiles(factors):
    # random plans split the normalised axis too: whole rows are fetched, outputs cropped
    shapes = {"data": (4, 4, 8)}
    check_random_plans(_block(), shapes, _block_values(np.random.default_rng(6), shapes["data"]), factors,
                       seed=50 + sum(factors), n_plans=8)
