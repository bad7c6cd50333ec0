"""ONNX Pad with negative pads (cropping; the TorchScript export of F.pad with negative widths):
constant-mode crops equal onnxruntime, alone and mixed with padding on the other side or axis,
and train on 2 devices as on 1; a crop that removes a whole axis (onnxruntime refuses it) and a
negative pad in reflect or edge mode are errors naming the node and the pads (issue 31: the
class of spec checks around Pad)."""
import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("autotile._core")

from onnx import helper  # noqa: E402

import autotile as at  # noqa: E402
from autotile.errors import Error  # noqa: E402
from k_device_arbiter import assert_same_float64_step  # noqa: E402
from onnx_models import assert_matches_ort, make_model, run_ort  # noqa: E402

RNG = np.random.default_rng(31)


def _pad_model(pads, mode="constant", axes=None, shape=(3, 7, 5)):
    inputs = ["x", "pads", "value"] + (["axes"] if axes is not None else [])
    inits = {"pads": np.array(pads, np.int64), "value": np.array(1.5, np.float32)}
    if axes is not None:
        inits["axes"] = np.array(axes, np.int64)
    nodes = [helper.make_node("Pad", inputs, ["y"], mode=mode, name="crop")]
    return make_model(nodes, {"x": shape}, ["y"], inits, opset=18)


@pytest.mark.parametrize("pads,axes", [([0, -2, 0, 0, -1, 0], None), ([0, -2, 1, 0, 3, -2], None),
                                       ([-1, 2], [2]), ([-3, -3], [1])])
def test_negative_pads_crop_as_onnxruntime(pads, axes):
    assert_matches_ort(_pad_model(pads, axes=axes), {"x": RNG.standard_normal((3, 7, 5)).astype(np.float32)})


def test_a_cropping_model_trains_on_2_devices_as_on_1():
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Pad", ["h", "pads"], ["p"]),
             helper.make_node("Tanh", ["p"], ["y"])]
    model = make_model(nodes, {"x": (4, 6)}, ["y"], {"W": RNG.standard_normal((6, 8)).astype(np.float32),
                                                      "pads": np.array([0, -2, 0, 1], np.int64)})
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    assert_matches_ort(model, {"x": x})
    sym = at.onnx.load(model)
    params = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in sym.params.items()}
    inputs = {sym.onnx_names["x"]: x.astype(np.float64)}
    ref = at.backend.run(sym, inputs=inputs, params=params, train=True)
    res = at.backend.run(sym, devices=2, inputs=inputs, params=params, train=True)
    assert ref.grads
    assert_same_float64_step(ref, res)


@pytest.mark.parametrize("pads,mode,words", [([0, -8, 0, 0, 0, 0], "constant", ["crop", "pads", "axis 1", "7"]),
                                             ([0, -4, 0, 0, -3, 0], "constant", ["crop", "pads", "axis 1", "7"]),
                                             ([0, -1, 0, 0, 0, 0], "reflect", ["crop", "reflect", "negative"])])
def test_invalid_or_unsupported_crops_name_node_and_pads(pads, mode, words):
    """Cropping 8 of 7 is invalid (onnxruntime refuses it); 7 of 7 leaves an empty tensor
    (onnxruntime computes one; autotile does not compute empty tensors)."""
    model = _pad_model(pads, mode=mode)
    if -sum(pads[1::3]) > 7:  # the oracle: onnxruntime refuses a crop past the axis
        with pytest.raises(Exception):
            run_ort(model, {"x": RNG.standard_normal((3, 7, 5)).astype(np.float32)})
    with pytest.raises(Error) as e:
        at.onnx.load(model)
    for word in words:
        assert word in str(e.value), str(e.value)
