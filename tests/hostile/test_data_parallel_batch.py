"""algorithm="data" splits the batch where the data inputs bind it (issue 31, section 2).

It used to take the most common dim 0 of the graph's non-weight tensors for the batch: on a
sequence-first model (XLNet transposes its (batch, seq) inputs to (seq, batch)) that is the
sequence, which it split and still called data parallelism. Now the batch is dim 0 of each
data input (or the dim the input declares, ``batch_dim=``) and is carried through the graph by
the ops' strategies; a graph whose batch no op can split is refused, naming the input and op.
Oracle: the same training step on one device (float64, so nothing but the plan can differ)."""
import numpy as np
import pytest

import autotile as at
from autotile.backend.multi_device import run_multi_device
from autotile.models._layers import op
from autotile.symbol.symbol import Variable

from hostile_util import raises_naming

B, S, D, H, C = 4, 6, 5, 8, 3


def _head(h, batch=B):
    """(seq, batch, C) logits -> (batch*seq, C) rows -> SoftmaxOutput over (batch*seq,) labels."""
    y = op("transpose", h, axes=(1, 0, 2), name="to_batch_first")
    y = op("Reshape", y, shape=(-1, C), name="rows")
    return op("SoftmaxOutput", y, Variable("softmax_label", shape=(batch * S,), batch_dim="none"), name="softmax")


def _body(x):
    """Sequence-first layers: (seq, batch, D) -> (seq, batch, C)."""
    h = op("FullyConnected", x, num_hidden=H, flatten=False, name="fc1")
    h = op("Activation", h, act_type="tanh", name="act")
    return op("FullyConnected", h, num_hidden=C, flatten=False, name="fc2")


def xlnet_like():
    """Inputs (batch, seq, D), transposed to sequence-first as XLNet does."""
    data = Variable("data", shape=(B, S, D))
    return _head(_body(op("transpose", data, axes=(1, 0, 2), name="to_seq_first")))


def declared_seq_first(batch=B):
    """An input stored (seq, batch, D) that says where its batch is."""
    return _head(_body(Variable("data", shape=(S, batch, D), batch_dim=1)), batch)


def _values(sym, seed=0):
    rng = np.random.default_rng(seed)
    args, _, _ = sym.infer_shape()
    vals = {}
    for name, shape in zip(sym.list_arguments(), args):
        if name.endswith("label"):
            vals[name] = rng.integers(0, C, size=shape).astype(np.float64)
        else:
            vals[name] = rng.standard_normal(shape)
    return vals


def _cuts(plan):
    return len(plan.factors)


@pytest.mark.parametrize("build,dim", [(xlnet_like, 0), (declared_seq_first, 1)])
def test_sequence_first_model_splits_the_batch_not_the_sequence(build, dim):
    sym = build()
    shapes = {k: v.shape for k, v in _values(sym).items() if k in ("data", "softmax_label")}
    plan = at.plan(sym, devices=2, shapes=shapes, algorithm="data")
    assert plan.tensor_tilings["data"] == [f"split({dim})"]
    # every sequence-first activation is split along its batch (dim 1), never the sequence
    for name in ("fc1_output", "act_output", "fc2_output"):
        assert plan.tensor_shapes[name][:2] == (S, B)
        assert plan.tensor_tilings[name] == ["split(1)"], (name, plan.tensor_tilings[name])
    assert plan.tensor_tilings["to_batch_first_output"] == ["split(0)"]
    # (only a weight update may run whole: the bias of 3 classes does not split 2 ways)
    assert all(n.endswith("_update") for n in plan.replicated_nodes()), plan.replicated_nodes()


@pytest.mark.parametrize("devices", [2, 4])
@pytest.mark.parametrize("build", [xlnet_like, declared_seq_first])
def test_sequence_first_data_parallel_step_equals_one_device(build, devices):
    sym = build()
    vals = _values(sym)
    ref = run_multi_device(sym, 1, vals)
    plan = at.plan(sym, devices=devices, shapes={k: vals[k].shape for k in ("data", "softmax_label")},
                   algorithm="data")
    assert all(t == "split(1)" for t in plan.tensor_tilings["fc1_output"])
    res = run_multi_device(sym, devices, vals, plan=plan)
    for got, want in zip(res.outputs, ref.outputs):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    for name, want in ref.grads.items():
        np.testing.assert_allclose(res.grads[name], want, rtol=1e-12, atol=1e-12, err_msg=name)
        np.testing.assert_allclose(res.params[name], ref.params[name], rtol=1e-12, atol=1e-12, err_msg=name)


def test_plan_batch_sets_the_declared_batch_dim():
    plan = at.plan(declared_seq_first(8), devices=2, batch=8, algorithm="data")
    assert plan.input_shapes["data"] == (S, 8, D)
    assert plan.tensor_tilings["data"] == ["split(1)"]


def test_onnx_sequence_first_model_splits_the_batch(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((D, H)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2], name="to_seq_first"),
         helper.make_node("MatMul", ["xt", "w"], ["h"], name="proj"),
         helper.make_node("Tanh", ["h"], ["y"], name="act")],
        "seq_first", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", S, D])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [S, "batch", H])], initializer=[w])
    path = tmp_path / "seq_first.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    sym = at.onnx.load(str(path), batch_size=B)
    plan = at.plan(sym, devices=2, algorithm="data")
    h = next(n for n in plan.tensor_shapes if plan.tensor_shapes[n] == (S, B, H) and "grad" not in n)
    assert plan.tensor_tilings[h] == ["split(1)"], (h, plan.tensor_tilings)
    assert plan.tensor_tilings["x"] == ["split(0)"]


def test_graph_whose_batch_no_op_can_split_is_refused():
    # Concat along the batch: the rows of one device's half of `data` are not one slab of the
    # result, so no strategy splits `data` along its batch; splitting the concatenated rows
    # instead is not data parallelism.
    data = Variable("data", shape=(B, D))
    both = op("Concat", data, data, dim=0, name="stack")
    fc = op("FullyConnected", both, num_hidden=C, name="fc")
    sym = op("SoftmaxOutput", fc, Variable("softmax_label", shape=(2 * B,)), name="softmax")
    shapes = {"data": (B, D), "softmax_label": (2 * B,)}
    raises_naming(lambda: at.plan(sym, devices=2, shapes=shapes, algorithm="data"),
                  "data parallelism cannot split the batch", "'data'", "stack", "Concat")
    at.plan(sym, devices=2, shapes=shapes, algorithm="tofu")  # other algorithms still plan it
    at.plan(sym, devices=1, shapes=shapes, algorithm="data")  # and one device needs no split


def test_declared_batch_dim_out_of_range_is_refused():
    sym = _head(_body(Variable("data", shape=(S, B, D), batch_dim=3)))
    raises_naming(lambda: at.plan(sym, devices=2, algorithm="data"), "data", "batch dim 3")


def test_unrolled_rnn_head_after_its_step_major_concat_is_computed_whole():
    # The RNN's Concat puts its timesteps in step-major rows: after it the batch is no slab of
    # any dim. The old pick split those rows (4 devices: 5 timesteps each) and called it data
    # parallelism; now what follows the Concat runs replicated, and the plan names it.
    plan = at.plan("rnn-2-64", devices=4, batch=8, algorithm="data")
    assert plan.tensor_tilings["data"] == ["split(1)", "split(1)"]
    assert set(plan.replicated_nodes()) == {"concat", "pred", "softmax", "concat_backward0", "pred_backward0",
                                            "softmax_backward0"}
    assert plan.tensor_tilings["pred_output"] == ["replicate", "replicate"]


def test_a_stuck_op_whose_output_keeps_the_batch_passes_it_on(tmp_path):
    # A fused BatchNorm reads every row of its batch for the statistics, so no strategy splits
    # it along the batch and it runs whole; its output is still its input's rows, so what
    # follows splits the batch rather than being computed whole from there on (as after the
    # RNN's Concat).
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(np.ones(4, np.float32), "gamma"),
             numpy_helper.from_array(np.zeros(4, np.float32), "beta"),
             numpy_helper.from_array(np.zeros(4, np.float32), "mean"),
             numpy_helper.from_array(np.ones(4, np.float32), "var")]
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
         helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["b"], name="bn"),
         helper.make_node("Relu", ["b"], ["r"], name="relu"),
         helper.make_node("GlobalAveragePool", ["r"], ["y"], name="pool")],
        "bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, 1, 1])], initializer=inits)
    path = tmp_path / "bn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)]), str(path))
    sym = at.onnx.load(str(path), batch_size=B)
    plan = at.plan(sym, devices=2, algorithm="data")
    relu = next(n for n, op in plan.node_ops.items() if op == "Activation")
    out = next(n for n in plan.tensor_tilings if n.startswith(relu) and plan.tensor_shapes[n] == (B, 4, 8, 8))
    assert plan.tensor_tilings[out] == ["split(0)"]
    replicated = {plan.node_ops[n] for n in plan.replicated_nodes()}
    assert "BatchNorm" in replicated and replicated <= {"BatchNorm", "_backward_BatchNorm", "sgd_update"}, replicated


def test_torch_multihead_attention_export_splits_its_batch():
    # nn.MultiheadAttention runs sequence-first inside ((batch, L, E) -> (L, batch, E)); the old
    # pick split its input along L. Its (L*batch, E) out-projection holds the batch in no dim:
    # it runs whole. Oracle: the 1-device step, float64.
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "onnx_torch",
                        "mha_ts17.onnx")
    if not os.path.exists(path):
        pytest.skip("fixture mha_ts17 not present")
    npz = np.load(path[:-5] + ".npz")
    x = npz["in.input"].astype(np.float64)
    sym = at.onnx.load(path, batch_size=x.shape[0])
    plan = at.plan(sym, devices=2, algorithm="data")
    assert plan.tensor_tilings["input"] == ["split(0)"]
    params = {k: np.asarray(v, np.float64) for k, v in sym.params.items()}
    ref = at.backend.run(sym, inputs={"input": x}, params=params, train=True)
    res = at.backend.run(sym, devices=2, inputs={"input": x}, params=params, train=True, plan=plan)
    for name, want in ref.grads.items():
        np.testing.assert_allclose(res.grads[name], want, rtol=1e-9, atol=1e-12, err_msg=name)
