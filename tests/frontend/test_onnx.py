"""ONNX importer (at.onnx.load): small models built with onnx.helper against onnxruntime, the
node backend tests and light model-zoo nets shipped inside the onnx wheel against their
reference outputs, and the errors users get for bad files and unsupported operators."""
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import autotile as at  # noqa: E402
from autotile.errors import Error  # noqa: E402
from autotile.ops import registry  # noqa: E402

from onnx_models import (assert_matches_ort, make_model, node_case_feeds, node_cases, randomize_weights,  # noqa: E402
                         run_autotile, run_ort)

RNG = np.random.default_rng(0)
ONNX_DIR = os.path.dirname(onnx.__file__)
LIGHT_DIR = os.path.join(ONNX_DIR, "backend", "test", "data", "light")


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def need_ops(*names):
    """Skip when an autotile op the conversion maps onto is not registered (op families are
    written concurrently; the test reports which one is missing)."""
    missing = [n for n in names if not registry.exists(n)]
    if missing:
        pytest.skip(f"autotile ops not registered yet: {missing}")


def check(nodes, inputs, outputs, inits=None, opset=13, rtol=1e-4, atol=1e-5, dtypes=None, **kw):
    feeds = {name: (value if isinstance(value, np.ndarray) else rand(*value)) for name, value in inputs.items()}
    model = make_model(nodes, {k: v.shape for k, v in feeds.items()}, outputs, inits, opset=opset, dtypes=dtypes, **kw)
    assert_matches_ort(model, feeds, rtol=rtol, atol=atol)
    return model


# ----------------------------------------------------------------------------- conv, dense

@pytest.mark.parametrize("opset", [7, 11, 21])
@pytest.mark.parametrize("attrs,wshape,bias", [
    (dict(pads=[1, 1, 1, 1]), (4, 3, 3, 3), True),
    (dict(strides=[2, 2], dilations=[2, 1]), (4, 3, 3, 2), False),
    (dict(group=3, pads=[0, 1, 0, 1]), (6, 1, 3, 3), True),
    (dict(pads=[0, 1, 2, 0], strides=[2, 1]), (2, 3, 3, 3), True),  # asymmetric: explicit zero pad
    (dict(auto_pad="SAME_UPPER", strides=[2, 2]), (2, 3, 4, 4), True),
    (dict(auto_pad="SAME_LOWER"), (2, 3, 2, 2), False),
])
def test_conv(opset, attrs, wshape, bias):
    need_ops("Convolution")
    names = ["x", "W", "B"] if bias else ["x", "W"]
    inits = {"W": rand(*wshape), "B": rand(wshape[0])} if bias else {"W": rand(*wshape)}
    check([helper.make_node("Conv", names, ["y"], **attrs)], {"x": (2, 3, 7, 8)}, ["y"], inits, opset=opset)


def test_conv_1d_and_weight_from_constant_of_shape():
    need_ops("Convolution")
    nodes = [helper.make_node("ConstantOfShape", ["wshape"], ["W"],
                              value=numpy_helper.from_array(np.array([0.5], np.float32))),
             helper.make_node("Conv", ["x", "W"], ["y"], pads=[1, 1])]
    model = check(nodes, {"x": (2, 3, 9)}, ["y"], {"wshape": np.array([4, 3, 3], np.int64)})
    sym = at.onnx.load(model)
    assert sym.params["W"].shape == (4, 3, 3) and np.all(sym.params["W"] == 0.5)
    assert "W" in sym.list_arguments() and "wshape" not in sym.list_inputs()


@pytest.mark.parametrize("opset", [7, 11, 13])
@pytest.mark.parametrize("attrs,cshape,b_const", [
    (dict(transB=1), (5,), True),
    (dict(), (1, 5), True),
    (dict(alpha=0.5, beta=2.0), (3, 5), True),
    (dict(transA=1, transB=1, alpha=1.5), (), True),
    (dict(transB=1, beta=0.5), (5,), False),
    (dict(alpha=2.0), None, True),
])
def test_gemm(opset, attrs, cshape, b_const):
    if cshape is None and opset < 11:
        pytest.skip("C became optional in opset 11")
    need_ops("FullyConnected", "broadcast_add", "transpose", "_mul_scalar", *(() if b_const else ("dot",)))
    a = (4, 3) if attrs.get("transA") else (3, 4)
    b = (5, 4) if attrs.get("transB") else (4, 5)
    inits = {"C": rand(*cshape)} if cshape is not None else {}
    inputs = {"A": a}
    if b_const:
        inits["B"] = rand(*b)
    else:
        inputs["B"] = b
    names = ["A", "B", "C"] if cshape is not None else ["A", "B"]
    check([helper.make_node("Gemm", names, ["y"], **attrs)], inputs, ["y"], inits, opset=opset)


def test_gemm_fc_keeps_initializer_names():
    need_ops("FullyConnected")
    nodes = [helper.make_node("Gemm", ["x", "fc_w", "fc_b"], ["y"], transB=1)]
    model = check(nodes, {"x": (2, 6)}, ["y"], {"fc_w": rand(3, 6), "fc_b": rand(3)})
    sym = at.onnx.load(model)
    assert sorted(sym.params) == ["fc_b", "fc_w"]
    assert [n.op for n in sym.topo_nodes() if not n.is_variable] == ["FullyConnected"]


@pytest.mark.parametrize("ashape,bshape,b_const", [
    ((3, 4), (4, 5), True), ((2, 3, 4), (4, 5), True), ((4,), (4, 5), True),
    ((3, 4), (4, 5), False), ((2, 3, 4), (2, 4, 5), False), ((2, 2, 3, 4), (2, 2, 4, 5), False),
    ((3, 4), (4,), False),
])
def test_matmul(ashape, bshape, b_const):
    need_ops("FullyConnected", "dot", "batch_dot", "Reshape")
    inits = {"B": rand(*bshape)} if b_const else {}
    inputs = {"A": ashape} if b_const else {"A": ashape, "B": bshape}
    check([helper.make_node("MatMul", ["A", "B"], ["y"])], inputs, ["y"], inits)


# ----------------------------------------------------------------------------- activations

@pytest.mark.parametrize("op,attrs", [("Relu", {}), ("Tanh", {}), ("Sigmoid", {}), ("LeakyRelu", {}),
                                      ("LeakyRelu", {"alpha": 0.3})])
@pytest.mark.parametrize("opset", [7, 13])
def test_activation(op, attrs, opset):
    need_ops("Activation", "LeakyReLU")
    check([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": (3, 4, 5)}, ["y"], opset=opset)


@pytest.mark.parametrize("opset", [7, 11, 13, 21])
@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1])
def test_softmax_axis_semantics(opset, axis):
    """Before opset 13 Softmax flattens to 2-D at `axis`; from 13 it normalises one axis."""
    need_ops("softmax", "Reshape", "Flatten")
    attrs = {} if axis is None else {"axis": axis}
    check([helper.make_node("Softmax", ["x"], ["y"], **attrs)], {"x": (2, 3, 4)}, ["y"], opset=opset)


# ----------------------------------------------------------------------------- pooling, LRN, BN, dropout

POOL_CASES = [
    dict(kernel_shape=[2, 2], strides=[2, 2]),
    dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
    dict(kernel_shape=[3, 2], strides=[2, 1], pads=[0, 1, 1, 0]),  # asymmetric
    dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 2, 1], ceil_mode=1),
    dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
    dict(kernel_shape=[2, 3], auto_pad="SAME_LOWER"),
]


@pytest.mark.parametrize("opset", [7, 10, 19])
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("attrs", POOL_CASES)
@pytest.mark.parametrize("include", [0, 1])
def test_pooling(opset, op, attrs, include):
    need_ops("Pooling", "Concat", "slice_axis", "zeros_like", "ones_like", "elemwise_div")
    if attrs.get("ceil_mode") and opset < 10:
        pytest.skip("ceil_mode arrived in opset 10")
    if op == "MaxPool" and include:
        pytest.skip("count_include_pad is an AveragePool attribute")
    attrs = dict(attrs, count_include_pad=include) if op == "AveragePool" else attrs
    check([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": (2, 3, 7, 8)}, ["y"], opset=opset)


def test_maxpool_1d_with_unused_indices_output():
    need_ops("Pooling")
    node = helper.make_node("MaxPool", ["x"], ["y", "idx"], kernel_shape=[3], strides=[2], pads=[1, 1])
    check([node], {"x": (2, 3, 9)}, ["y"], opset=12)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pooling(op):
    need_ops("Pooling")
    check([helper.make_node(op, ["x"], ["y"])], {"x": (2, 3, 5, 4)}, ["y"])


@pytest.mark.parametrize("attrs", [dict(size=3), dict(size=5, alpha=0.01, beta=0.6, bias=2.0)])
def test_lrn(attrs):
    """ONNX and MXNet both divide alpha by the window size: checked against onnxruntime."""
    need_ops("LRN")
    check([helper.make_node("LRN", ["x"], ["y"], **attrs)], {"x": (2, 7, 4, 3)}, ["y"], opset=13)


@pytest.mark.parametrize("opset", [7, 9, 15])
def test_batchnorm_inference(opset):
    need_ops("BatchNorm")
    inits = {"s": rand(4), "b": rand(4), "m": rand(4), "v": np.abs(rand(4)) + 0.5}
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)
    model = check([node], {"x": (2, 4, 3, 3)}, ["y"], inits, opset=opset)
    sym = at.onnx.load(model)
    assert set(sym.list_auxiliary_states()) == {"m", "v"}


@pytest.mark.parametrize("opset,ratio_input", [(7, False), (10, False), (12, True), (13, False)])
def test_dropout_is_identity_at_inference(opset, ratio_input):
    need_ops("Dropout")
    inputs = ["x", "r"] if ratio_input else ["x"]
    attrs = {} if opset >= 12 else {"ratio": 0.3}
    node = helper.make_node("Dropout", inputs, ["y", "mask"] if opset >= 10 else ["y"], **attrs)
    inits = {"r": np.array(0.3, np.float32)} if ratio_input else {}
    model = check([node, helper.make_node("Relu", ["y"], ["z"])], {"x": (3, 4)}, ["z"], inits, opset=opset)
    node = next(n for n in at.onnx.load(model).topo_nodes() if n.op == "Dropout")
    assert float(node.attrs["p"]) == pytest.approx(0.3 if opset < 12 or ratio_input else 0.5)


# ----------------------------------------------------------------------------- shapes

@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -3])
def test_flatten(axis):
    need_ops("Flatten", "Reshape")
    check([helper.make_node("Flatten", ["x"], ["y"], axis=axis)], {"x": (2, 3, 4, 5)}, ["y"], opset=13)


def _reshape_chain(opset):
    """x (N, C, H, W) -> (N, C*H*W) the way exporters write it: Shape, Gather, Unsqueeze, Concat."""
    unsq = (helper.make_node("Unsqueeze", ["n", "zero_axes"], ["n1"]) if opset >= 13
            else helper.make_node("Unsqueeze", ["n"], ["n1"], axes=[0]))
    return [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Constant", [], ["i0"], value=numpy_helper.from_array(np.array(0, np.int64))),
        helper.make_node("Gather", ["s", "i0"], ["n"], axis=0),
        unsq,
        helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ], {"minus1": np.array([-1], np.int64), **({"zero_axes": np.array([0], np.int64)} if opset >= 13 else {})}


@pytest.mark.parametrize("opset", [7, 11, 13, 21])
def test_reshape_constant_folding(opset):
    need_ops("Reshape")
    nodes, inits = _reshape_chain(opset)
    model = check(nodes, {"x": (2, 3, 4, 5)}, ["y"], inits, opset=opset)
    sym = at.onnx.load(model)
    assert [n.op for n in sym.topo_nodes() if not n.is_variable] == ["Reshape"]
    assert sym.params == {}


@pytest.mark.parametrize("batch", [None, 6])
def test_reshape_chain_with_symbolic_batch(batch):
    """A symbolic batch dimension folds through the chain into MXNet's 0 (copy) code."""
    need_ops("Reshape")
    nodes, inits = _reshape_chain(13)
    model = make_model(nodes, {"x": ("N", 3, 4, 5)}, ["y"], inits, opset=13)
    sym = at.onnx.load(model, batch_size=batch)
    reshape = next(n for n in sym.topo_nodes() if n.op == "Reshape")
    assert registry._parse_shape(reshape.attrs["shape"]) == (0, -1)
    x = rand(4 if batch is None else batch, 3, 4, 5)
    (got,) = at.backend.run(sym, inputs={"x": x}).outputs
    np.testing.assert_array_equal(got, x.reshape(x.shape[0], -1))


def test_reshape_special_values_and_opset_attribute():
    need_ops("Reshape")
    check([helper.make_node("Reshape", ["x", "t"], ["y"])], {"x": (2, 3, 4)}, ["y"],
          {"t": np.array([0, -1, 2], np.int64)}, opset=14)
    check([helper.make_node("Reshape", ["x", "t"], ["y"])], {"x": (2, 3, 4)}, ["y"],
          {"t": np.array([4, 6], np.int64)}, opset=7)


def test_transpose_concat_identity():
    need_ops("transpose", "Concat")
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1]),
             helper.make_node("Transpose", ["x"], ["r"]),
             helper.make_node("Identity", ["t"], ["ti"]),
             helper.make_node("Concat", ["ti", "z", "c"], ["y"], axis=-1)]
    check(nodes, {"x": (2, 3, 4), "z": (2, 4, 2)}, ["y", "r"], {"c": rand(2, 4, 1)})


@pytest.mark.parametrize("opset,split,outs,size", [
    (7, [2, 4], 2, 6), (11, None, 3, 6), (13, [1, 2, 3], 3, 6), (13, None, 2, 6), (18, None, 4, 7), (18, None, 3, 6),
    (18, [3, 3], 2, 6)])
def test_split(opset, split, outs, size):
    """Opset 18's num_outputs may split unevenly: the last part is smaller."""
    need_ops("SliceChannel", "slice_axis")
    names = [f"y{i}" for i in range(outs)]
    if opset >= 13:
        inputs = ["x", "split"] if split else ["x"]
        attrs = {"num_outputs": outs} if opset >= 18 and not split else {}
        node = helper.make_node("Split", inputs, names, axis=1, **attrs)
        inits = {"split": np.array(split, np.int64)} if split else {}
    else:
        node = helper.make_node("Split", ["x"], names, axis=1, **({"split": split} if split else {}))
        inits = {}
    check([node], {"x": (2, size, 3)}, names, inits, opset=opset)


@pytest.mark.parametrize("opset", [11, 13, 21])
def test_squeeze_unsqueeze(opset):
    need_ops("squeeze", "expand_dims")
    if opset >= 13:
        nodes = [helper.make_node("Squeeze", ["x", "sq"], ["s"]),
                 helper.make_node("Unsqueeze", ["s", "usq"], ["y"]),
                 helper.make_node("Squeeze", ["x"], ["all"])]
        inits = {"sq": np.array([-1, 1], np.int64), "usq": np.array([0, -1, 2], np.int64)}
    else:
        nodes = [helper.make_node("Squeeze", ["x"], ["s"], axes=[-1, 1]),
                 helper.make_node("Unsqueeze", ["s"], ["y"], axes=[0, -1, 2]),
                 helper.make_node("Squeeze", ["x"], ["all"])]
        inits = {}
    check(nodes, {"x": (3, 1, 4, 1)}, ["y", "all"], inits, opset=opset)


@pytest.mark.parametrize("opset", [11, 13, 18])
@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum"])
@pytest.mark.parametrize("axes,keep", [([1], 1), ([0, -1], 0), (None, 1)])
def test_reduce(opset, op, axes, keep):
    need_ops("mean", "sum")
    as_input = (op == "ReduceSum" and opset >= 13) or opset >= 18
    if axes is None:
        node = helper.make_node(op, ["x"], ["y"], keepdims=keep)
        inits = {}
    elif as_input:
        node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=keep)
        inits = {"axes": np.array(axes, np.int64)}
    else:
        node = helper.make_node(op, ["x"], ["y"], axes=axes, keepdims=keep)
        inits = {}
    check([node], {"x": (2, 3, 4)}, ["y"], inits, opset=opset)


def test_gather():
    need_ops("slice_axis", "squeeze")
    nodes = [helper.make_node("Gather", ["x", "i"], ["y"], axis=1),
             helper.make_node("Gather", ["x", "j"], ["z"], axis=-1)]
    check(nodes, {"x": (2, 5, 4)}, ["y", "z"], {"i": np.array(-2, np.int64), "j": np.array([1, 2, 3], np.int64)})


def test_gather_lookup_table_is_embedding():
    need_ops("Embedding")
    feeds = {"ids": np.array([[0, 3], [2, 2]], np.int64)}
    model = make_model([helper.make_node("Gather", ["table", "ids"], ["y"])], {"ids": (2, 2)}, ["y"],
                       {"table": rand(5, 3)}, dtypes={"ids": TensorProto.INT64})
    assert_matches_ort(model, feeds)


# ----------------------------------------------------------------------------- element-wise

@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("ashape,bshape,b_const", [
    ((2, 3, 4), (2, 3, 4), False), ((2, 3, 4), (4,), False), ((2, 3, 4), (3, 1), True),
    ((2, 1, 4), (3, 1), False), ((2, 3), (1,), True), ((2, 3), (), True), ((1,), (2, 3), False)])
@pytest.mark.parametrize("opset", [7, 14])
def test_binary_broadcasting(op, ashape, bshape, b_const, opset):
    need_ops(f"broadcast_{op.lower()}", f"elemwise_{op.lower()}", "expand_dims", "_plus_scalar", "_rdiv_scalar")
    b = rand(*bshape) if bshape else np.array(1.7, np.float32)
    if op == "Div":
        b = np.sign(b) * (np.abs(b) + 0.5)
    inits = {"b": b} if b_const else {}
    inputs = {"a": ashape} if b_const else {"a": ashape, "b": b}
    check([helper.make_node(op, ["a", "b"], ["y"]), helper.make_node(op, ["b", "a"], ["z"])],
          inputs, ["y", "z"], inits, opset=opset)


def test_sum_and_constant_arithmetic_folds():
    need_ops("add_n", "broadcast_mul", "broadcast_add")
    nodes = [helper.make_node("Unsqueeze", ["scale"], ["s3"], axes=[1, 2]),  # folded: (C,) -> (C, 1, 1)
             helper.make_node("Mul", ["s3", "two"], ["s3x2"]),  # folded constant arithmetic
             helper.make_node("Mul", ["x", "s3x2"], ["xs"]),
             helper.make_node("Sum", ["x", "xs", "x"], ["y"])]
    model = check(nodes, {"x": (2, 3, 4, 4)}, ["y"], {"scale": rand(3), "two": np.array(2.0, np.float32)}, opset=11)
    sym = at.onnx.load(model)
    # scale is a weight: it stays the model's own (3,) tensor (the Unsqueeze runs in the graph,
    # so training updates `scale` itself, not a folded copy)
    assert sym.params["scale"].shape == (3,)


def test_sum_with_broadcasting():
    need_ops("broadcast_add", "expand_dims")
    check([helper.make_node("Sum", ["a", "b", "c"], ["y"]), helper.make_node("Sum", ["a", "b"], ["z"])],
          {"a": (2, 3, 4), "b": (3, 1), "c": (4,)}, ["y", "z"], opset=8)


def test_external_weight_data(tmp_path):
    need_ops("FullyConnected")
    w, b = rand(3, 4), rand(3)
    model = make_model([helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)], {"x": (2, 4)}, ["y"],
                       {"w": w, "b": b})
    path = tmp_path / "ext.onnx"
    onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location="ext.bin",
              size_threshold=0)
    sym = at.onnx.load(str(path))
    np.testing.assert_array_equal(sym.params["w"], w)
    x = rand(2, 4)
    np.testing.assert_allclose(at.backend.run(sym, inputs={"x": x}).outputs[0], x @ w.T + b, rtol=1e-5)
    (tmp_path / "ext.bin").write_bytes(b"\0" * 8)
    with pytest.raises(Error, match="ext.onnx.*external"):
        at.onnx.load(str(path))


def test_initializers_listed_as_graph_inputs_are_params():
    need_ops("FullyConnected")
    model = make_model([helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)], {"x": (2, 4)}, ["y"],
                       {"w": rand(3, 4), "b": rand(3)}, opset=7, initializers_as_inputs=True)
    sym = at.onnx.load(model)
    assert sym.list_arguments() == ["x", "w", "b"] and sorted(sym.params) == ["b", "w"]
    assert_matches_ort(model, {"x": rand(2, 4)})


# ----------------------------------------------------------------------------- names, batch, entry points

def test_names_are_kept_unique_and_mapped():
    """The model's own input and output names are kept (``input:0``, ``gpu_0/data_0``,
    ``out.1``); helper op names are sanitised; names with whitespace are sanitised."""
    need_ops("Activation")
    nodes = [helper.make_node("Relu", ["input:0"], ["/layer1/Relu_output_0"], name="/layer1/Relu"),
             helper.make_node("Relu", ["/layer1/Relu_output_0"], ["out.1"], name="/layer1/Relu!"),
             helper.make_node("Relu", ["gpu_0/data_0"], ["a b"], name="r3")]
    model = make_model(nodes, {"input:0": (2, 3), "gpu_0/data_0": (2, 3)}, ["out.1", "a b"])
    sym = at.onnx.load(model)
    names = [n.name for n in sym.topo_nodes()]
    assert names == ["input:0", "layer1_Relu", "out.1", "gpu_0/data_0", "a_b"]
    assert sym.onnx_names["input:0"] == "input:0" and sym.onnx_names["gpu_0/data_0"] == "gpu_0/data_0"
    assert sym.list_outputs() == ["out.1_output", "a_b_output"]
    assert [sym.onnx_names[o] for o in ("out.1", "a b")] == sym.list_outputs()
    assert sym.topo_nodes()[0].attrs["__onnx_name__"] == "input:0"
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    res = at.backend.run(sym, inputs={"input:0": x, "gpu_0/data_0": -x})  # the model's own names
    np.testing.assert_array_equal(res.outputs[0], np.maximum(x, 0))
    np.testing.assert_array_equal(res.outputs[1], np.maximum(-x, 0))


def test_batch_size_overrides_fixed_batch_and_baked_reshape(tmp_path):
    """batch_size replaces the data inputs' first dim; a Reshape constant that baked in the old
    batch (as exporters do) keeps following the batch."""
    need_ops("Reshape", "FullyConnected")
    w = rand(3, 12)
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["f"]), helper.make_node("Gemm", ["f", "w"], ["y"], transB=1)]
    model = make_model(nodes, {"x": (1, 3, 4)}, ["y"], {"w": w, "shape": np.array([1, 12], np.int64)})
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    sym = at.onnx.load(str(path), batch_size=5)
    assert sym.infer_shape()[1] == [(5, 3)]
    x = rand(5, 3, 4)
    res = at.backend.run(str(path), inputs={"x": x}, batch=5)
    np.testing.assert_allclose(res.outputs[0], x.reshape(5, 12) @ w.T, rtol=1e-5, atol=1e-6)
    from autotile.model_input import as_symbol

    assert as_symbol(str(path), batch=7).infer_shape()[1] == [(7, 3)]


def test_symbolic_batch_model_runs_at_any_batch():
    need_ops("Convolution", "Flatten", "FullyConnected", "softmax", "Reshape")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Softmax", ["c"], ["s"], axis=2),  # opset 11: rows of (N*2, 36)
             helper.make_node("Flatten", ["s"], ["f"]),
             helper.make_node("Gemm", ["f", "fc"], ["y"], transB=1)]
    model = make_model(nodes, {"x": ("N", 3, 6, 6)}, ["y"], {"w": rand(2, 3, 3, 3), "fc": rand(4, 72)}, opset=11)
    sym = at.onnx.load(model)
    for batch in (2, 5):
        x = rand(batch, 3, 6, 6)
        (got,) = at.backend.run(sym, inputs={"x": x}).outputs
        np.testing.assert_allclose(got, run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-5)


def test_symbolic_batch_without_batch_size_is_left_open():
    need_ops("Activation")
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": ("batch", 4)}, ["y"])
    sym = at.onnx.load(model)
    assert sym.infer_shape_partial()[0] == [None]
    assert sym.infer_shape(x=(9, 4))[1] == [(9, 4)]


# ----------------------------------------------------------------------------- errors

def test_unsupported_ops_are_all_listed_in_one_error():
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Det", ["a"], ["b"], name="det1"),
             helper.make_node("Det", ["b"], ["c"], name="det2"), helper.make_node("Hardmax", ["c"], ["d"]),
             helper.make_node("Custom", ["d"], ["y"], domain="com.example", name="mine")]
    model = make_model(nodes, {"x": (2, 3)}, ["y"], {"k": np.array([1], np.int64)})
    with pytest.raises(Error) as err:
        at.onnx.load(model)
    msg = str(err.value)
    for part in ("Det (node 'det1')", "Det (node 'det2')", "Hardmax (node 'd')", "com.example::Custom (node 'mine')"):
        assert part in msg
    assert "Traceback" not in msg and "Relu" not in msg


def test_not_an_onnx_file(tmp_path):
    bad = tmp_path / "notes.onnx"
    bad.write_text("these are not the weights you are looking for\n" * 10)
    with pytest.raises(Error, match="notes.onnx.*not a valid ONNX model|notes.onnx.*not an ONNX model"):
        at.onnx.load(str(bad))
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(Error, match="empty.onnx.*not an ONNX model"):
        at.onnx.load(str(empty))
    with pytest.raises(Error, match="does not exist"):
        at.onnx.load(str(tmp_path / "missing.onnx"))


def test_truncated_file(tmp_path):
    model = make_model([helper.make_node("Gemm", ["x", "w"], ["y"], transB=1)], {"x": (2, 4)}, ["y"],
                       {"w": rand(30, 4)})
    data = model.SerializeToString()
    path = tmp_path / "cut.onnx"
    for cut in (len(data) // 3, len(data) - 7):
        path.write_bytes(data[:cut])
        with pytest.raises(Error, match="cut.onnx"):
            at.onnx.load(str(path))


def test_old_opset_and_data_dependent_shape_errors():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": (2, 3)}, ["y"], opset=6)
    with pytest.raises(Error, match="opset 6"):
        at.onnx.load(model)
    model = make_model([helper.make_node("Reshape", ["x", "s"], ["y"], name="dyn")], {"x": (2, 3), "s": (2,)},
                       ["y"], dtypes={"s": TensorProto.INT64})
    with pytest.raises(Error, match="'dyn' \\(Reshape\\).*'s'.*must be a constant"):
        at.onnx.load(model)


def test_undefined_tensor_and_even_lrn_errors():
    model = make_model([helper.make_node("Relu", ["ghost"], ["y"], name="r1")], {"x": (2, 3)}, ["y"])
    with pytest.raises(Error, match="'r1' \\(Relu\\) uses tensor 'ghost'"):
        at.onnx.load(model)
    model = make_model([helper.make_node("LRN", ["x"], ["y"], size=4, name="norm1")], {"x": (1, 6, 2, 2)}, ["y"])
    with pytest.raises(Error, match="'norm1' \\(LRN\\).*size=4"):
        at.onnx.load(model)


def test_unsupported_semantics_name_the_node():
    model = make_model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[2, 2],
                                         name="pool3")], {"x": (1, 1, 6, 6)}, ["y"], opset=12)
    with pytest.raises(Error, match="'pool3' \\(MaxPool\\).*dilations"):
        at.onnx.load(model)
    model = make_model([helper.make_node("MaxPool", ["x"], ["y", "idx"], kernel_shape=[2, 2], name="p")],
                       {"x": (1, 1, 6, 6)}, ["y", "idx"], opset=12)
    with pytest.raises(Error, match="output 1 'idx' of ONNX node 'p'"):
        at.onnx.load(model)


def test_missing_onnx_package_message(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "onnx" or name.startswith("onnx."):
            raise ImportError("No module named 'onnx'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(Error, match=r"needs the onnx package: pip install onnx \(autotile's 'onnx' extra"):
        at.onnx.load("model.onnx")


# ----------------------------------------------------------------------------- ONNX node backend tests

# Node test families (modules of onnx.backend.test.case.node) of the ops the importer supports.
NODE_FAMILIES = ("add averagepool batch_normalization concat constant constantofshape conv div dropout flatten "
                 "gather gemm globalaveragepool globalmaxpool identity leakyrelu lrn matmul maxpool mul reducemean "
                 "reducesum relu reshape shape sigmoid slice softmax split squeeze sub sum tanh transpose "
                 "unsqueeze "
                 # element-wise math, comparisons and logic (onnx_ops_math)
                 "abs neg reciprocal exp log sqrt erf sign floor ceil isnan not_ hardsigmoid hardswish mish gelu "
                 "pow equal less less_or_equal greater greater_or_equal and_ or_ xor mod max min clip where "
                 # data movement and indexing (onnx_ops_index)
                 "expand tile pad rangeop cumsum trilu gatherelements gathernd "
                 # normalisation, softmax family, reductions, einsum (onnx_ops_nn)
                 "layernormalization instance_normalization groupnormalization logsoftmax softplus softsign "
                 "reducemax reducemin reduceprod reducel1 reducel2 reducesumsquare reduce_log_sum_exp reduce_log_sum "
                 "einsum "
                 # recurrent layers unrolled (onnx_ops_rnn)
                 "lstm gru").split()

# Cases whose semantics autotile does not reproduce; the importer must say so with an Error.
NODE_UNSUPPORTED = {
    "dilations": "pooling with dilations: autotile's Pooling (MXNet's) has no dilation",
    "training_mode": "BatchNormalization training_mode=1 (batch statistics at inference) is not supported",
    "maxpool_with_argmax": "MaxPool's Indices output is not computed",
    "matmul_1d_3d": "MatMul of a 1-D by an N-D (N > 2) tensor is not supported",
    "matmul_1d_1d": "MatMul of two vectors gives a 0-d scalar, which autotile tensors cannot be",
    "reshape_allowzero": "allowzero=1 with a 0 in the shape gives an empty tensor",
    "zero_size_splits": "empty split parts give empty tensors",
    "slice_start_out_of_bounds": "a slice selecting nothing gives an empty tensor",
    "einsum_batch_diagonal": "Einsum with a repeated index (a diagonal) is not supported",
    "bfloat16": "bfloat16 tensors: NumPy has no bfloat16 type, so autotile refuses the data or the cast",
    "test_reduce_max_empty_set": "max of an empty set (ONNX: -inf) is refused by the kernel",
    "test_reduce_min_empty_set": "min of an empty set (ONNX: +inf) is refused by the kernel",
    "test_shape_start_greater_than_end": "an empty shape: autotile does not compute empty tensors",
    "test_constantofshape_int_shape_zero": "an empty constant: autotile does not compute empty tensors",
    "ril_zero": "a tensor with no elements: autotile does not compute empty tensors",
    "riu_zero": "a tensor with no elements: autotile does not compute empty tensors",
    "test_not_2d": "the case declares opset 1; autotile imports opsets 7 and later",
    "test_not_3d": "the case declares opset 1; autotile imports opsets 7 and later",
    "test_not_4d": "the case declares opset 1; autotile imports opsets 7 and later",
    "_string": "string tensors: autotile computes numeric tensors only",
    "range_float_type_positive_delta_expanded": "Range spelled as a Loop whose trip count the graph computes "
                                                "from float inputs: not known at import, so the Loop is refused",
    "range_float16_type_positive_delta_expanded": "Range spelled as a Loop whose trip count the graph computes "
                                                  "from float inputs: not known at import, so the Loop is refused",
}

# Cases the importer converts but whose reference outputs come from NumPy's random generator.
NODE_RANDOM = {
    "test_training_dropout": "training-mode Dropout draws a random mask",
    "test_training_dropout_default": "training-mode Dropout draws a random mask",
    "test_training_dropout_default_mask": "training-mode Dropout draws a random mask",
    "test_training_dropout_mask": "training-mode Dropout draws a random mask",
}


NODE_CASES = node_cases(NODE_FAMILIES)


@pytest.mark.parametrize("name", sorted(NODE_CASES))
def test_onnx_node_backend(name):
    from autotile.frontend.onnx_converters import CONVERTERS

    case = NODE_CASES[name]
    ops = sorted({n.op_type for n in case.model.graph.node} - set(CONVERTERS))
    if ops:  # e.g. the *_expanded variants spell the op out in Exp, ReduceMax, Where...
        pytest.skip(f"uses ops outside the importer's scope: {ops}")
    if name in NODE_RANDOM:
        pytest.skip(NODE_RANDOM[name])
    model, feeds, want = node_case_feeds(case)
    # A key naming a whole case ("test_...") matches that case only; others match as substrings.
    reason = next((r for key, r in NODE_UNSUPPORTED.items()
                   if key == name or (key in name and not key.startswith("test_"))), None)
    if reason is not None:  # refused on import, or (empty reductions) by the run
        with pytest.raises(Error):
            sym = at.onnx.load(model)
            at.backend.run(sym, inputs={sym.onnx_names[k]: v for k, v in feeds.items()})
        pytest.skip(f"unsupported (the importer raises Error): {reason}")
    try:
        sym = at.onnx.load(model)
    except Error as e:
        if "is not registered" in str(e):
            pytest.skip(str(e))
        raise
    got = at.backend.run(sym, inputs={sym.onnx_names[k]: v for k, v in feeds.items()}).outputs
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if w.ndim == 0:  # autotile's scalars have shape (1,), as MXNet's
            assert g.shape == (1,)
            g = g.reshape(())
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=case.rtol, atol=1e-6)


# ----------------------------------------------------------------------------- light model zoo

def _light(name):
    path = os.path.join(LIGHT_DIR, f"light_{name}.onnx")
    if not os.path.exists(path):
        pytest.skip(f"{path} is not shipped with this onnx version")
    model = onnx.load(path)
    inits = {i.name for i in model.graph.initializer}
    (data,) = [i for i in model.graph.input if i.name not in inits]
    shape = tuple(d.dim_value or 1 for d in data.type.tensor_type.shape.dim)
    # The input the onnx backend runner feeds these models (runner.generate_dummy_data).
    x = (np.arange(np.prod(shape)).reshape(shape) / np.prod(shape)).astype(np.float32)
    want = numpy_helper.to_array(onnx.load_tensor(os.path.join(LIGHT_DIR, f"light_{name}_output_0.pb")))
    return path, data.name, x, want


#: the largest logit whose float32 ulp (|x| * 2^-23) moves a softmax by under 1e-4 (rtol 1e-3 below)
SOFTMAX_RESOLVABLE = 500.0


def _check_shipped(path, data, x, want):
    """The shipped reference output (uniform: every weight of these nets is 0.02, so every logit
    is equal). Several nets' logits reach 1e10..1e31 there, where one float32 ulp is 1e3..1e24
    and a different summation order (BLAS threads, blocking) turns the uniform softmax into
    anything; so the logits are compared, relative to their size, with onnxruntime's, and
    the softmax output with the shipped one only where a logit's ulp cannot move it."""
    model = onnx.load(path)
    softmax = [n for n in model.graph.node if n.op_type == "Softmax"]
    if softmax:
        model.graph.output.append(helper.make_tensor_value_info(softmax[-1].input[0], TensorProto.FLOAT, None))
    got, ref = run_autotile(model, {data: x}), run_ort(model, {data: x})
    assert len(got) == len(ref) == 1 + bool(softmax)
    logits_size = float(np.abs(ref[-1]).max())
    if softmax:  # logits: float32 sums of ~1e3..1e5 terms each, relative to the largest
        np.testing.assert_allclose(got[-1], ref[-1], rtol=0, atol=1e-4 * logits_size)
    if not softmax or logits_size < SOFTMAX_RESOLVABLE:
        np.testing.assert_allclose(got[0], want, rtol=1e-3, atol=1e-6)


def _run_light(name):
    """The shipped reference output (_check_shipped), then the same net with random weights
    against onnxruntime, logits included."""
    path, data, x, want = _light(name)
    _check_shipped(path, data, x, want)
    model = randomize_weights(onnx.load(path))
    x = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    got, ref = run_autotile(model, {data: x}), run_ort(model, {data: x})
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-3, atol=1e-4 * float(np.abs(r).max()))
    assert np.ptp(ref[-1]) > 1e-2 * np.abs(ref[-1]).max()  # the logits do discriminate


def test_light_bvlc_alexnet():
    need_ops("Convolution", "LRN", "Pooling", "Dropout", "FullyConnected", "softmax", "Reshape")
    _run_light("bvlc_alexnet")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["vgg19", "zfnet512", "squeezenet", "inception_v1", "resnet50", "shufflenet",
                                  "inception_v2", "densenet121"])
def test_light_model_zoo(name):
    need_ops("Convolution", "LRN", "Pooling", "Dropout", "FullyConnected", "softmax", "Reshape", "BatchNorm",
             "add_n", "Concat", "transpose", "broadcast_mul", "broadcast_add")
    _run_light(name)


def test_backend_run_takes_an_onnx_path(tmp_path):
    need_ops("Convolution", "Pooling")
    w = rand(2, 3, 3, 3)
    model = make_model([helper.make_node("Conv", ["x", "w"], ["c"]),
                        helper.make_node("GlobalAveragePool", ["c"], ["y"])], {"x": (1, 3, 5, 5)}, ["y"], {"w": w})
    path = tmp_path / "tiny.onnx"
    onnx.save(model, str(path))
    x = rand(1, 3, 5, 5)
    got = at.backend.run(str(path), inputs={"x": x}).outputs[0]
    np.testing.assert_allclose(got, run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got, run_autotile(model, {"x": x})[0])
