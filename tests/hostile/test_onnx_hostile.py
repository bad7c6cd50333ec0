"""Malformed and hostile ONNX files: each is refused with autotile.Error naming the node,
tensor, input or file at fault, without allocating what the file asks for (issue #18)."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import autotile as at  # noqa: E402
from autotile.errors import Error  # noqa: E402


def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


# ----------------------------------------------------------------------------- validity

def test_two_nodes_writing_one_tensor():
    m = _model([helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Sigmoid", ["x"], ["y"], name="b")],
               [_vi("x", [2, 3])], [_vi("y", [2, 3])])
    with pytest.raises(Error, match=r"'y' is written by two nodes, 'a' \(Relu\) and 'b' \(Sigmoid\)"):
        at.onnx.load(m)


def test_graph_input_declared_twice_with_different_shapes():
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2, 3]), _vi("x", [4, 5])], [_vi("y", [2, 3])])
    with pytest.raises(Error, match=r"input 'x' is declared twice"):
        at.onnx.load(m)


def test_node_with_more_inputs_than_its_op_takes():
    m = _model([helper.make_node("Relu", ["x", "x"], ["y"], name="r")], [_vi("x", [2, 3])], [_vi("y", [2, 3])])
    with pytest.raises(Error, match=r"node 'r' \(Relu\) has 2 inputs .* at most 1 inputs"):
        at.onnx.load(m)


def test_node_writing_a_graph_input():
    m = _model([helper.make_node("Relu", ["x"], ["x"], name="r")], [_vi("x", [2, 3])], [_vi("x", [2, 3])])
    with pytest.raises(Error, match=r"node 'r' \(Relu\) writes 'x', which is also a graph input"):
        at.onnx.load(m)


# ----------------------------------------------------------------------------- folding bounds

def test_constant_of_shape_asking_for_terabytes_is_refused_without_allocating():
    shape = numpy_helper.from_array(np.array([1 << 20, 1 << 20, 1 << 10], np.int64), "shape")  # 4 TiB of float32
    m = _model([helper.make_node("ConstantOfShape", ["shape"], ["big"], name="cos"),
                helper.make_node("Add", ["x", "big"], ["y"])],
               [_vi("x", [1])], [_vi("y", None)], [shape])
    assert len(m.SerializeToString()) < 400
    with pytest.raises(Error, match=r"'cos' \(ConstantOfShape\).*larger than"):
        at.onnx.load(m)


@pytest.mark.parametrize("case", ["negative_shape", "gather_out_of_range", "reshape_wrong_size", "cast_unknown"])
def test_fold_failures_name_the_node(case):
    c = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "c")
    if case == "negative_shape":
        inits = [numpy_helper.from_array(np.array([2, -3], np.int64), "s")]
        node = helper.make_node("ConstantOfShape", ["s"], ["k"], name="bad")
    elif case == "gather_out_of_range":
        inits = [c, numpy_helper.from_array(np.array([5], np.int64), "i")]
        node = helper.make_node("Gather", ["c", "i"], ["k"], name="bad")
    elif case == "reshape_wrong_size":
        inits = [c, numpy_helper.from_array(np.array([4, 2], np.int64), "s")]
        node = helper.make_node("Reshape", ["c", "s"], ["k"], name="bad")
    else:
        inits = [c]
        node = helper.make_node("Cast", ["c"], ["k"], name="bad", to=999)
    # the constant is consumed by an op on data, so the folded value is needed
    m = _model([node, helper.make_node("Add", ["x", "k"], ["y"])], [_vi("x", [1])], [_vi("y", None)], inits)
    with pytest.raises(Error, match=r"node 'bad'"):
        at.onnx.load(m)


# ----------------------------------------------------------------------------- shapes

def test_dynamic_batch_without_batch_names_the_input_and_with_batch_plans():
    """A torch export with dynamic_axes (batch 'N'): planning without a batch says to pass it."""
    inits = [numpy_helper.from_array(np.ones((4, 12), np.float32), "w"),
             numpy_helper.from_array(np.array([-1, 12], np.int64), "s")]
    nodes = [helper.make_node("Reshape", ["x", "s"], ["f"]), helper.make_node("Gemm", ["f", "w"], ["y"], transB=1)]
    m = _model(nodes, [_vi("x", ["N", 3, 4])], [_vi("y", ["N", 4])], inits)
    sym = at.onnx.load(m)
    with pytest.raises(Error, match=r"'x'.*(batch|shapes)"):
        at.plan(sym, devices=2)
    plan = at.plan(at.onnx.load(m, batch_size=8), devices=2)
    assert plan.devices == 2


def test_unbound_symbolic_dim_error_names_input_and_dim():
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("ConstantOfShape", ["s"], ["z"], name="zeros"),
             helper.make_node("Add", ["x", "z"], ["y"])]
    m = _model(nodes, [_vi("x", ["batch", "sequence"])], [_vi("y", ["batch", "sequence"])])
    with pytest.raises(Error, match=r"'x' \(batch, sequence\).*shapes="):
        at.onnx.load(m)
    with pytest.raises(Error, match=r"'x' \(4, sequence\)"):
        at.onnx.load(m, batch_size=4)
    sym = at.onnx.load(m, shapes={"x": (4, 7)})
    x = np.random.default_rng(0).standard_normal((4, 7)).astype(np.float32)
    np.testing.assert_allclose(at.backend.run(sym, inputs={"x": x}).outputs[0], x)


def test_converter_needing_a_constant_with_an_unbound_dim_names_node_and_input():
    """Expand's target shape computed from the input's Shape (what the dynamo exporter writes for
    BERT's mask with a dynamic batch): without the batch size it was an internal NotFoldable
    from the converter; now an Error naming the node and how to bind the dimension."""
    inits = [numpy_helper.from_array(np.ones((1, 4), np.float32), "w")]
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Expand", ["w", "s"], ["e"], name="grow"),
             helper.make_node("Add", ["x", "e"], ["y"])]
    m = _model(nodes, [_vi("x", ["batch", 4])], [_vi("y", ["batch", 4])], inits)
    with pytest.raises(Error, match=r"node 'grow' \(Expand\).*unknown dimension 'batch'.*'x' \(batch, 4\).*batch_size="):
        at.onnx.load(m)
    sym = at.onnx.load(m, batch_size=3)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(at.backend.run(sym, inputs={sym.onnx_names["x"]: x}).outputs[0], x + 1)


def test_shapes_argument_errors_name_the_input():
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", ["batch", 3])], [_vi("y", ["batch", 3])])
    with pytest.raises(Error, match=r"shapes names 'nope'"):
        at.onnx.load(m, shapes={"nope": (2, 3)})
    with pytest.raises(Error, match=r"shapes\['x'\] .* rank 3"):
        at.onnx.load(m, shapes={"x": (2, 3, 4)})
    with pytest.raises(Error, match=r"shapes\['x'\] must be a tuple of positive integers"):
        at.onnx.load(m, shapes={"x": (2.5, 3)})
    with pytest.raises(Error, match=r"dimension 1 is 3 in the model"):
        at.onnx.load(m, shapes={"x": (2, 5)})


def test_missing_external_data_file_is_named(tmp_path):
    w = numpy_helper.from_array(np.ones((64, 64), np.float32), "w")
    m = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [_vi("x", [2, 64])], [_vi("y", [2, 64])], [w])
    path = tmp_path / "m.onnx"
    onnx.save_model(m, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location="weights.bin",
                    size_threshold=0)
    (tmp_path / "weights.bin").unlink()
    with pytest.raises(Error, match=r"m\.onnx.*external weight data.*weights\.bin"):
        at.onnx.load(str(path))
