"""GroupNorm and InstanceNorm: forward against loops over (sample, group), the special cases
(one group of a 2-D input is LayerNorm, one channel per group is InstanceNorm), gradients
against finite differences, the TDL (channel splits read whole groups, with the tile hook), and
a graph on virtual devices equal to one device."""
import numpy as np
import pytest

import autotile as at
from autotile import _core
from device_checks import check_planned_step, check_random_plans
from gradcheck import check_gradient, forward, single_op
from tdl_op_checks import check_tdl

NAMES = ["data", "gamma", "beta"]


def _values(rng, shape):
    return {"data": rng.standard_normal(shape) * 2 + 1, "gamma": rng.standard_normal(shape[1]),
            "beta": rng.standard_normal(shape[1])}


def naive_group_norm(x, gamma, beta, groups, eps):
    out = np.empty_like(x)
    per = x.shape[1] // groups
    for n in range(x.shape[0]):
        for g in range(groups):
            chans = range(g * per, (g + 1) * per)
            vals = [v for c in chans for v in x[n, c].reshape(-1)]
            mean = sum(vals) / len(vals)
            var = sum((v - mean) ** 2 for v in vals) / len(vals)
            for c in chans:
                out[n, c] = (x[n, c] - mean) / (var + eps) ** 0.5 * gamma[c] + beta[c]
    return out


@pytest.mark.parametrize("shape, groups", [((2, 4, 3, 2), 2), ((2, 6, 5), 3), ((3, 4), 2), ((2, 4, 3), 1),
                                           ((2, 4, 3), 4)])
def test_group_norm_matches_loops(shape, groups):
    v = _values(np.random.default_rng(0), shape)
    (y,) = forward(single_op("GroupNorm", NAMES, num_groups=groups, eps=1e-3), v)
    np.testing.assert_allclose(y, naive_group_norm(v["data"], v["gamma"], v["beta"], groups, 1e-3),
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 3, 2, 3)])
def test_instance_norm_matches_loops(shape):
    v = _values(np.random.default_rng(1), shape)
    (y,) = forward(single_op("InstanceNorm", NAMES), v)  # MXNet's default eps 1e-3
    np.testing.assert_allclose(y, naive_group_norm(v["data"], v["gamma"], v["beta"], shape[1], 1e-3),
                               rtol=1e-10, atol=1e-12)


def test_one_group_of_rows_is_layer_norm():
    v = _values(np.random.default_rng(2), (3, 6))
    (g,) = forward(single_op("GroupNorm", NAMES, num_groups=1, eps=1e-4), v)
    (ln,) = forward(single_op("LayerNorm", NAMES, eps=1e-4), v)
    np.testing.assert_allclose(g, ln, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("op, shape, attrs", [("GroupNorm", (2, 4, 3), {"num_groups": 2}),
                                              ("GroupNorm", (2, 4), {"num_groups": 2}),
                                              ("GroupNorm", (1, 3, 2, 2), {"num_groups": 1}),
                                              ("InstanceNorm", (2, 2, 3), {}),
                                              ("InstanceNorm", (1, 2, 2, 2), {})])
def test_gradient(op, shape, attrs):
    check_gradient(op, _values(np.random.default_rng(3), shape), {**attrs, "eps": 1e-2})


def test_shape_inference_and_errors():
    gn = at.sym.GroupNorm(at.sym.Variable("x"), num_groups=3, name="gn")
    args, outs, _ = gn.infer_shape(x=(2, 6, 4, 4))
    assert args == [(2, 6, 4, 4), (6,), (6,)] and outs == [(2, 6, 4, 4)]
    with pytest.raises(at.Error, match=r"gn.*num_groups=4 must .*divide the 6 channels"):
        at.sym.GroupNorm(at.sym.Variable("x"), num_groups=4, name="gn").infer_shape(x=(2, 6, 4))
    with pytest.raises(at.Error, match=r"gn.*beta has shape \(3,\), expected \(6,\)"):
        gn.infer_shape(x=(2, 6, 4), gn_beta=(3,))
    with pytest.raises(at.Error, match=r"inorm.*rank >= 3"):
        at.sym.InstanceNorm(at.sym.Variable("x"), name="inorm").infer_shape(x=(2, 6))


@pytest.mark.parametrize("op, shape, attrs", [("GroupNorm", (2, 6, 4), {"num_groups": 2}),
                                              ("GroupNorm", (2, 6, 2, 3), {"num_groups": 3}),
                                              ("GroupNorm", (4, 6), {"num_groups": 1}),
                                              ("GroupNorm", (2, 6, 3), {"num_groups": 6}),
                                              ("InstanceNorm", (2, 6, 4), {}),
                                              ("InstanceNorm", (2, 2, 3, 6), {})])
def test_tdl(op, shape, attrs):
    # k = 2, 3, 4 over 6 channels in groups of 3 or 2: splits that cut groups are included
    rng = np.random.default_rng(4)
    v = _values(rng, shape)
    check_tdl(op, [v[n] for n in NAMES], attrs, ks=(2, 3))
    check_tdl(f"_backward_{op}", [rng.standard_normal(shape), v["data"], v["gamma"]], attrs, ks=(2, 3))


def _strategies(op_name, attrs, ins, outs, k):
    op = at.ops.get(op_name)
    parsed = at.ops.parse_attrs(op, {a: str(b) for a, b in attrs.items()}, "op")
    return {s["var"]: s for s in _core.analyze_tdl(op.tdl(parsed, ins, outs), ins, outs, k)["strategies"]}


def test_channel_split_reads_whole_groups():
    shape = (3, 6, 3)
    got = _strategies("GroupNorm", {"num_groups": 2}, [shape, (6,), (6,)], [shape], 3)
    assert set(got) == {"n", "c", "i2"}
    # channels [0,2), [2,4), [4,6) in groups [0,3), [3,6): the middle worker reads both groups
    assert got["c"]["inputs"][0]["per_worker"] == [(0, 3), (0, 6), (3, 6)]
    assert got["c"]["inputs"][1]["per_worker"] == [(0, 2), (2, 4), (4, 6)]
    assert got["i2"]["inputs"][0]["per_worker"] == [(0, 3)] * 3  # spatial: whole feature maps
    bwd = _strategies("_backward_GroupNorm", {"num_groups": 2}, [shape, shape, (6,)], [shape, (6,), (6,)], 3)
    assert set(bwd) == {"n", "c"}
    assert [o["partial"] for o in bwd["n"]["outputs"]] == [False, True, True]


def _net():
    x = at.sym.Variable("data")
    h = at.sym.GroupNorm(x, num_groups=2, name="gn")
    h = at.sym.silu(h, name="act")
    h = at.sym.InstanceNorm(h, name="inorm")
    return at.sym.FullyConnected(h, num_hidden=4, flatten=False, name="fc")


def _net_values(rng):
    return {"data": rng.standard_normal((4, 4, 8)).astype(np.float32),
            "gn_gamma": rng.uniform(0.5, 1.5, 4).astype(np.float32), "gn_beta": rng.standard_normal(4).astype(np.float32),
            "inorm_gamma": rng.uniform(0.5, 1.5, 4).astype(np.float32),
            "inorm_beta": rng.standard_normal(4).astype(np.float32),
            "fc_weight": (rng.standard_normal((4, 8)) * 0.3).astype(np.float32),
            "fc_bias": rng.standard_normal(4).astype(np.float32)}


@pytest.mark.parametrize("devices", [2, 4])
def test_planned_net_equals_one_device(devices):
    check_planned_step(_net(), {"data": (4, 4, 8)}, _net_values(np.random.default_rng(5)), devices)


@pytest.mark.parametrize("factors", [[2], [2, 2], [4]])
def test_every_split_on_tiles(factors):
    check_random_plans(_net(), {"data": (4, 4, 8)}, _net_values(np.random.default_rng(6)), factors,
                       seed=70 + sum(factors), n_plans=8)
