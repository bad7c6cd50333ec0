"""The resampling and index ops (ops/deconv.py, resize.py, argminmax.py, scatter_nd.py):
kernels against onnxruntime and direct definitions, gradients against finite differences,
and bad input refused with an Error naming the op. Their tiles are checked by the strategy
validator (strategy_configs_resample.py) and in training graphs by
tests/execgraph/test_exec_resample.py."""
import numpy as np
import pytest

import autotile as at
from autotile.errors import Error
from gradcheck import check_gradient, forward, single_op

ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _ort(node, feeds, inits=(), opset=17):
    """Runs one ONNX node in onnxruntime (float32 inputs fed, `inits` as initializers)."""
    vis = [helper.make_tensor_value_info(k, TensorProto.FLOAT, None) for k in feeds]
    graph = helper.make_graph([node], "g", vis, [helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT,
                                                                               None)],
                              initializer=[numpy_helper.from_array(v, k) for k, v in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {k: v.astype(np.float32) for k, v in feeds.items()})[0]


def _run(op, values, **attrs):
    return forward(single_op(op, list(values), **attrs), values)[0]


# ----------------------------------------------------------------------------- Deconvolution

DECONV = [  # (cin, cout, group, kernel, stride, pad, adj, dilate)
    (3, 4, 1, 3, 2, 1, 1, 1), (4, 4, 4, 3, 2, 1, 0, 1), (4, 6, 2, 2, 2, 0, 0, 1), (2, 3, 1, 3, 1, 1, 0, 2),
    (2, 3, 1, 4, 3, 2, 2, 1)]


@pytest.mark.parametrize("cfg", DECONV, ids=str)
def test_deconvolution_equals_onnxruntime(cfg):
    cin, cout, g, k, s, p, adj, d = cfg
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((2, cin, 5, 4)), rng.standard_normal((cin, cout // g, k, k)), rng.standard_normal(cout)
    got = _run("Deconvolution", {"x": x, "w": w, "b": b}, kernel=(k, k), stride=(s, s), pad=(p, p), adj=(adj, adj),
               dilate=(d, d), num_filter=cout, num_group=g, no_bias=False)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[s, s], pads=[p] * 4,
                            output_padding=[adj, adj], group=g, dilations=[d, d])
    np.testing.assert_allclose(got, _ort(node, {"x": x, "w": w, "b": b}), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cfg", DECONV + [(2, 4, 1, 3, 2, 1, -1, 1), (2, 2, 1, 3, 2, 0, 3, 1)], ids=str)
def test_deconvolution_gradient(cfg):
    cin, cout, g, k, s, p, adj, d = cfg
    rng = np.random.default_rng(1)
    check_gradient("Deconvolution", {"x": rng.standard_normal((2, cin, 3, 4)),
                                     "w": rng.standard_normal((cin, cout // g, k, k)), "b": rng.standard_normal(cout)},
                   {"kernel": (k, k), "stride": (s, s), "pad": (p, p), "adj": (adj, adj), "dilate": (d, d),
                    "num_filter": cout, "num_group": g, "no_bias": False})


def test_deconvolution_refuses_bad_shapes():
    with pytest.raises(Error, match="num_filter"):
        at.sym.create("Deconvolution", at.sym.Variable("x"), kernel=(3, 3), num_filter=5, num_group=2,
                      name="d").infer_shape(x=(1, 4, 5, 5))
    with pytest.raises(Error, match="not positive"):
        at.sym.create("Deconvolution", at.sym.Variable("x"), kernel=(1, 1), pad=(3, 3), num_filter=2,
                      name="d").infer_shape(x=(1, 4, 2, 2))


# ----------------------------------------------------------------------------- resize

RESIZE = [  # (mode, coord, nearest_mode, scales or None, sizes or None)
    ("nearest", "asymmetric", "floor", (2.0, 2.0), None), ("nearest", "half_pixel", "round_prefer_ceil", (0.6, 1.5), None),
    ("nearest", "align_corners", "ceil", None, (7, 3)), ("nearest", "pytorch_half_pixel", "floor", None, (1, 9)),
    ("linear", "half_pixel", "round_prefer_floor", (2.0, 2.0), None),
    ("linear", "pytorch_half_pixel", "round_prefer_floor", None, (1, 9)),
    ("linear", "align_corners", "round_prefer_floor", (3.0, 0.5), None),
    ("linear", "asymmetric", "round_prefer_floor", (0.6, 1.5), None),
    ("cubic", "half_pixel", "round_prefer_floor", (2.0, 0.75), None),
    ("cubic", "pytorch_half_pixel", "round_prefer_floor", None, (1, 9)),
    ("cubic", "align_corners", "round_prefer_floor", (3.0, 0.5), None),
    ("cubic", "asymmetric", "round_prefer_floor", (0.6, 1.5), None)]


def _resize_attrs(x, scales, sizes, mode, coord, nearest):
    from autotile.ops.resize import format_scales

    sizes = sizes or tuple(int(np.floor(n * np.float32(s))) for n, s in zip(x.shape[2:], scales))
    return dict(axes=(2, 3), sizes=sizes, scales=format_scales(scales) if scales else "", mode=mode, coord=coord,
                nearest_mode=nearest)


@pytest.mark.parametrize("cfg", RESIZE, ids=str)
def test_resize_equals_onnxruntime(cfg):
    mode, coord, nearest, scales, sizes = cfg
    x = np.random.default_rng(2).standard_normal((2, 3, 5, 4))
    got = _run("resize", {"x": x}, **_resize_attrs(x, scales, sizes, mode, coord, nearest))
    inits = [("roi", np.zeros(0, np.float32))]
    if scales:
        inits.append(("scales", np.array((1, 1) + scales, np.float32)))
        ins = ["x", "roi", "scales"]
    else:
        inits.append(("sizes", np.array((2, 3) + sizes, np.int64)))
        ins = ["x", "roi", "", "sizes"]
    node = helper.make_node("Resize", ins, ["y"], mode=mode, coordinate_transformation_mode=coord, nearest_mode=nearest)
    np.testing.assert_allclose(got, _ort(node, {"x": x}, inits, opset=13), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("exclude_outside", [0, 1])
@pytest.mark.parametrize("a", [-0.75, -0.5])
def test_cubic_resize_coefficient_and_exclude_outside_equal_onnxruntime(a, exclude_outside):
    x = np.random.default_rng(5).standard_normal((2, 3, 5, 4))
    got = _run("resize", {"x": x}, **_resize_attrs(x, (1.6, 2.0), None, "cubic", "half_pixel", "round_prefer_floor"),
               cubic_coeff_a=a, exclude_outside=bool(exclude_outside))
    node = helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode="cubic", cubic_coeff_a=a,
                            exclude_outside=exclude_outside)
    inits = [("roi", np.zeros(0, np.float32)), ("scales", np.array((1, 1, 1.6, 2.0), np.float32))]
    np.testing.assert_allclose(got, _ort(node, {"x": x}, inits, opset=13), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cfg", RESIZE, ids=str)
def test_resize_gradient(cfg):
    mode, coord, nearest, scales, sizes = cfg
    x = np.random.default_rng(3).standard_normal((1, 2, 5, 4))
    check_gradient("resize", {"x": x}, _resize_attrs(x, scales, sizes, mode, coord, nearest))


def test_resize_refuses_bad_attributes():
    x = at.sym.Variable("x")
    with pytest.raises(Error, match="one size per"):
        at.sym.create("resize", x, axes=(2, 3), sizes=(4,), name="r").infer_shape(x=(1, 1, 2, 2))
    with pytest.raises(Error, match="out of range"):
        at.sym.create("resize", x, axes=(5,), sizes=(4,), name="r").infer_shape(x=(1, 1, 2, 2))
    with pytest.raises(Error, match="fractions"):
        at.sym.create("resize", x, axes=(2,), sizes=(4,), scales="two", name="r").infer_shape(x=(1, 1, 2, 2))


# ----------------------------------------------------------------------------- argmax / argmin

@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("axis,keepdims,last", [(0, False, False), (-1, True, True), (1, False, True), (None, False, False)])
def test_argmax_argmin(op, axis, keepdims, last):
    x = np.random.default_rng(4).integers(0, 3, (4, 5, 3)).astype(np.float64)  # ties: first vs last index
    attrs = {"keepdims": keepdims, "select_last_index": last, "dtype": "int64"}
    if axis is not None:
        attrs["axis"] = axis
    got = _run(op, {"x": x}, **attrs)
    fn = np.argmax if op == "argmax" else np.argmin
    flat = x.reshape(-1) if axis is None else x
    ax = 0 if axis is None else axis
    want = flat.shape[ax] - 1 - fn(np.flip(flat, ax), axis=ax) if last else fn(flat, axis=ax)
    if axis is not None and keepdims:
        want = np.expand_dims(want, ax)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.asarray(want).reshape(got.shape))
    op_def = at.ops.get(op)
    assert op_def.gradient(None) == [None]  # indices: no gradient


# ----------------------------------------------------------------------------- ScatterND

def _scatter_ref(data, indices, updates, reduction):
    out = data.copy()
    for pos in np.ndindex(indices.shape[:-1]):
        key = tuple(indices[pos])
        out[key] = updates[pos] if reduction == "none" else out[key] + updates[pos]
    return out


@pytest.mark.parametrize("reduction", ["none", "add"])
def test_scatter_nd_and_gradient(reduction):
    rng = np.random.default_rng(5)
    data, updates = rng.standard_normal((5, 4, 3)), rng.standard_normal((2, 2, 3))
    indices = np.array([[[0, 1], [4, -1]], [[2, 0], [1, 1]]])  # -1: from the end
    got = _run("ScatterND", {"data": data, "indices": indices, "updates": updates}, reduction=reduction)
    np.testing.assert_allclose(got, _scatter_ref(data, indices % np.array([5, 4]), updates, reduction))
    check_gradient("ScatterND", {"data": data, "indices": indices, "updates": updates}, {"reduction": reduction},
                   wrt=["data", "updates"])


def test_scatter_nd_equals_onnxruntime_with_repeats():
    rng = np.random.default_rng(6)
    data, updates = rng.standard_normal((6, 4)), rng.standard_normal((3, 4))
    indices = np.array([[1], [4], [1]])
    got = _run("ScatterND", {"data": data, "indices": indices, "updates": updates}, reduction="add")
    node = helper.make_node("ScatterND", ["data", "indices", "updates"], ["y"], reduction="add")
    want = _ort(node, {"data": data, "updates": updates}, [("indices", indices)], opset=16)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_scatter_nd_refuses_bad_input():
    data, upd, idx = at.sym.Variable("d"), at.sym.Variable("u"), at.sym.Variable("i")
    with pytest.raises(Error, match="updates have shape"):
        at.sym.create("ScatterND", data, idx, upd, name="s").infer_shape(d=(5, 4), i=(2, 1), u=(3, 4))
    with pytest.raises(Error, match="out of range"):
        _run("ScatterND", {"data": np.zeros((3, 2)), "indices": np.array([[3]]), "updates": np.ones((1, 2))})
    with pytest.raises(Error, match="no gradient"):
        check_gradient("ScatterND", {"data": np.ones((3, 2)), "indices": np.array([[1]]),
                                     "updates": np.ones((1, 2))}, {"reduction": "mul"}, wrt=["data"])
