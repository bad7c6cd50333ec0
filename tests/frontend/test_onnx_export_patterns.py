"""Patterns the PyTorch exporters write that the ONNX importer must fold or convert exactly as
onnxruntime runs them (issue 22, "At import"): each model is built with onnx.helper in the
exporter's own form, and onnxruntime is the oracle."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import autotile as at  # noqa: E402
from autotile.errors import Error  # noqa: E402

from onnx_models import assert_matches_ort, make_model, run_ort  # noqa: E402

RNG = np.random.default_rng(22)
INT64_MIN_PLUS_1 = -(2 ** 63 - 1)  # what the TorchScript exporter writes for "to the start" in flip


def _const(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name))


# ----------------------------------------------------------------------------- Slice with negative steps

#: (start, end, step) on an axis of size 6, with ONNX's clamping: starts to [0, 5] and ends to
#: [-1, 5] for a negative step (an end clamped to -1 means "through index 0").
NEGATIVE_STEPS = [
    (-1, INT64_MIN_PLUS_1, -1),  # flip: the whole axis reversed
    (3, -7, -1),  # end -1 after adding the size: through index 0
    (-10, -100, -1),  # start clamped up to 0: one element
    (100, -100, -3),  # start clamped down to 5
    (5, 0, -2),
    (4, 1, -1),
    (1, 100, 2),  # positive steps keep working
    (-100, 4, 1),
]


@pytest.mark.parametrize("start,end,step", NEGATIVE_STEPS)
def test_slice_of_a_constant_folds_with_onnx_clamping(start, end, step):
    """A Slice whose every input is constant is folded at import time."""
    table = np.arange(6 * 2, dtype=np.int64).reshape(6, 2) * 3
    nodes = [_const("starts", [start]), _const("ends", [end]), _const("axes", [0]), _const("steps", [step]),
             helper.make_node("Slice", ["table", "starts", "ends", "axes", "steps"], ["s"]),
             helper.make_node("Cast", ["s"], ["sf"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["x", "sf"], ["y"])]
    n = len(run_ort(make_model(nodes[:5], {}, ["s"], {"table": table}, dtypes={"s": TensorProto.INT64}), {})[0])
    feeds = {"x": RNG.standard_normal((n, 2)).astype(np.float32)}
    assert_matches_ort(make_model(nodes, {"x": (n, 2)}, ["y"], {"table": table}), feeds)


@pytest.mark.parametrize("start,end,step", NEGATIVE_STEPS)
@pytest.mark.parametrize("axis", [1, -1])
def test_slice_of_data_with_negative_steps(start, end, step, axis):
    """A Slice of a run-time tensor becomes autotile's slice op with the same clamping."""
    nodes = [_const("starts", [start]), _const("ends", [end]), _const("axes", [axis]), _const("steps", [step]),
             helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])]
    feeds = {"x": RNG.standard_normal((2, 6, 3) if axis == 1 else (2, 3, 6)).astype(np.float32)}
    assert_matches_ort(make_model(nodes, {"x": feeds["x"].shape}, ["y"]), feeds)


def test_slice_of_two_axes_with_mixed_steps():
    nodes = [helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])]
    inits = {"starts": np.array([-1, 0], np.int64), "ends": np.array([INT64_MIN_PLUS_1, 5], np.int64),
             "axes": np.array([2, 1], np.int64), "steps": np.array([-2, 2], np.int64)}
    feeds = {"x": RNG.standard_normal((2, 5, 7)).astype(np.float32)}
    assert_matches_ort(make_model(nodes, {"x": (2, 5, 7)}, ["y"], inits), feeds)


def test_an_empty_negative_step_slice_names_the_node():
    nodes = [helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"], name="empty_flip")]
    inits = {"starts": np.array([-1], np.int64), "ends": np.array([-1], np.int64),
             "axes": np.array([1], np.int64), "steps": np.array([-1], np.int64)}
    with pytest.raises(Error, match="empty_flip.*empty"):
        at.onnx.load(make_model(nodes, {"x": (2, 6)}, ["y"], inits))


def _torchscript_pad(pad, rank: int):
    """The nodes TorchScript (opset 11-17) writes for ``F.pad(x, pad)``: PyTorch's pad list
    (last dim first) is turned into ONNX's begin/end layout by a reshape, a flip (a Slice with
    step -1 and end INT64_MIN+1), a transpose and a flatten."""
    return [_const("pad", np.array(pad, np.int64)), helper.make_node("Shape", ["pad"], ["pad_len"]),
            _const("rank2", np.array(2 * rank, np.int64)), helper.make_node("Sub", ["rank2", "pad_len"], ["ext"]),
            helper.make_node("ConstantOfShape", ["ext"], ["zeros"],
                             value=numpy_helper.from_array(np.array([0], np.int64))),
            helper.make_node("Concat", ["pad", "zeros"], ["all"], axis=0),
            _const("pairs", np.array([-1, 2], np.int64)), helper.make_node("Reshape", ["all", "pairs"], ["p2"]),
            _const("fs", np.array([-1], np.int64)), _const("fe", np.array([INT64_MIN_PLUS_1], np.int64)),
            _const("fa", np.array([0], np.int64)), _const("fst", np.array([-1], np.int64)),
            helper.make_node("Slice", ["p2", "fs", "fe", "fa", "fst"], ["flipped"]),
            helper.make_node("Transpose", ["flipped"], ["pt"], perm=[1, 0]),
            _const("flat", np.array([-1], np.int64)), helper.make_node("Reshape", ["pt", "flat"], ["pads"]),
            _const("value", np.array(0.0, np.float32)),
            helper.make_node("Pad", ["x", "pads", "value"], ["y"], mode="constant")]


@pytest.mark.parametrize("pad,shape", [((2, 0), (2, 3, 7)),  # causal padding of a TCN's Conv1d
                                       ((1, 2, 0, 3), (1, 2, 4, 5))])  # Swin's pad to whole windows
def test_torchscript_f_pad_folds_to_the_right_pads(pad, shape):
    feeds = {"x": RNG.standard_normal(shape).astype(np.float32)}
    assert_matches_ort(make_model(_torchscript_pad(pad, len(shape)), {"x": shape}, ["y"], opset=17), feeds)


# ----------------------------------------------------------------------------- GatherElements over buffers

def test_token_type_ids_gathered_from_an_expanded_buffer():
    """ALBERT and ELECTRA (Hugging Face): ``token_type_ids.expand(n, -1).gather(1, position_ids)``
    over (1, 512) buffers, all constant once the batch is known, so the importer folds it."""
    seq, vocab = 16, 30
    nodes = [helper.make_node("Shape", ["input_ids"], ["shape"]),
             _const("one", np.array([1], np.int64)), _const("two", np.array([2], np.int64)),
             _const("zero", np.array([0], np.int64)), _const("minus1", np.array([-1], np.int64)),
             helper.make_node("Slice", ["shape", "one", "two"], ["seq"]),
             helper.make_node("Slice", ["position_ids", "zero", "seq", "one"], ["pos"]),  # (1, 16)
             helper.make_node("Shape", ["pos"], ["pos_shape"]),
             helper.make_node("Slice", ["pos_shape", "zero", "one"], ["rows"]),
             helper.make_node("Concat", ["rows", "minus1"], ["size"], axis=0),
             # TorchScript's expand(-1): Where(size == -1, 1, size)
             helper.make_node("Equal", ["size", "minus1"], ["keep"]),
             helper.make_node("Shape", ["size"], ["size_len"]),
             helper.make_node("ConstantOfShape", ["size_len"], ["ones"],
                              value=numpy_helper.from_array(np.array([1], np.int64))),
             helper.make_node("Where", ["keep", "ones", "size"], ["target"]),
             helper.make_node("Expand", ["token_type_ids", "target"], ["buffered"]),
             helper.make_node("GatherElements", ["buffered", "pos"], ["types"], axis=1),
             helper.make_node("Expand", ["types", "shape"], ["types_b"]),
             helper.make_node("Gather", ["type_table", "types_b"], ["type_emb"]),
             helper.make_node("Gather", ["word_table", "input_ids"], ["word_emb"]),
             helper.make_node("Add", ["word_emb", "type_emb"], ["y"])]
    inits = {"token_type_ids": np.zeros((1, 512), np.int64), "position_ids": np.arange(512, dtype=np.int64)[None],
             "type_table": RNG.standard_normal((2, 4)).astype(np.float32),
             "word_table": RNG.standard_normal((vocab, 4)).astype(np.float32)}
    model = make_model(nodes, {"input_ids": (2, seq)}, ["y"], inits, opset=17, dtypes={"input_ids": TensorProto.INT64})
    assert_matches_ort(model, {"input_ids": RNG.integers(0, vocab, (2, seq)).astype(np.int64)})


@pytest.mark.parametrize("data_shape,idx_shape,axis", [((1, 300), (1, 16), 1), ((100, 3), (7, 3), 0),
                                                       ((4, 80, 5), (2, 9, 5), -2)])
def test_gather_elements_of_constants_folds(data_shape, idx_shape, axis):
    """Long gathered axes, negative indices, and indices smaller than the data on other axes."""
    data = RNG.integers(-50, 50, data_shape).astype(np.int64)
    size = data_shape[axis]
    idx = RNG.integers(-size, size, idx_shape).astype(np.int64)
    nodes = [helper.make_node("GatherElements", ["data", "idx"], ["g"], axis=axis),
             helper.make_node("Cast", ["g"], ["gf"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["x", "gf"], ["y"])]
    feeds = {"x": RNG.standard_normal(idx_shape).astype(np.float32)}
    assert_matches_ort(make_model(nodes, {"x": idx_shape}, ["y"], {"data": data, "idx": idx}), feeds)


# ----------------------------------------------------------------------------- float64 runs

def _masked_lm(dtype):
    """Token embedding -> projection -> GPT-2's ``where(causal, scores, mask_value)`` -> softmax,
    with every float initializer and output in `dtype` (the float64 copy is the oracle)."""
    f = TensorProto.FLOAT if dtype == np.float32 else TensorProto.DOUBLE
    rng = np.random.default_rng(5)
    inits = {"wte": rng.standard_normal((11, 6)), "W": rng.standard_normal((6, 6)), "B": rng.standard_normal(6),
             "mask_value": np.array(np.finfo(np.float32).min), "causal": np.tril(np.ones((5, 6), bool))}
    inits = {k: v.astype(np.float32).astype(dtype) if v.dtype.kind == "f" else v for k, v in inits.items()}
    nodes = [helper.make_node("Gather", ["wte", "ids"], ["emb"]),
             helper.make_node("MatMul", ["emb", "W"], ["xw"]), helper.make_node("Add", ["xw", "B"], ["scores"]),
             helper.make_node("Where", ["causal", "scores", "mask_value"], ["masked"]),
             helper.make_node("Softmax", ["masked"], ["y"], axis=-1)]
    return make_model(nodes, {"ids": (2, 5)}, ["y"], inits, dtypes={"ids": TensorProto.INT64, "y": f})


def test_a_float64_run_of_a_float32_model_computes_in_float64():
    """The float32 file run with float64 params: every tensor is float64 (the embedding's rows
    too, which a float32 default would mix into the where), equal to the float64 oracle."""
    ids = RNG.integers(0, 11, (2, 5)).astype(np.int64)
    want = run_ort(_masked_lm(np.float64), {"ids": ids})[0]
    sym = at.onnx.load(_masked_lm(np.float32))
    params = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in sym.params.items()}
    ref = at.backend.run(sym, inputs={"ids": ids}, params=params, train=True)
    assert ref.outputs[0].dtype == np.float64
    np.testing.assert_allclose(ref.outputs[0], want, rtol=1e-12, atol=1e-14)
    res = at.backend.run(sym, devices=2, inputs={"ids": ids}, params=params, train=True)
    for name, g in ref.grads.items():
        assert g.dtype == np.float64 and res.grads[name].dtype == np.float64, name
        np.testing.assert_allclose(res.grads[name], g, rtol=1e-10, atol=1e-12, err_msg=name)
