"""Constants that only select branches are not weights (issue 31, section 2).

Swin V2's dynamo export builds its shifted-window attention mask from float labels: written
into a label map (ScatterND), unfolded into windows, differenced (Sub), compared with Equal
and used as a Where's condition. Those labels reach the output only through the comparison:
their gradient is zero, and a weight update (weight decay, any perturbation) would break the
mask. The trainable-initializer rule made them weights because ScatterND and Sub were not
among the ops it followed; now a constant is a weight only when a differentiable path leads
from it to an output.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import autotile as at  # noqa: E402
from autotile.autodiff.graph import constant_names  # noqa: E402

RNG = np.random.default_rng(7)


def _swin_mask_model():
    """scores = x . W + mask, where mask = Where(Equal(labels[i] - labels[j], 0), 0, -100) and
    labels = ScatterND(zeros, region indices, region labels)."""
    inits = {
        "W": RNG.standard_normal((4, 4)).astype(np.float32),
        "label_map0": np.zeros(4, np.float32),
        "region_idx": np.array([[0], [1], [2], [3]], np.int64),
        "region_labels": np.array([0.0, 1.0, 1.0, 2.0], np.float32),  # non-uniform: not a fill value
        "zero": np.zeros(1, np.float32),
        "neg": np.full(1, -100.0, np.float32),
        "ax0": np.array([0], np.int64), "ax1": np.array([1], np.int64),
    }
    nodes = [
        helper.make_node("ScatterND", ["label_map0", "region_idx", "region_labels"], ["label_map"]),
        helper.make_node("Unsqueeze", ["label_map", "ax0"], ["row"]),
        helper.make_node("Unsqueeze", ["label_map", "ax1"], ["col"]),
        helper.make_node("Sub", ["row", "col"], ["diff"]),
        helper.make_node("Equal", ["diff", "zero"], ["same"]),
        helper.make_node("Where", ["same", "zero", "neg"], ["mask"]),
        helper.make_node("MatMul", ["x", "W"], ["s"]),
        helper.make_node("Add", ["s", "mask"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["y"], axis=-1),
    ]
    graph = helper.make_graph(nodes, "swin_mask", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), inits


def _weights(sym):
    """ONNX names of the float tensors autotile trains (parameters not marked constant)."""
    const = set(constant_names(sym))
    onnx_of = {}
    for k, v in sym.onnx_names.items():
        onnx_of.setdefault(v, k)
    return {onnx_of.get(a, a) for a in sym.list_arguments() if a in sym.params and a not in const
            and np.asarray(sym.params[a]).dtype.kind == "f"}


def test_labels_reaching_the_output_only_through_a_comparison_are_constants():
    model, inits = _swin_mask_model()
    sym = at.onnx.load(model)
    assert _weights(sym) == {"W"} or _weights(sym) == {"W_T"}, _weights(sym)
    # the import computes what onnxruntime computes
    ort = pytest.importorskip("onnxruntime")
    x = RNG.standard_normal((4, 4)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    res = at.backend.run(sym, inputs={"x": x}, train=True)
    np.testing.assert_allclose(res.outputs[0], want, rtol=1e-5, atol=1e-6)
    assert all("label" not in k for k in res.grads), sorted(res.grads)


def test_a_label_that_also_reaches_the_output_through_arithmetic_is_a_weight():
    """The same labels also added to the scores: a differentiable path, so a weight."""
    model, _ = _swin_mask_model()
    g = model.graph
    g.node.append(helper.make_node("Add", ["y", "label_map"], ["y2"]))
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("y2", TensorProto.FLOAT, [4, 4]))
    sym = at.onnx.load(model)
    assert "region_labels" in _weights(sym), _weights(sym)
