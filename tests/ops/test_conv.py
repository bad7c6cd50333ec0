import time

import numpy as np
import pytest

import autotile as at
from autotile.errors import Error
from gradcheck import check_gradient, forward, single_op
from mxfixtures import case_ids, cases, check_case


def naive_conv(x, w, b, stride, pad, dilate, groups):
    """Direct loops over every output element (the definition, no im2col)."""
    nd = x.ndim - 2
    n, cin = x.shape[:2]
    cout = w.shape[0]
    cin_g, cout_g = cin // groups, cout // groups
    kernel = w.shape[2:]
    out_sp = [(x.shape[2 + i] + 2 * pad[i] - dilate[i] * (kernel[i] - 1) - 1) // stride[i] + 1 for i in range(nd)]
    y = np.zeros((n, cout) + tuple(out_sp))
    for b_ in range(n):
        for co in range(cout):
            g = co // cout_g
            for o in np.ndindex(*out_sp):
                acc = 0.0 if b is None else b[co]
                for ci in range(cin_g):
                    for k in np.ndindex(*kernel):
                        pos = [o[i] * stride[i] + k[i] * dilate[i] - pad[i] for i in range(nd)]
                        if all(0 <= pos[i] < x.shape[2 + i] for i in range(nd)):
                            acc += x[(b_, g * cin_g + ci) + tuple(pos)] * w[(co, ci) + k]
                y[(b_, co) + o] = acc
    return y


CASES = [  # (data shape, num_filter, kernel, stride, pad, dilate, groups)
    ((2, 3, 6, 7), 4, (3, 3), (1, 1), (0, 0), (1, 1), 1),
    ((2, 3, 7, 6), 4, (3, 2), (2, 2), (1, 1), (1, 1), 1),
    ((1, 4, 8, 8), 6, (3, 3), (1, 2), (2, 1), (2, 2), 2),
    ((2, 4, 5, 5), 4, (3, 3), (1, 1), (1, 1), (1, 1), 4),  # depthwise
    ((2, 2, 5, 5), 6, (2, 2), (2, 1), (0, 1), (1, 1), 2),  # channel multiplier 3
    ((2, 3, 9), 5, (3,), (2,), (1,), (2,), 1),  # 1-D
    ((1, 2, 4, 4, 5), 3, (2, 2, 3), (1, 2, 1), (1, 0, 1), (1, 1, 1), 1),  # 3-D
]


def _attrs(num_filter, kernel, stride, pad, dilate, groups, no_bias=False):
    return dict(num_filter=num_filter, kernel=kernel, stride=stride, pad=pad, dilate=dilate, num_group=groups,
                no_bias=no_bias)


def _inputs(rng, shape, num_filter, kernel, groups, no_bias=False):
    vals = {"data": rng.standard_normal(shape),
            "weight": rng.standard_normal((num_filter, shape[1] // groups) + tuple(kernel))}
    if not no_bias:
        vals["bias"] = rng.standard_normal(num_filter)
    return vals


@pytest.mark.parametrize("case", CASES)
def test_forward_matches_naive_loops(case):
    shape, nf, kernel, stride, pad, dilate, groups = case
    rng = np.random.default_rng(0)
    vals = _inputs(rng, shape, nf, kernel, groups)
    sym = single_op("Convolution", list(vals), **_attrs(nf, kernel, stride, pad, dilate, groups))
    (y,) = forward(sym, vals)
    want = naive_conv(vals["data"], vals["weight"], vals["bias"], stride, pad, dilate, groups)
    np.testing.assert_allclose(y, want, rtol=1e-10, atol=1e-10)
    _, out_shapes, _ = sym.infer_shape(data=shape)
    assert out_shapes[0] == want.shape


@pytest.mark.parametrize("case", CASES[:6])
def test_gradient_matches_finite_differences(case):
    shape, nf, kernel, stride, pad, dilate, groups = case
    rng = np.random.default_rng(1)
    check_gradient("Convolution", _inputs(rng, shape, nf, kernel, groups), _attrs(nf, kernel, stride, pad, dilate, groups))


def test_gradient_3d_no_bias():
    rng = np.random.default_rng(2)
    shape, nf, kernel = (1, 2, 3, 4, 3), 2, (2, 2, 2)
    check_gradient("Convolution", _inputs(rng, shape, nf, kernel, 1, no_bias=True),
                   _attrs(nf, kernel, (2, 1, 1), (0, 1, 1), (1, 2, 1), 1, no_bias=True))


def test_float32_stays_float32():
    rng = np.random.default_rng(3)
    vals = {k: v.astype(np.float32) for k, v in _inputs(rng, (1, 2, 5, 5), 3, (3, 3), 1).items()}
    sym = single_op("Convolution", list(vals), num_filter=3, kernel=(3, 3))
    (y,) = forward(sym, vals)
    assert y.dtype == np.float32


@pytest.mark.parametrize("name", case_ids("conv.npz"))
def test_matches_mxnet(name):
    case, arrays = next((c, a) for c, a in cases("conv.npz") if c["name"] == name)
    check_case(case, arrays)


def test_tdl_text():
    op = at.ops.get("Convolution")
    attrs = at.ops.parse_attrs(op, {"kernel": "(3, 3)", "num_filter": "8", "pad": "(1, 1)", "stride": "(2, 2)"})
    assert op.tdl(attrs, [(2, 4, 9, 9), (8, 4, 3, 3), (8,)], [(2, 8, 5, 5)]) == (
        "data, weight, bias -> out: out[n, co, y, x] = sum(ci, ky, kx) "
        "{ data[n, ci, 2*y + ky - 1, 2*x + kx - 1] * weight[co, ci, ky, kx] + (ci + ky + kx == 0) * bias[co] }")
    dw = at.ops.parse_attrs(op, {"kernel": "(3,)", "num_filter": "8", "num_group": "4", "dilate": "(2,)"})
    assert "data[n, co / 2, x + 2*kx]" in op.tdl(dw, [(2, 4, 9), (8, 1, 3), (8,)], [(2, 8, 5)])
    bwd = at.ops.get("_backward_Convolution_data")
    battrs = at.ops.parse_attrs(bwd, {"kernel": "(3, 3)", "num_filter": "8", "pad": "(1, 1)", "stride": "(2, 2)",
                                      "data_spatial": "(9, 9)"})
    assert bwd.tdl(battrs, [(2, 8, 5, 5), (8, 4, 3, 3)], [(2, 4, 9, 9)]) == (
        "dy, weight -> dx: dx[n, ci, iy, ix] = sum(co, ky, kx) "
        "{ dy[n, co, (iy - ky + 1) / 2, (ix - kx + 1) / 2] * weight[co, ci, ky, kx] }")


@pytest.mark.parametrize("attrs, shape, needle", [
    (dict(kernel=(3, 3), num_filter=4, layout="NHWC"), (1, 4, 5, 5), "layout"),
    (dict(kernel=(8, 8), num_filter=4, pad=(1, 1)), (1, 4, 5, 5), "kernel"),
    (dict(kernel=(3, 3), num_filter=5, num_group=2), (1, 4, 5, 5), "num_filter"),
    (dict(kernel=(3, 3), num_filter=4, num_group=3), (1, 4, 5, 5), "num_group"),
    (dict(kernel=(3, 3), num_filter=4, stride=(1, 1, 1)), (1, 4, 5, 5), "stride"),
    (dict(kernel=(3, 3), num_filter=4), (1, 4, 5), "data"),
])
def test_bad_attributes_name_node_and_attribute(attrs, shape, needle):
    x = at.sym.Variable("data")
    sym = at.sym.create("Convolution", x, name="conv_bad", **attrs)
    with pytest.raises(Error, match=needle) as info:
        sym.infer_shape(data=shape)
    assert "conv_bad" in str(info.value)


def test_unknown_cudnn_tune_value_is_rejected():
    with pytest.raises(Error, match="cudnn_tune"):
        at.sym.create("Convolution", at.sym.Variable("data"), name="c", kernel=(3, 3), num_filter=2, cudnn_tune="bogus")


@pytest.mark.slow
def test_vgg16_forward_batch2_takes_seconds():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 224, 224), dtype=np.float32)
    cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
    net = at.sym.Variable("data")
    values = {"data": x}
    cin = 3
    for i, c in enumerate(cfg):
        if c == "M":
            net = at.sym.create("Pooling", net, kernel=(2, 2), stride=(2, 2), pool_type="max")
            continue
        net = at.sym.create("Convolution", net, name=f"conv{i}", kernel=(3, 3), pad=(1, 1), num_filter=c)
        net = at.sym.create("Activation", net, act_type="relu")
        values[f"conv{i}_weight"] = (rng.standard_normal((c, cin, 3, 3)) * np.sqrt(2 / (9 * cin))).astype(np.float32)
        values[f"conv{i}_bias"] = np.zeros(c, np.float32)
        cin = c
    start = time.perf_counter()
    (y,) = forward(net, values, is_train=False)
    elapsed = time.perf_counter() - start
    assert y.shape == (2, 512, 7, 7)
    assert elapsed < 30, f"VGG-16 conv stack forward took {elapsed:.1f} s"


@pytest.mark.parametrize("case", CASES)
def test_tdl_describes_the_kernel(case):
    from tdl_interp import check_op_tdl

    shape, nf, kernel, stride, pad, dilate, groups = case
    rng = np.random.default_rng(4)
    vals = _inputs(rng, shape, nf, kernel, groups)
    attrs = _attrs(nf, kernel, stride, pad, dilate, groups)
    exact = groups == 1 or shape[1] == groups  # ':' (grouped with Cin_g > 1) is a superset
    check_op_tdl("Convolution", list(vals.values()), attrs, exact=exact, samples=15)
    geo_out = naive_conv(vals["data"], vals["weight"], None, stride, pad, dilate, groups).shape
    dy = rng.standard_normal(geo_out)
    common = dict(kernel=kernel, stride=stride, pad=pad, dilate=dilate, num_filter=nf, num_group=groups)
    depthwise = groups == shape[1] == nf  # dx channel c reads dy and weight channel c: exact
    check_op_tdl("_backward_Convolution_data", [dy, vals["weight"]], dict(common, data_spatial=shape[2:]),
                 exact=depthwise, samples=15)
    text = check_op_tdl("_backward_Convolution_data", [dy, vals["weight"], vals["data"]], common, samples=15)
    assert text.startswith("dy, weight, data -> dx:") and "data[" not in text  # data only donates its shape
    check_op_tdl("_backward_Convolution_weight", [dy, vals["data"]], common, exact=exact, samples=15)
    check_op_tdl("_backward_Convolution_bias", [dy], common, exact=True, samples=15)


@pytest.mark.parametrize("case", CASES[:6])
def test_planner_regions_cover_what_the_kernels_read(case):
    """The C++ analysis' per-worker regions (what a partitioned run fetches) suffice."""
    from tdl_regions import check_regions

    shape, nf, kernel, stride, pad, dilate, groups = case
    rng = np.random.default_rng(5)
    vals = _inputs(rng, shape, nf, kernel, groups)
    attrs = _attrs(nf, kernel, stride, pad, dilate, groups)
    n = check_regions("Convolution", list(vals.values()), attrs)
    dy = rng.standard_normal(naive_conv(vals["data"], vals["weight"], None, stride, pad, dilate, groups).shape)
    common = dict(kernel=kernel, stride=stride, pad=pad, dilate=dilate, num_filter=nf, num_group=groups)
    n += check_regions("_backward_Convolution_data", [dy, vals["weight"], vals["data"]], common)
    n += check_regions("_backward_Convolution_weight", [dy, vals["data"]], common)
    n += check_regions("_backward_Convolution_bias", [dy], common)
    assert n > 0


def test_depthwise_channel_tile_runs_with_the_node_attributes():
    """A co slab of a depthwise conv (what a channel split runs) gives that slab of the output."""
    rng = np.random.default_rng(6)
    x, w, b = rng.standard_normal((2, 4, 5, 5)), rng.standard_normal((4, 1, 3, 3)), rng.standard_normal(4)
    op = at.ops.get("Convolution")
    attrs = at.ops.parse_attrs(op, {"kernel": "(3, 3)", "num_filter": "4", "num_group": "4", "pad": "(1, 1)"})
    from autotile.ops.registry import KernelContext
    full = op.forward(attrs, [x, w, b], KernelContext())[0]
    tile = op.forward(attrs, [x[:, 2:], w[2:], b[2:]], KernelContext())[0]
    np.testing.assert_allclose(tile, full[:, 2:], rtol=1e-12)
    dy = rng.standard_normal(full.shape)
    bw = at.ops.get("_backward_Convolution_weight")
    battrs = at.ops.parse_attrs(bw, {"kernel": "(3, 3)", "num_filter": "4", "num_group": "4", "pad": "(1, 1)"})
    dw = bw.forward(battrs, [dy, x], KernelContext())[0]
    np.testing.assert_allclose(bw.forward(battrs, [dy[:, 2:], x[:, 2:]], KernelContext())[0], dw[2:], rtol=1e-12)


def test_depthwise_data_gradient_splits_channels_as_outputs():
    """The depthwise data gradient's channel split is an output split of dx (dy and weight
    read at the same channels), never a reduction over co: a co slab with all the node's
    groups is no convolution a kernel runs ('num_filter'=288 is not divisible by
    'num_group'=1152 on EfficientNet's 4-device step)."""
    from autotile import _core

    op = at.ops.get("_backward_Convolution_data")
    attrs = at.ops.parse_attrs(op, {"kernel": "(3, 3)", "pad": "(1, 1)", "num_filter": "8", "num_group": "8"})
    ins, outs = [(2, 8, 6, 6), (8, 1, 3, 3), (2, 8, 6, 6)], [(2, 8, 6, 6)]
    text = op.tdl(attrs, ins, outs)
    strategies = {s["var"]: s for s in _core.analyze_tdl(text, ins, outs, 2)["strategies"]}
    assert "co" not in strategies and not strategies["ci"]["reduction"], text
    # dy split along its channel dim, weight along its filter dim
    assert [(i["dim"], i["per_worker"]) for i in strategies["ci"]["inputs"][:2]] == [(1, [(0, 4), (4, 8)]), (0, [(0, 4), (4, 8)])]


@pytest.mark.parametrize("shape, nf, kernel, stride, groups", [
    ((2, 3, 64, 64), 32, (3, 3), (2, 2), 1),  # RegNetY's stem
    ((2, 48, 32, 32), 48, (3, 3), (2, 2), 6),  # its grouped stride-2 conv
    ((2, 64, 16, 16), 64, (3, 3), (1, 1), 64),  # depthwise
    ((2, 440, 4, 4), 440, (1, 1), (1, 1), 1),  # a wide 1x1 conv
])
def test_float32_kernels_track_float64(shape, nf, kernel, stride, groups):
    """The float32 forward and gradient kernels lose no more than float32 rounding of the
    result (relative 1e-5 of each output's largest value) against the same kernels in
    float64: nothing in the im2col/col2im path accumulates in lower precision."""
    from float32_checks import assert_float32_tracks_float64

    rng = np.random.default_rng(9)
    vals = _inputs(rng, shape, nf, kernel, groups)
    pad = tuple(k // 2 for k in kernel)
    common = dict(kernel=kernel, stride=stride, pad=pad, num_filter=nf, num_group=groups)
    (out,) = forward(single_op("Convolution", ["data", "weight", "bias"], **common), vals)
    dy = rng.standard_normal(out.shape)
    for name, inputs in [("Convolution", [vals["data"], vals["weight"], vals["bias"]]),
                         ("_backward_Convolution_data", [dy, vals["weight"], vals["data"]]),
                         ("_backward_Convolution_weight", [dy, vals["data"]]),
                         ("_backward_Convolution_bias", [dy])]:
        assert_float32_tracks_float64(name, common, inputs, 1e-5)
