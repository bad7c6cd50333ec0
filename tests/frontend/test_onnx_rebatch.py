"""Re-importing a fixed-batch ONNX export at another batch (issue 31, section 5).

A Reshape whose target shape constant holds the export's batch (alone or merged with the next
dims) is rewritten for ``batch_size=``; a constant that cannot be rewritten is named in the
error, with the node it feeds, instead of a downstream symptom ("MatMul needs the ranks of
both inputs"). Oracles: NumPy at the new batch, and per-sample outputs of a torch fixture
(exported at batch 2, onnxruntime's outputs stored) fed in another order at batch 4.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import autotile as at  # noqa: E402
from autotile.errors import Error  # noqa: E402

RNG = np.random.default_rng(5)
W = RNG.standard_normal((6, 8)).astype(np.float32)
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "onnx_torch")


def _heads_model():
    """y = reshape(transpose(reshape(x . W, (2, 2, 4)), (0, 2, 1)), (2 * 8,)) reshaped to (2, 8):
    the batch 2 is baked into two Reshape constants (one merged with 8 as 16)."""
    inits = [numpy_helper.from_array(W, "W"), numpy_helper.from_array(np.array([2, 2, 4], np.int64), "split"),
             numpy_helper.from_array(np.array([16], np.int64), "flat"),
             numpy_helper.from_array(np.array([2, 8], np.int64), "back")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"]),
             helper.make_node("Reshape", ["h", "split"], ["heads"], name="split_heads"),
             helper.make_node("Transpose", ["heads"], ["t"], perm=[0, 2, 1]),
             helper.make_node("Reshape", ["t", "flat"], ["f"], name="flatten_all"),
             helper.make_node("Reshape", ["f", "back"], ["y"], name="unflatten")]
    graph = helper.make_graph(nodes, "heads", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("batch", [1, 5])
def test_reshape_constants_holding_the_batch_are_rewritten(batch):
    model = _heads_model()
    before = model.SerializeToString()
    sym = at.onnx.load(model, batch_size=batch)
    assert model.SerializeToString() == before  # the caller's ModelProto is not changed
    x = RNG.standard_normal((batch, 6)).astype(np.float32)
    want = (x @ W).reshape(batch, 2, 4).transpose(0, 2, 1).reshape(batch, 8)
    np.testing.assert_allclose(at.backend.run(sym, inputs={"x": x}).outputs[0], want, rtol=1e-5, atol=1e-5)


def test_a_constant_that_pins_the_batch_is_named():
    """An Expand to a baked (2, 1, 4) mask meets data of batch 5: the error names the constant,
    the Expand and the batch it was exported at."""
    inits = [numpy_helper.from_array(np.ones((1, 1, 4), np.float32), "mask1"),
             numpy_helper.from_array(np.array([2, 1, 4], np.int64), "mask_shape")]
    nodes = [helper.make_node("Expand", ["mask1", "mask_shape"], ["mask"], name="expand_mask"),
             helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Mul", ["r", "mask"], ["m"]),
             helper.make_node("MatMul", ["m", "Wt"], ["y"])]
    inits.append(numpy_helper.from_array(RNG.standard_normal((4, 3)).astype(np.float32), "Wt"))
    graph = helper.make_graph(nodes, "pinned", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1, 3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(Error, match=r"fixed batch of 2.*'mask_shape' = \(2, 1, 4\).*'expand_mask' \(Expand\)"):
        sym = at.onnx.load(model, batch_size=5)
        at.backend.run(sym, inputs={"x": np.ones((5, 1, 4), np.float32)})


def _fixture_per_sample(name, batch_order):
    path = os.path.join(FIXTURES, name + ".onnx")
    if not os.path.exists(path):
        pytest.skip(f"{path} not shipped")
    z = np.load(path[:-5] + ".npz")
    sym = at.onnx.load(path, batch_size=len(batch_order))
    feeds = {sym.onnx_names[k[3:]]: z[k][batch_order] for k in z.files if k.startswith("in.")}
    wants = [z[k][batch_order] for k in z.files if k.startswith("out.")]
    return at.backend.run(sym, inputs=feeds).outputs, wants


@pytest.mark.parametrize("name", ["attention_ts13", "attention_ts17", "attention_dynamo18"])
def test_fixed_batch_torch_exports_at_another_batch_match_per_sample(name):
    """Batch 4 fed samples (0, 1, 1, 0) of the fixture: its stored outputs in that order."""
    outs, wants = _fixture_per_sample(name, [0, 1, 1, 0])
    for o, w in zip(outs, wants):
        np.testing.assert_allclose(o, w, rtol=2e-3, atol=2e-4)


def test_a_pinned_export_that_imported_silently_wrong_is_refused():
    """ConvNeXt's dynamo export gathers pooled features with indices traced at batch 2: at
    batch 4 it imported and returned 2 rows. Now an Error naming the output and the constants."""
    with pytest.raises(Error, match=r"'logits' comes out with 2 rows.*fixed batch of 2.*'val_21'"):
        _fixture_per_sample("convnext_dynamo20", [0, 1, 1, 0])


def test_the_error_names_the_constant_not_a_downstream_symptom():
    """gpt-neox's TorchScript export failed at batch 4 with 'MatMul needs the ranks of both
    inputs' and nothing more; the error now names a constant holding the batch and its node."""
    with pytest.raises(Error, match=r"fixed batch of 2.*constant '[^']+' .*node '[^']+' \("):
        _fixture_per_sample("gptneox_ts17", [0, 1, 1, 0])


def test_a_stored_state_of_the_old_batch_is_named():
    """A GRU's TorchScript export stores h0 as a (1, 2, 16) constant (batch in dim 1) and expands
    it: the fold's broadcast error now names that constant and the batch it holds."""
    with pytest.raises(Error, match=r"'/rnn/Expand'.*fixed batch of 2.*'/rnn/Constant_output_0' of shape \(1, 2, 16\)"):
        _fixture_per_sample("gru_ts13", [0, 1, 1, 0])


def test_an_expand_restating_the_batch_is_rewritten():
    """Grouped-query attention's key repeat: Expand (B, kv, 1, d) to a literal (2, kv, 2, d).
    At batch 5 the target says 5 where the data carries the batch; NumPy oracle."""
    w = RNG.standard_normal((3, 8)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "Wk"),
             numpy_helper.from_array(np.array([2, 2, 1, 4], np.int64), "kv_shape"),
             numpy_helper.from_array(np.array([2, 2, 2, 4], np.int64), "repeat_shape"),
             numpy_helper.from_array(np.array([2, -1], np.int64), "flat")]
    nodes = [helper.make_node("MatMul", ["x", "Wk"], ["k"]),
             helper.make_node("Reshape", ["k", "kv_shape"], ["kv"]),
             helper.make_node("Expand", ["kv", "repeat_shape"], ["rep"], name="repeat_kv"),
             helper.make_node("Reshape", ["rep", "flat"], ["y"])]
    graph = helper.make_graph(nodes, "gqa", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    want = np.broadcast_to((x @ w).reshape(5, 2, 1, 4), (5, 2, 2, 4)).reshape(5, 16)
    sym = at.onnx.load(model, batch_size=5)
    np.testing.assert_allclose(at.backend.run(sym, inputs={"x": x}).outputs[0], want, rtol=1e-5, atol=1e-5)
