"""An input with a 0-sized dimension is refused by at.plan (and a partitioned run, which plans)
with autotile.Error naming the input and the dimension (issue 31).

Before, a hand-built ``Variable("x", shape=(0, 5))`` reached the head-gradient shapes with no
shape and raised a raw KeyError in planner.with_head_grads; shapes= with a 0 got the core's
"add_tensor: ... non-positive dim", and a declared (4, 0) data input "the shape of input 'data'
is unknown", neither naming the dim. A 1-device run of an ONNX model with an empty input (the
empty-set reductions) does not plan and still runs.
"""
import numpy as np
import pytest

import autotile as at
from hostile_util import raises_naming


def _param_tanh():
    return at.sym.tanh(at.sym.Variable("x", shape=(0, 5)), name="t")


def _data_tanh():
    return at.sym.tanh(at.sym.Variable("data", shape=(4, 0)), name="t")


@pytest.mark.parametrize("kwargs", [{}, {"batch": 4}], ids=["no_batch", "batch"])
def test_plan_of_a_declared_zero_dim_names_the_input_and_dim(kwargs):
    # x is a parameter (not data): batch= does not size it, so the 0 stays
    raises_naming(lambda: at.plan(_param_tanh(), devices=2, **kwargs), "'x'", "dimension 0", "size 0")


def test_plan_of_a_zero_dim_behind_an_op_that_needs_it_names_the_input():
    w = at.sym.Variable("w", shape=(3, 5))
    fc = at.sym.FullyConnected(at.sym.Variable("x", shape=(0, 5)), w, num_hidden=3, no_bias=True, name="fc")
    raises_naming(lambda: at.plan(fc, devices=2), "'x'", "dimension 0")


def test_declared_zero_in_a_data_dim_is_named():
    raises_naming(lambda: at.plan(_data_tanh(), devices=2), "'data'", "dimension 1", "size 0")


def test_shapes_with_a_zero_dim_name_the_input_and_dim():
    raises_naming(lambda: at.plan(_data_tanh(), devices=2, shapes={"data": (4, 0)}), "'data'", "dimension 1")
    raises_naming(lambda: at.plan(_param_tanh(), devices=2, shapes={"x": (0, 5)}), "'x'", "dimension 0")


def test_partitioned_run_of_an_empty_input_names_it():
    x = np.zeros((0, 5), np.float32)
    raises_naming(lambda: at.backend.run(_param_tanh(), devices=2, inputs={"x": x}, train=True), "'x'", "dimension 0")
    d = np.zeros((4, 0), np.float32)
    raises_naming(lambda: at.backend.run(_data_tanh(), devices=2, inputs={"data": d}, train=True),
                  "'data'", "dimension 1")


def test_mxnet_unknown_batch_sized_by_batch_still_plans():
    """(0, 5) on a data input is MXNet's unknown batch: batch= sizes it, nothing is refused."""
    sym = at.sym.tanh(at.sym.Variable("data", shape=(0, 5)), name="t")
    assert at.plan(sym, devices=2, batch=4).comm_bytes >= 0


def _onnx_empty_model():
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    node = helper.make_node("ReduceSum", ["X"], ["Y"], keepdims=1)
    graph = helper.make_graph([node], "empty", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [0, 3])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 1])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), onnx


def test_onnx_empty_input_plans_to_an_error_and_runs_on_one_device():
    model, _ = _onnx_empty_model()
    sym = at.onnx.load(model)  # imports without batch_size/shapes, as the empty-set node tests do
    raises_naming(lambda: at.plan(sym, devices=2), "'X'", "dimension 0")
    out = at.backend.run(sym, inputs={"X": np.zeros((0, 3), np.float32)}, train=False).outputs[0]
    np.testing.assert_array_equal(out, np.zeros((1, 1), np.float32))
