"""A float16 model (what ``torch.onnx.export`` writes for ``model.half()``) trains on k devices:
partial sums (the gradients' all-reduce, a split contraction) accumulate in float16 through
float, each add rounded as NumPy's float16 + (csrc/util/half.h). Oracles: the same step in
float32 on the float16 values (float16 rounding apart), and the 1-device float16 step."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import autotile as at  # noqa: E402


def half_mlp(dtype=np.float16):
    """x (8, 6) -> MatMul -> Add -> Tanh -> MatMul -> ReduceSum over features: every tensor float16."""
    rng = np.random.default_rng(0)
    inits = {"w1": rng.standard_normal((6, 16)) * 0.4, "b1": rng.standard_normal(16) * 0.1,
             "w2": rng.standard_normal((16, 4)) * 0.4}
    elem = TensorProto.FLOAT16 if dtype == np.float16 else TensorProto.FLOAT
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Tanh", ["hb"], ["t"]), helper.make_node("MatMul", ["t", "w2"], ["y"])]
    graph = helper.make_graph(nodes, "half_mlp", [helper.make_tensor_value_info("x", elem, [8, 6])],
                              [helper.make_tensor_value_info("y", elem, [8, 4])],
                              initializer=[numpy_helper.from_array(v.astype(np.float16).astype(dtype), k)
                                           for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _step(model, x, devices):
    sym = at.onnx.load(model)
    return sym, at.backend.run(sym, devices=devices, inputs={sym.onnx_names["x"]: x}, train=True)


@pytest.mark.parametrize("devices", [2, 4, 8])
def test_float16_training_step_on_k_devices(devices):
    x = np.random.default_rng(1).standard_normal((8, 6)).astype(np.float16)
    sym, one = _step(half_mlp(), x, 1)
    _, many = _step(half_mlp(), x, devices)
    _, wide = _step(half_mlp(np.float32), x.astype(np.float32), 1)
    assert set(many.grads) == set(one.grads) == set(wide.grads) and len(one.grads) == 3
    for p, g in one.grads.items():
        assert g.dtype == np.float16 and many.grads[p].dtype == np.float16, p
        scale = float(np.max(np.abs(wide.grads[p])))
        # float16 keeps 11 bits: both float16 steps sit within a few ulps of the float32 one
        np.testing.assert_allclose(g.astype(np.float32), wide.grads[p], atol=8e-3 * scale, err_msg=f"1 device: {p}")
        np.testing.assert_allclose(many.grads[p].astype(np.float32), wide.grads[p], atol=8e-3 * scale,
                                   err_msg=f"{devices} devices: {p}")
        assert many.params[p].dtype == np.float16
