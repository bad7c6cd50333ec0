"""The resampling and index ops' ONNX converters (frontend/onnx_ops_resample.py) against
independent oracles: the onnx wheel's node backend tests (the spec's reference outputs) for
ConvTranspose, Resize, Upsample, ArgMax, ArgMin and ScatterND, and onnxruntime on small
onnx.helper graphs; then U-Net / DCGAN-like graphs that use them train on k devices under
random plans equal to one device."""
import importlib
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import autotile as at  # noqa: E402
from autotile.errors import Error  # noqa: E402

FAMILIES = ("convtranspose", "resize", "upsample", "argmax", "argmin", "scatternd")

# Cases whose semantics autotile does not reproduce: the importer must refuse them with Error.
UNSUPPORTED = {
    "cubic": "mode cubic is not supported",
    "tf_crop_and_resize": "coordinate transformation tf_crop_and_resize is not supported",
    "half_pixel_symmetric": "coordinate transformation half_pixel_symmetric is not supported",
    "antialias": "antialiased downsampling is not supported",
}


def _cases():
    import onnx.backend.test.case.node as node

    state = np.random.get_state()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for family in FAMILIES:
            importlib.import_module(f"onnx.backend.test.case.node.{family}")
    np.random.set_state(state)
    ops = {"ConvTranspose", "Resize", "Upsample", "ArgMax", "ArgMin", "ScatterND"}
    return {c.name: c for c in node._NodeTestCases if {n.op_type for n in c.model.graph.node} <= ops}


CASES = _cases()


def _feeds(case):
    """The case's model with integer inputs (indices, sizes) and scalars as initializers."""
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    inputs, outputs = case.data_sets[0]
    feeds = {}
    for vi, value in zip(list(model.graph.input), inputs):
        value = np.asarray(value)
        if value.dtype.kind in "iub" or value.ndim == 0 or vi.name in ("roi", "scales", "sizes"):
            model.graph.initializer.append(numpy_helper.from_array(value, vi.name))
            model.graph.input.remove(vi)
        else:
            feeds[vi.name] = value
    return model, feeds, [np.asarray(o) for o in outputs]


def test_node_cases_found():
    assert len(CASES) >= 40, sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_onnx_node_backend(name):
    case = CASES[name]
    model, feeds, want = _feeds(case)
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
