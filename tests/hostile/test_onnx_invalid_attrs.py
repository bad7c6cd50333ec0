"""ONNX nodes the spec makes invalid (or onnxruntime refuses) are refused by the importer with
an autotile.Error naming the node and the attribute at fault, instead of computing something
(issue 31: a Split of sizes (2, 2) on an axis of 5 returned two halves and dropped the last row;
a ConvTranspose whose output_padding equals its stride computed a longer output).

Oracle: onnxruntime refuses every model here (checked in each test), and the ONNX spec's text
for the attribute (quoted in the case's comment)."""
import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import os  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "frontend"))

from onnx import helper  # noqa: E402

import autotile as at  # noqa: E402
from hostile_util import raises_naming  # noqa: E402
from onnx_models import assert_matches_ort, make_model, run_ort  # noqa: E402

RNG = np.random.default_rng(31)
mk = helper.make_node


def _i(*v):
    return np.array(v, np.int64)


def _w(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _feeds(inputs):
    return {k: RNG.standard_normal(s).astype(np.float32) for k, s in inputs.items()}


# (id, nodes, data inputs, outputs, initializers, opset, words the Error must contain)
CASES = [
    # Split: "Sum of the values must be equal to the dim value at 'axis' specified."
    ("split-sum-short", [mk("Split", ["x", "s"], ["a", "b"], axis=0, name="sp")], {"x": (5, 3)}, ["a", "b"],
     {"s": _i(2, 2)}, 13, ["sp", "split", "(2, 2)", "5"]),
    ("split-sum-long", [mk("Split", ["x", "s"], ["a", "b"], axis=0, name="sp")], {"x": (5, 3)}, ["a", "b"],
     {"s": _i(3, 3)}, 13, ["sp", "split", "5"]),
    ("split-attr-sum-short", [mk("Split", ["x"], ["a", "b"], axis=1, split=[1, 1], name="sp")], {"x": (2, 3)},
     ["a", "b"], None, 11, ["sp", "split", "3"]),
    # "Values should be >= 0."
    ("split-negative", [mk("Split", ["x", "s"], ["a", "b"], axis=0, name="sp")], {"x": (5, 3)}, ["a", "b"],
     {"s": _i(6, -1)}, 13, ["sp", "split", "-1"]),
    # before opset 18, no split means equal parts: the axis must divide evenly
    ("split-uneven", [mk("Split", ["x"], ["a", "b"], axis=0, name="sp")], {"x": (5, 3)}, ["a", "b"], None, 13,
     ["sp", "5", "2 outputs"]),
    # opset 18: "Either input 'split' or the attribute 'num_outputs' should be specified, but not both."
    ("split18-both", [mk("Split", ["x", "s"], ["a", "b"], axis=0, num_outputs=2, name="sp")], {"x": (5, 3)},
     ["a", "b"], {"s": _i(2, 3)}, 18, ["sp", "split", "num_outputs"]),
    ("split18-neither", [mk("Split", ["x"], ["a", "b"], axis=0, name="sp")], {"x": (6, 3)}, ["a", "b"], None, 18,
     ["sp", "split", "num_outputs"]),
    ("split18-num-outputs-count", [mk("Split", ["x"], ["a", "b"], axis=0, num_outputs=3, name="sp")], {"x": (6, 3)},
     ["a", "b"], None, 18, ["sp", "num_outputs", "3", "2 outputs"]),
    # 5 in chunks of ceil(5/4) = 2: 2, 2, 1 and nothing left for a fourth
    ("split18-num-outputs-too-many", [mk("Split", ["x"], ["a", "b", "c", "d"], axis=0, num_outputs=4, name="sp")],
     {"x": (5, 3)}, ["a", "b", "c", "d"], None, 18, ["sp", "num_outputs", "4", "5"]),
    # ConvTranspose: "Each padding value in output_padding must be less than the corresponding
    # stride/dilation dimension" (onnxruntime: less than max(stride, dilation), and the output
    # must be one a convolution of the same geometry reads back, which needs less than the stride)
    ("convT-outpad-eq-stride", [mk("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], output_padding=[2, 2],
                                   name="up")], {"x": (1, 2, 4, 4)}, ["y"], {"w": _w(2, 3, 3, 3)}, 13,
     ["up", "output_padding", "stride", "[2, 2]"]),
    ("convT-outpad-stride1", [mk("ConvTranspose", ["x", "w"], ["y"], output_padding=[1, 0], name="up")],
     {"x": (1, 2, 4, 4)}, ["y"], {"w": _w(2, 3, 3, 3)}, 13, ["up", "output_padding", "stride"]),
    ("convT-outpad-under-dilation", [mk("ConvTranspose", ["x", "w"], ["y"], dilations=[2, 2], output_padding=[1, 1],
                                        name="up")], {"x": (1, 2, 5, 5)}, ["y"], {"w": _w(2, 3, 3, 3)}, 13,
     ["up", "output_padding", "stride"]),
    ("convT-outpad-negative", [mk("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], output_padding=[-1, 0],
                                  name="up")], {"x": (1, 2, 5, 5)}, ["y"], {"w": _w(2, 3, 3, 3)}, 13,
     ["up", "output_padding", "-1"]),
    ("convT-outpad-with-output-shape", [mk("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], output_padding=[2, 2],
                                           output_shape=[10, 10], name="up")], {"x": (1, 2, 5, 5)}, ["y"],
     {"w": _w(2, 3, 3, 3)}, 13, ["up", "output_padding", "stride"]),
    ("convT-stride-0", [mk("ConvTranspose", ["x", "w"], ["y"], strides=[0, 1], name="up")], {"x": (1, 2, 5, 5)},
     ["y"], {"w": _w(2, 3, 3, 3)}, 13, ["up", "strides", "[0, 1]", "positive"]),
    # neighbours of the same class
    # CumSum: "axis: A 0-D tensor"
    ("cumsum-two-axes", [mk("CumSum", ["x", "a"], ["y"], name="cs")], {"x": (4, 6)}, ["y"], {"a": _i(0, 1)}, 13,
     ["cs", "axis", "[0, 1]"]),
    ("slice-axis-twice", [mk("Slice", ["x", "s", "e", "a"], ["y"], name="sl")], {"x": (4, 6)}, ["y"],
     {"s": _i(0, 1), "e": _i(4, 3), "a": _i(1, 1)}, 13, ["sl", "axes", "1"]),
    ("slice-lengths", [mk("Slice", ["x", "s", "e", "a"], ["y"], name="sl")], {"x": (4, 6)}, ["y"],
     {"s": _i(0, 1), "e": _i(4), "a": _i(1)}, 13, ["sl", "starts", "ends"]),
    ("slice-steps-length", [mk("Slice", ["x", "s", "e", "a", "st"], ["y"], name="sl")], {"x": (4, 6)}, ["y"],
     {"s": _i(0), "e": _i(4), "a": _i(1), "st": _i(1, 1)}, 13, ["sl", "steps"]),
    ("unsqueeze-axis-twice", [mk("Unsqueeze", ["x", "a"], ["y"], name="us")], {"x": (4, 6)}, ["y"],
     {"a": _i(0, -4)}, 13, ["us", "axes", "0"]),
    ("tile-repeats-length", [mk("Tile", ["x", "r"], ["y"], name="tl")], {"x": (4, 6)}, ["y"], {"r": _i(2)}, 13,
     ["tl", "repeats", "rank 2"]),
    ("flatten-axis", [mk("Flatten", ["x"], ["y"], axis=3, name="fl")], {"x": (4, 6)}, ["y"], None, 13,
     ["fl", "axis 3", "rank 2"]),
    ("maxpool-pad-ge-kernel", [mk("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], pads=[2, 0, 0, 0], name="mp")],
     {"x": (1, 2, 5, 5)}, ["y"], None, 13, ["mp", "pads", "kernel_shape"]),
    ("avgpool-pad-ge-kernel", [mk("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 3, 1], name="ap")],
     {"x": (1, 2, 5, 5)}, ["y"], None, 13, ["ap", "pads", "kernel_shape"]),
    ("gather-elements-const-index", [mk("GatherElements", ["x", "i"], ["y"], axis=1, name="ge")], {"x": (4, 6)},
     ["y"], {"i": np.full((4, 2), 6, np.int64)}, 13, ["ge", "index 6", "axis 1", "6"]),
    ("gather-nd-const-index", [mk("GatherND", ["x", "i"], ["y"], name="gn")], {"x": (4, 6)}, ["y"],
     {"i": _i(4, 0).reshape(1, 2)}, 13, ["gn", "index 4", "4"]),
    ("scatter-nd-const-index", [mk("ScatterND", ["x", "i", "u"], ["y"], name="sn")], {"x": (4, 6)}, ["y"],
     {"i": _i(4).reshape(1, 1), "u": _w(1, 6)}, 13, ["sn", "index 4", "4"]),
    # TopK: "K: A 1-D tensor containing a single positive value" (was a raw IndexError for an
    # empty K, and a K of two values took the first)
    ("topk-k-empty", [mk("TopK", ["x", "k"], ["v", "i"], axis=1, name="tk")], {"x": (4, 6)}, ["v", "i"],
     {"k": _i()}, 13, ["tk", "K []", "one value"]),
    ("topk-k-two-values", [mk("TopK", ["x", "k"], ["v", "i"], axis=1, name="tk")], {"x": (4, 6)}, ["v", "i"],
     {"k": _i(2, 3)}, 13, ["tk", "K [2, 3]", "one value"]),
]


@pytest.mark.parametrize("nodes,inputs,outputs,inits,opset,words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_node_is_refused_naming_node_and_attribute(nodes, inputs, outputs, inits, opset, words):
    model = make_model(nodes, inputs, outputs, inits, opset=opset)
    with pytest.raises(Exception):  # the oracle: onnxruntime refuses the same model
        run_ort(model, _feeds(inputs))
    raises_naming(lambda: at.onnx.load(model), *words)


# Valid neighbours of the refused cases still compute what onnxruntime computes.
VALID = [
    ("split18-uneven-num-outputs", [mk("Split", ["x"], ["a", "b"], axis=0, num_outputs=2)], {"x": (5, 3)},
     ["a", "b"], None, 18),
    ("split-sizes", [mk("Split", ["x", "s"], ["a", "b"], axis=1)], {"x": (2, 5)}, ["a", "b"], {"s": _i(2, 3)}, 13),
    ("convT-outpad-under-stride", [mk("ConvTranspose", ["x", "w"], ["y"], strides=[3, 2], output_padding=[2, 1])],
     {"x": (1, 2, 4, 4)}, ["y"], {"w": _w(2, 3, 3, 3)}, 13),
    ("maxpool-pad-under-kernel", [mk("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], pads=[2, 1, 2, 0])],
     {"x": (1, 2, 5, 5)}, ["y"], None, 13),
    ("unsqueeze-two-axes", [mk("Unsqueeze", ["x", "a"], ["y"])], {"x": (4, 6)}, ["y"], {"a": _i(0, -1)}, 13),
    ("flatten-axis-rank", [mk("Flatten", ["x"], ["y"], axis=2)], {"x": (4, 6)}, ["y"], None, 13),
]


@pytest.mark.parametrize("nodes,inputs,outputs,inits,opset", [c[1:] for c in VALID], ids=[c[0] for c in VALID])
def test_valid_neighbours_match_onnxruntime(nodes, inputs, outputs, inits, opset):
    assert_matches_ort(make_model(nodes, inputs, outputs, inits, opset=opset), _feeds(inputs))
