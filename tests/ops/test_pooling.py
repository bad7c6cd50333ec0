import math

import numpy as np
import pytest

import autotile as at
from autotile.errors import Error
from gradcheck import check_gradient, forward, single_op
from mxfixtures import case_ids, cases, check_case
from tdl_interp import check_op_tdl


def naive_pool(x, kernel, stride, pad, pool_type, full=False, include_pad=True):
    """Loops over windows, written from MXNet's pool.h rules (clip to padded input, then to input)."""
    nd = x.ndim - 2
    sp = x.shape[2:]
    rnd = math.ceil if full else math.floor
    out = [1 + int(rnd((sp[i] + 2 * pad[i] - kernel[i]) / stride[i])) for i in range(nd)]
    y = np.zeros(x.shape[:2] + tuple(out))
    for n in range(x.shape[0]):
        for c in range(x.shape[1]):
            for o in np.ndindex(*out):
                lo = [o[i] * stride[i] - pad[i] for i in range(nd)]
                hi = [min(lo[i] + kernel[i], sp[i] + pad[i]) for i in range(nd)]
                count = int(np.prod([hi[i] - lo[i] for i in range(nd)]))
                lo = [max(v, 0) for v in lo]
                hi = [min(hi[i], sp[i]) for i in range(nd)]
                if not include_pad:
                    count = int(np.prod([hi[i] - lo[i] for i in range(nd)]))
                vals = [x[(n, c) + p] for p in np.ndindex(*[hi[i] - lo[i] for i in range(nd)])
                        for p in [tuple(lo[i] + p[i] for i in range(nd))]]
                if pool_type == "max":
                    y[(n, c) + o] = max(vals)
                elif pool_type == "sum":
                    y[(n, c) + o] = sum(vals)
                else:
                    y[(n, c) + o] = sum(vals) / count
    return y


CASES = [  # (shape, kernel, stride, pad, pool_type, convention, count_include_pad)
    ((2, 3, 7, 6), (3, 3), (2, 2), (1, 1), "max", "valid", None),
    ((2, 3, 7, 6), (3, 3), (2, 2), (1, 1), "max", "full", None),
    ((2, 2, 7, 7), (2, 3), (2, 2), (0, 1), "avg", "full", True),
    ((2, 2, 7, 7), (3, 3), (2, 2), (1, 1), "avg", "full", False),
    ((1, 2, 6, 5), (2, 2), (1, 2), (1, 1), "avg", "valid", False),
    ((1, 2, 6, 5), (2, 2), (1, 2), (1, 0), "avg", "valid", True),
    ((2, 2, 5, 7), (2, 3), (3, 2), (0, 1), "sum", "full", None),
    ((2, 2, 5, 7), (2, 2), (2, 2), (0, 0), "sum", "valid", None),
    ((2, 3, 9), (3,), (2,), (1,), "max", "full", None),
    ((1, 2, 3, 4, 5), (2, 2, 3), (1, 2, 2), (0, 1, 1), "avg", "full", False),
]


def _attrs(kernel, stride, pad, pool_type, conv, include):
    a = dict(kernel=kernel, stride=stride, pad=pad, pool_type=pool_type, pooling_convention=conv)
    if include is not None:
        a["count_include_pad"] = include
    return a


@pytest.mark.parametrize("case", CASES)
def test_forward_matches_naive_loops(case):
    shape, kernel, stride, pad, pool_type, conv, include = case
    x = np.random.default_rng(0).standard_normal(shape)
    (y,) = forward(single_op("Pooling", ["data"], **_attrs(kernel, stride, pad, pool_type, conv, include)), {"data": x})
    want = naive_pool(x, kernel, stride, pad, pool_type, conv == "full", include is not False)
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CASES)
def test_gradient_matches_finite_differences(case):
    shape, kernel, stride, pad, pool_type, conv, include = case
    x = np.random.default_rng(1).permutation(np.prod(shape)).reshape(shape) * 0.01  # distinct: max is unique
    check_gradient("Pooling", {"data": x}, _attrs(kernel, stride, pad, pool_type, conv, include))


@pytest.mark.parametrize("pool_type", ["max", "avg", "sum"])
def test_global_pool(pool_type):
    x = np.random.default_rng(2).standard_normal((2, 3, 4, 5))
    attrs = dict(kernel=(1, 1), pad=(1, 1), stride=(2, 2), pool_type=pool_type, global_pool=True)
    (y,) = forward(single_op("Pooling", ["data"], **attrs), {"data": x})
    want = {"max": x.max(axis=(2, 3)), "avg": x.mean(axis=(2, 3)), "sum": x.sum(axis=(2, 3))}[pool_type]
    np.testing.assert_allclose(y, want[:, :, None, None], rtol=1e-12)
    check_gradient("Pooling", {"data": x}, attrs)


def test_max_gradient_goes_to_first_maximum():
    x = np.zeros((1, 1, 3, 3))
    x[0, 0, 1, 1] = x[0, 0, 2, 0] = 5.0
    sym = single_op("Pooling", ["data"], kernel=(3, 3), pool_type="max")
    from gradcheck import analytic_gradient

    (dx,) = analytic_gradient(sym, {"data": x}, [np.ones((1, 1, 1, 1))])
    want = np.zeros_like(x)
    want[0, 0, 1, 1] = 1.0  # row-major window order: (1, 1) comes before (2, 0)
    np.testing.assert_array_equal(dx, want)


@pytest.mark.parametrize("name", case_ids("pooling.npz"))
def test_matches_mxnet(name):
    case, arrays = next((c, a) for c, a in cases("pooling.npz") if c["name"] == name)
    check_case(case, arrays)


@pytest.mark.parametrize("case", [CASES[1], CASES[3], CASES[6], CASES[8]])
def test_tdl_covers_what_the_kernel_reads(case):
    shape, kernel, stride, pad, pool_type, conv, include = case
    rng = np.random.default_rng(3)
    x = rng.permutation(np.prod(shape)).reshape(shape).astype(np.float64)
    attrs = _attrs(kernel, stride, pad, pool_type, conv, include)
    text = check_op_tdl("Pooling", [x], attrs, samples=12)
    assert text.startswith("data -> out: out[n, c,")
    (y,) = forward(single_op("Pooling", ["data"], **attrs), {"data": x})
    dy = rng.standard_normal(y.shape)
    perturb = {"data": lambda r, s: r.permutation(np.prod(s)).reshape(s) * 1.5}
    check_op_tdl("_backward_Pooling", [dy, x], attrs, samples=12, perturb=perturb)
    if pool_type != "max":  # the form without a data input
        check_op_tdl("_backward_Pooling", [dy], dict(attrs, data_spatial=shape[2:]), samples=12)


def test_backward_data_input_is_a_shape_donor_for_avg():
    bwd = at.ops.get("_backward_Pooling")
    assert bwd.arguments({"pool_type": "avg", "data_spatial": (4, 4)}) == ["dy"]
    assert bwd.arguments({"pool_type": "max", "data_spatial": (4, 4)}) == ["dy", "data"]
    attrs = at.ops.parse_attrs(bwd, {"pool_type": "avg", "kernel": "(2, 2)", "stride": "(2, 2)"})
    text = bwd.tdl(attrs, [(1, 2, 2, 2), (1, 2, 5, 4)], [(1, 2, 5, 4)])
    assert text.startswith("dy, data -> dx:") and "data[" not in text
    # the donor's values are never used: a broadcast zero of the right shape gives the same dx
    dy = np.random.default_rng(5).standard_normal((1, 2, 2, 2))
    x = np.random.default_rng(6).standard_normal((1, 2, 5, 4))
    from autotile.ops.registry import KernelContext
    a = bwd.forward(attrs, [dy, x], KernelContext())[0]
    b = bwd.forward(attrs, [dy, np.broadcast_to(np.zeros(()), x.shape)], KernelContext())[0]
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("attrs, shape, needle", [
    (dict(kernel=(3, 3), layout="NHWC"), (1, 2, 5, 5), "layout"),
    (dict(kernel=(6, 6), pad=(0, 0)), (1, 2, 5, 5), "kernel"),
    (dict(kernel=(3,)), (1, 2, 5, 5), "kernel"),
    (dict(kernel=(2, 2), stride=(1, 1, 1)), (1, 2, 5, 5), "stride"),
    (dict(kernel=(2, 2), pool_type="lp"), (1, 2, 5, 5), "pool_type"),
    (dict(kernel=(2, 2), pooling_convention="same"), (1, 2, 5, 5), "pooling_convention"),
])
def test_bad_attributes_name_node_and_attribute(attrs, shape, needle):
    sym = at.sym.create("Pooling", at.sym.Variable("data"), name="pool_bad", **attrs)
    with pytest.raises(Error, match=needle) as info:
        sym.infer_shape(data=shape)
    assert "pool_bad" in str(info.value)


def test_unknown_pool_type_is_rejected_at_construction():
    with pytest.raises(Error, match="pool_type"):
        at.sym.create("Pooling", at.sym.Variable("data"), name="p", kernel=(2, 2), pool_type="median")


@pytest.mark.parametrize("case", CASES[:9])
def test_planner_regions_cover_what_the_kernels_read(case):
    from tdl_regions import check_regions

    shape, kernel, stride, pad, pool_type, conv, include = case
    rng = np.random.default_rng(7)
    x = rng.permutation(np.prod(shape)).reshape(shape).astype(np.float64)
    attrs = _attrs(kernel, stride, pad, pool_type, conv, include)
    check_regions("Pooling", [x], attrs)
    (y,) = forward(single_op("Pooling", ["data"], **attrs), {"data": x})
    check_regions("_backward_Pooling", [rng.standard_normal(y.shape), x], attrs,
                  perturb={1: lambda r, s: r.permutation(np.prod(s)).reshape(s) * 1.5})


def test_vgg_pooling_is_windowed_and_resnet_pooling_reads_whole_slabs():
    op = at.ops.get("Pooling")
    vgg = at.ops.parse_attrs(op, {"kernel": "(2, 2)", "stride": "(2, 2)"})
    assert op.tdl(vgg, [(2, 4, 8, 8)], [(2, 4, 4, 4)]) == \
        "data -> out: out[n, c, y, x] = maxpool(max(ky, kx) { data[n, c, 2*y + ky, 2*x + kx] })"
    res = at.ops.parse_attrs(op, {"kernel": "(3, 3)", "stride": "(2, 2)", "pad": "(1, 1)"})
    assert op.tdl(res, [(2, 4, 8, 8)], [(2, 4, 4, 4)]) == "data -> out: out[n, c, y, x] = maxpool(data[n, c, :, :])"


def _run_tiles_as_the_runtime(op, attrs, inputs, k):
    """Each worker's kernel on its tiles, as the execution graph runs it (backend/sub_op.py):
    inputs at the regions the TDL analysis gives, an input the TDL never reads (a shape
    donor) a broadcast zero of the output tile's shape, attributes from the op's tile hook.
    Asserts every output slab equals the whole op's; returns the variables split."""
    from autotile import _core
    from autotile.execgraph.tile_attrs import tile_attrs
    from autotile.ops.registry import KernelContext

    in_shapes = [v.shape for v in inputs]
    ins, outs = op.infer_shape(attrs, list(in_shapes))[:2]
    full = op.forward(attrs, inputs, KernelContext())[0]
    strategies = _core.analyze_tdl(op.tdl(attrs, ins, outs), ins, outs, k)["strategies"]
    for s in strategies:
        assert not s["reduction"], s  # pooling never reduces across workers
        make = s["outputs"][0]
        for w in range(k):
            n = outs[0][make["dim"]] // k
            out_lo, out_hi = [0] * len(outs[0]), list(outs[0])
            out_lo[make["dim"]], out_hi[make["dim"]] = w * n, (w + 1) * n
            boxes, tiles = [], []
            for need, x in zip(s["inputs"], inputs):
                lo, hi = [0] * x.ndim, list(x.shape)
                if not need["replicate"] and need["per_worker"]:
                    lo[need["dim"]], hi[need["dim"]] = need["per_worker"][w]
                boxes.append((tuple(lo), tuple(hi)))
                if need["read"]:
                    tiles.append(x[tuple(slice(a, b) for a, b in zip(lo, hi))])
                else:
                    tiles.append(np.broadcast_to(np.zeros((), x.dtype), tuple(b - a for a, b in zip(out_lo, out_hi))))
            a = tile_attrs(op.name, attrs, boxes, [(tuple(out_lo), tuple(out_hi))], in_shapes, outs)
            got = op.forward(a, tiles, KernelContext())[0]
            np.testing.assert_allclose(got, full[tuple(slice(a, b) for a, b in zip(out_lo, out_hi))], rtol=1e-12,
                                       atol=1e-12, err_msg=f"{op.name} {attrs} split {k} ways along {s['var']}")
    return {s["var"] for s in strategies}


TILE_CASES = [  # (data shape, attributes): spatial extents every k in 2, 3, 4 divides
    ((2, 3, 12, 12), dict(kernel=(1, 1), global_pool=True, pool_type="avg")),
    ((2, 3, 12, 12), dict(kernel=(1, 1), global_pool=True, pool_type="max")),
    ((2, 2, 12, 12), dict(kernel=(4, 4), stride=(4, 4), pool_type="avg")),
    ((2, 2, 12, 12), dict(kernel=(4, 4), stride=(1, 1), pool_type="sum")),
    ((2, 2, 12, 12), dict(kernel=(3, 3), stride=(1, 1), pad=(1, 1), pool_type="avg")),
    ((2, 2, 12, 12), dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg", pooling_convention="full",
                          count_include_pad=False)),
    ((2, 2, 12, 12), dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max")),
    ((2, 2, 12, 8), dict(kernel=(2, 2), stride=(2, 2), pool_type="max")),
    ((2, 2, 12), dict(kernel=(3,), stride=(1,), pad=(1,), pool_type="max")),
    ((1, 2, 4, 6, 12), dict(kernel=(2, 2, 3), stride=(2, 2, 3), pool_type="avg")),
]


@pytest.mark.parametrize("case", TILE_CASES)
def test_spatial_tiles_reassemble_the_whole_op(case):
    """Each worker's kernel, run on the regions the TDL analysis gives it with the tile
    hook's attributes (window frame: the whole op's geometry and divisors), gives its slab
    of the whole op's output, forward and backward, split 2, 3 and 4 ways along every
    variable (a spatial split of global average pooling's backward used to divide by the
    tile's size, k times the gradient, and a window wider than the tile crashed)."""
    from autotile.ops.registry import format_value

    shape, attrs = case
    rng = np.random.default_rng(8)
    x = rng.permutation(np.prod(shape)).reshape(shape) * 0.01  # distinct: each window's max is unique
    (y,) = forward(single_op("Pooling", ["data"], **attrs), {"data": x})
    dy = rng.standard_normal(y.shape)
    split = set()
    for name, inputs in (("Pooling", [x]), ("_backward_Pooling", [dy, x])):
        op = at.ops.get(name)
        parsed = at.ops.parse_attrs(op, {a: format_value(v) for a, v in attrs.items()}, "op")
        for k in (2, 3, 4):
            split |= {(name, v) for v in _run_tiles_as_the_runtime(op, parsed, inputs, k)}
    assert ("_backward_Pooling", "iy" if len(shape) > 3 else "ix") in split, split


@pytest.mark.parametrize("shape, attrs", [
    ((2, 48, 32, 32), dict(kernel=(1, 1), global_pool=True, pool_type="avg")),
    ((2, 8, 32, 32), dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg", count_include_pad=False)),
])
def test_float32_kernels_track_float64(shape, attrs):
    """float32 pooling and its gradient stay within float32 rounding (relative 1e-6 of the
    largest value) of the float64 kernels: the divisors and col2im sums lose nothing."""
    rng = np.random.default_rng(10)
    x = rng.standard_normal(shape)
    (y,) = forward(single_op("Pooling", ["data"], **attrs), {"data": x})
    dy = rng.standard_normal(y.shape)
    from float32_checks import assert_float32_tracks_float64

    for name, inputs in (("Pooling", [x]), ("_backward_Pooling", [dy, x])):
        assert_float32_tracks_float64(name, attrs, inputs, 1e-6)
