"""An ONNX data input with a 0-sized dimension (issue 31, "Also"): planned at a batch, it was
taken as an unknown dimension ("the shape of input 'x' is unknown: pass shapes="); now the
import at a batch or with shapes names the input and the dimension. Without them the model
still imports (a 1-device run of ONNX's empty-set reductions takes the fed array's shape)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import autotile as at  # noqa: E402
from autotile.errors import Error  # noqa: E402


def _relu_model(shape):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("shape, dim", [([4, 0, 3], 1), ([4, 5, 0], 2)])
def test_plan_of_an_input_with_a_zero_sized_dimension_names_it(tmp_path, shape, dim):
    path = tmp_path / "zero.onnx"
    onnx.save(_relu_model(shape), str(path))
    with pytest.raises(Error, match=rf"input 'x' has dimension {dim} of size 0"):
        at.plan(str(path), devices=2, batch=4)
    with pytest.raises(Error, match=rf"input 'x' has dimension {dim} of size 0"):
        at.onnx.load(str(path), batch_size=4)


def test_a_zero_batch_that_batch_replaces_plans():
    sym = at.onnx.load(_relu_model([0, 5]), batch_size=4)
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    np.testing.assert_allclose(at.backend.run(sym, inputs={"x": x}).outputs[0], np.maximum(x, 0))
    assert at.plan(sym, devices=2).devices == 2
