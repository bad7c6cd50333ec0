"""The resampling and index ops' ONNX converters (frontend/onnx_ops_resample.py) against
independent oracles: the onnx wheel's node backend tests (the spec's reference outputs) for
ConvTranspose, Resize, Upsample, ArgMax, ArgMin and ScatterND, and onnxruntime on small
onnx.helper graphs; then U-Net / DCGAN-like graphs that use them train on k devices under
random plans equal to one device."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import autotile as at  # noqa: E402
from autotile.errors import Error  # noqa: E402
from onnx_models import node_case_feeds, node_cases  # noqa: E402

FAMILIES = ("convtranspose", "resize", "upsample", "argmax", "argmin", "scatternd")

# Cases whose semantics autotile does not reproduce: the importer must refuse them with Error.
UNSUPPORTED = {
    "tf_crop_and_resize": "coordinate transformation tf_crop_and_resize is not supported",
    "half_pixel_symmetric": "coordinate transformation half_pixel_symmetric is not supported",
    "antialias": "antialiased downsampling is not supported",
}


def _cases():
    ops = {"ConvTranspose", "Resize", "Upsample", "ArgMax", "ArgMin", "ScatterND"}
    return {name: c for name, c in node_cases(FAMILIES).items() if {n.op_type for n in c.model.graph.node} <= ops}


CASES = _cases()


def test_node_cases_found():
    assert len(CASES) >= 40, sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_onnx_node_backend(name):
    case = CASES[name]
    model, feeds, want = node_case_feeds(case, ("roi", "scales", "sizes"))
    reason = next((r for key, r in UNSUPPORTED.items() if key in name), None)
    if reason is not None:
        with pytest.raises(Error):
            sym = at.onnx.load(model)
            at.backend.run(sym, inputs={sym.onnx_names[k]: v for k, v in feeds.items()})
        pytest.skip(f"refused: {reason}")
    sym = at.onnx.load(model)
    got = at.backend.run(sym, inputs={sym.onnx_names[k]: v for k, v in feeds.items()}).outputs
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if w.ndim == 0:
            g = g.reshape(())
        assert g.shape == w.shape
        if w.dtype.kind in "iu":
            assert g.dtype == np.int64
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=max(case.rtol, 1e-5), atol=1e-5)


# ----------------------------------------------------------------------------- onnxruntime graphs

def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=[numpy_helper.from_array(v, k) for k, v in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return model


def _vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def unet_model():
    """Conv -> Resize (linear, scales) -> skip Concat -> ConvTranspose (asymmetric pads and
    output_padding) -> Resize (nearest, sizes, axes) -> ReduceMean."""
    rng = np.random.default_rng(0)
    inits = [("w1", rng.standard_normal((4, 5, 3, 3)).astype(np.float32) * 0.3),
             ("b1", rng.standard_normal(4).astype(np.float32)),
             ("wt", rng.standard_normal((8, 2, 3, 3)).astype(np.float32) * 0.3),
             ("bt", rng.standard_normal(4).astype(np.float32)),
             ("roi", np.zeros(0, np.float32)), ("scales", np.array([1, 1, 2, 2], np.float32)),
             ("sizes", np.array([5, 7], np.int64))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Resize", ["r1", "roi", "scales"], ["up"], mode="linear",
                              coordinate_transformation_mode="pytorch_half_pixel"),
             helper.make_node("Concat", ["up", "x4"], ["cat"], axis=1),
             helper.make_node("ConvTranspose", ["cat", "wt", "bt"], ["ct"], strides=[2, 2], pads=[1, 0, 0, 1],
                              output_padding=[1, 0], group=2),
             helper.make_node("Resize", ["ct", "", "", "sizes"], ["down"], mode="nearest", axes=[2, 3],
                              coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
             helper.make_node("Tanh", ["down"], ["y"])]
    x4 = [helper.make_node("Slice", ["x", "s0", "s1", "s2"], ["x4"])]
    inits += [("s0", np.array([0], np.int64)), ("s1", np.array([4], np.int64)), ("s2", np.array([1], np.int64))]
    return _model(x4 + nodes, [_vi("x", [2, 5, 8, 8])], [_vi("y", None)], inits, opset=18)


def clip_pooling_model():
    """CLIP's text pooling: the hidden state at the position of the largest token id, plus a
    ScatterND of computed rows into a buffer and an ArgMin with select_last_index."""
    rng = np.random.default_rng(1)
    inits = [("proj", rng.standard_normal((6, 4)).astype(np.float32)),
             ("idx", np.array([[0, 1], [1, 3]], np.int64)), ("batch", np.arange(2, dtype=np.int64).reshape(2, 1)),
             ("two", np.array([2], np.int64)), ("table", rng.standard_normal(4).astype(np.float32)),
             ("head", rng.standard_normal((5, 3)).astype(np.float32))]
    nodes = [helper.make_node("MatMul", ["h", "proj"], ["hp"]),  # (2, 5, 4)
             helper.make_node("ArgMax", ["ids"], ["am"], axis=-1, keepdims=1),  # (2, 1)
             helper.make_node("Concat", ["batch", "am"], ["where"], axis=1),  # (2, 2)
             helper.make_node("GatherND", ["hp", "where"], ["pooled"]),  # (2, 4)
             helper.make_node("ScatterND", ["hp", "idx", "pooled"], ["sc"]),
             helper.make_node("ArgMin", ["sc"], ["amin"], axis=2, keepdims=0, select_last_index=1),
             helper.make_node("Gather", ["table", "amin"], ["aminf"], axis=0),
             helper.make_node("ReduceSum", ["sc", "two"], ["red"], keepdims=0),
             helper.make_node("Add", ["red", "aminf"], ["sum"]),
             # a weight at the head: a float64 run's head gradient takes its dtype from it (see the report
             # on run_multi_device typing a head gradient float32 when the output's last op is a reduction)
             helper.make_node("MatMul", ["sum", "head"], ["y"])]
    return _model(nodes, [_vi("h", [2, 5, 6]), _vi("ids", [2, 5])], [_vi("y", None)], inits, opset=13)


def embedding_bag_model(const_trips=True, bags=3, length=4, vocab=10, dim=5):
    """What torch.onnx writes for nn.EmbeddingBag(mode="mean") on 2-D ids: a Loop over the bags
    whose body slices one bag's ids at constant offsets, gathers and averages them (a scan output)."""
    weight = np.random.default_rng(2).standard_normal((vocab, dim)).astype(np.float32)
    offsets = np.arange(0, bags * length, length, dtype=np.int64)
    body = helper.make_graph(
        [helper.make_node("Gather", ["starts", "i"], ["s0"], axis=0),
         helper.make_node("Gather", ["ends", "i"], ["e0"], axis=0),
         helper.make_node("Unsqueeze", ["s0"], ["s"], axes=[0]), helper.make_node("Unsqueeze", ["e0"], ["e"], axes=[0]),
         helper.make_node("Slice", ["flat", "s", "e", "zero"], ["row"]),
         helper.make_node("Gather", ["W", "row"], ["emb"], axis=0),
         helper.make_node("ReduceMean", ["emb"], ["red"], axes=[0], keepdims=0),
         helper.make_node("Identity", ["cond"], ["cond_out"])],
        "body", [_vi("i", [], TensorProto.INT64), _vi("cond", [], TensorProto.BOOL)],
        [_vi("cond_out", [], TensorProto.BOOL), _vi("red", None)])
    nodes = [helper.make_node("Reshape", ["ids", "minus1"], ["flat"]),
             helper.make_node("Loop", ["trips" if const_trips else "ntrips", "true"], ["bags"], body=body),
             helper.make_node("Tanh", ["bags"], ["out"])]
    inits = [("W", weight), ("starts", offsets), ("ends", np.append(offsets[1:], bags * length)),
             ("zero", np.array([0], np.int64)), ("minus1", np.array([-1], np.int64)), ("true", np.array(True))]
    inputs = [_vi("ids", [bags, length], TensorProto.INT64)]
    if const_trips:
        inits.append(("trips", np.array(bags, np.int64)))
    else:
        inputs.append(_vi("ntrips", [], TensorProto.INT64))
    return _model(nodes, inputs, [_vi("out", None)], inits, opset=11)


def bicubic_model():
    """Cubic Resize as the Hugging Face vision towers use it (Dinov2/ViT interpolate their position
    embeddings bicubically, a trained weight) and as feature maps are resampled: a conv output
    downsampled (half_pixel, scale 3/4), plus a 3x3 position table resized to 6x6
    (pytorch_half_pixel, sizes), then upsampled by (3/2, 2) with cubic_coeff_a -0.5 and
    exclude_outside (asymmetric)."""
    rng = np.random.default_rng(4)
    inits = [("w", rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3),
             ("pos", rng.standard_normal((1, 4, 3, 3)).astype(np.float32)),
             ("roi", np.zeros(0, np.float32)), ("down", np.array([1, 1, 0.75, 0.75], np.float32)),
             ("pos_sizes", np.array([1, 4, 6, 6], np.int64)), ("up", np.array([1, 1, 1.5, 2], np.float32))]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Resize", ["c", "roi", "down"], ["cd"], mode="cubic"),
             helper.make_node("Resize", ["pos", "roi", "", "pos_sizes"], ["p6"], mode="cubic",
                              coordinate_transformation_mode="pytorch_half_pixel"),
             helper.make_node("Add", ["cd", "p6"], ["s"]),
             helper.make_node("Resize", ["s", "roi", "up"], ["su"], mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1,
                              coordinate_transformation_mode="asymmetric"),
             helper.make_node("Tanh", ["su"], ["y"])]
    return _model(nodes, [_vi("x", [2, 3, 8, 8])], [_vi("y", None)], inits, opset=13)


def _feeds_of(name):
    rng = np.random.default_rng(3)
    if name == "bicubic":
        return {"x": rng.standard_normal((2, 3, 8, 8)).astype(np.float32)}
    if name == "unet":
        return {"x": rng.standard_normal((2, 5, 8, 8)).astype(np.float32)}
    if name == "clip_pooling":
        return {"h": rng.standard_normal((2, 5, 6)).astype(np.float32),
                "ids": rng.integers(0, 50, (2, 5)).astype(np.float32)}
    return {"ids": rng.integers(0, 10, (3, 4)).astype(np.int64)}


MODELS = {"bicubic": bicubic_model, "unet": unet_model, "clip_pooling": clip_pooling_model, "embedding_bag": embedding_bag_model}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_imports_equal_onnxruntime_and_train_on_4_devices_as_on_1(name):
    ort = pytest.importorskip("onnxruntime")
    model = MODELS[name]()
    feeds = _feeds_of(name)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    sym = at.onnx.load(model)
    inputs = {sym.onnx_names[k]: v for k, v in feeds.items()}
    got = at.backend.run(sym, inputs=inputs).outputs[0]
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-4, atol=1e-5)
    # float64 training step: 4 devices (a searched plan) equal 1
    params = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in sym.params.items()}
    inputs = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in inputs.items()}
    ref = at.backend.run(sym, inputs=inputs, params=params, train=True)
    res = at.backend.run(sym, devices=4, inputs=inputs, params=params, train=True)
    assert ref.grads and set(res.grads) == set(ref.grads)
    for p, g in ref.grads.items():
        np.testing.assert_allclose(res.grads[p], g, rtol=1e-9, atol=1e-11, err_msg=f"{name}: grad {p}")


def test_loop_with_a_run_time_trip_count_is_refused_naming_the_node():
    with pytest.raises(Error, match=r"node 'bags' \(Loop\).*trip count 'ntrips' is computed at run time"):
        at.onnx.load(embedding_bag_model(const_trips=False))


def test_unsupported_resize_and_convtranspose_are_refused_naming_the_node():
    x = _vi("x", [1, 1, 4, 4])
    inits = [("roi", np.zeros(0, np.float32)), ("scales", np.array([1, 1, 2, 2], np.float32))]
    lanczos = _model([helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode="lanczos", name="up")], [x],
                     [_vi("y", None)], inits, opset=13)
    with pytest.raises(Error, match=r"node 'up' \(Resize\): mode 'lanczos'"):
        at.onnx.load(lanczos)
    runtime = _model([helper.make_node("Resize", ["x", "roi", "s"], ["y"], name="up")], [x, _vi("s", [4])],
                     [_vi("y", None)], inits[:1], opset=13)
    with pytest.raises(Error, match=r"node 'up' \(Resize\).*must be a constant"):
        at.onnx.load(runtime)
