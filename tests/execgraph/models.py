"""Small training graphs for execution tests: MLP, CNN, residual, concat-branch, LSTM."""
from __future__ import annotations

import numpy as np

import autotile as at

B = 24  # divisible by 2, 4, 6 and 8 devices


def mlp():
    x = at.sym.Variable("data")
    h = at.sym.FullyConnected(x, num_hidden=16, name="fc1")
    h = at.sym.Activation(h, act_type="relu", name="relu1")
    h = at.sym.FullyConnected(h, num_hidden=8, name="fc2")
    return at.sym.SoftmaxOutput(h, name="softmax"), {"data": (B, 12), "softmax_label": (B,)}, 8


def cnn():
    x = at.sym.Variable("data")
    h = at.sym.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=8, name="conv1")
    h = at.sym.Activation(h, act_type="relu", name="relu1")
    h = at.sym.Pooling(h, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool1")
    h = at.sym.Convolution(h, kernel=(3, 3), pad=(1, 1), num_filter=8, name="conv2")
    h = at.sym.Activation(h, act_type="tanh", name="tanh2")
    h = at.sym.Flatten(h, name="flat")
    h = at.sym.FullyConnected(h, num_hidden=4, name="fc")
    return at.sym.SoftmaxOutput(h, name="softmax"), {"data": (B, 4, 8, 8), "softmax_label": (B,)}, 4


def residual():
    x = at.sym.Variable("data")
    a = at.sym.FullyConnected(x, num_hidden=16, name="fc1")
    b = at.sym.Activation(a, act_type="tanh", name="act")
    b = at.sym.FullyConnected(b, num_hidden=16, name="fc2")
    h = at.sym.elemwise_add(a, b, name="add")  # fc1's output is used twice
    h = at.sym.FullyConnected(h, num_hidden=8, name="fc3")
    return at.sym.SoftmaxOutput(h, name="softmax"), {"data": (B, 12), "softmax_label": (B,)}, 8


def concat_branch():
    x = at.sym.Variable("data")
    a = at.sym.FullyConnected(x, num_hidden=8, name="left")
    b = at.sym.FullyConnected(x, num_hidden=16, name="right")
    h = at.sym.Concat(at.sym.Activation(a, act_type="relu", name="ra"),
                      at.sym.Activation(b, act_type="sigmoid", name="rb"), dim=1, name="cat")
    h = at.sym.FullyConnected(h, num_hidden=8, name="head")
    return at.sym.SoftmaxOutput(h, name="softmax"), {"data": (B, 12), "softmax_label": (B,)}, 8


def batchnorm():
    """Conv -> BatchNorm (learned gamma) -> relu -> conv -> BatchNorm -> FC: the moving
    statistics are auxiliary states a step updates (res.aux)."""
    x = at.sym.Variable("data")
    h = at.sym.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=8, name="conv1")
    h = at.sym.BatchNorm(h, fix_gamma=False, name="bn1")
    h = at.sym.Activation(h, act_type="relu", name="relu1")
    h = at.sym.Convolution(h, kernel=(3, 3), pad=(1, 1), num_filter=4, name="conv2")
    h = at.sym.BatchNorm(h, name="bn2")
    h = at.sym.FullyConnected(at.sym.Flatten(h, name="flat"), num_hidden=4, name="fc")
    return at.sym.SoftmaxOutput(h, name="softmax"), {"data": (B, 3, 6, 6), "softmax_label": (B,)}, 4


def lstm():
    sym = at.models.rnn(layers=1, hidden=8, steps=3, batch=B, vocab=16)
    shapes = {}
    for n in sym.topo_nodes():
        if n.is_variable and (n.name == "data" or n.name.endswith("label")):
            shapes[n.name] = tuple(int(v) for v in n.attrs["__shape__"].strip("()").split(",") if v.strip())
    return sym, shapes, 16


MODELS = {"mlp": mlp, "cnn": cnn, "residual": residual, "concat": concat_branch, "lstm": lstm, "bn": batchnorm}


def vals_names(sym):
    return set(sym.list_arguments())


def values(sym, shapes, classes, seed=0):
    """Random inputs and params (float32), labels in range, LSTM token ids in range."""
    rng = np.random.default_rng(seed)
    arg_shapes, _, aux_shapes = sym.infer_shape(**shapes)
    vals = {}
    for name, shape in zip(sym.list_arguments() + sym.list_auxiliary_states(), arg_shapes + aux_shapes):
        if name.endswith("label") or (name == "data" and "embed_weight" in vals_names(sym)):
            vals[name] = rng.integers(0, classes, size=shape).astype(np.float32)
        elif name.endswith("moving_var"):
            vals[name] = rng.uniform(0.5, 1.5, shape).astype(np.float32)
        else:
            vals[name] = (rng.standard_normal(shape) * 0.3).astype(np.float32)
    return vals


def reference_step(sym, shapes, vals):
    """The single-device training step: the oracle every multi-device run is compared with."""
    return at.backend.run(sym, inputs={k: vals[k] for k in shapes},
                          params={k: v for k, v in vals.items() if k not in shapes}, train=True)


def random_plan_case(name):
    """A test model of MODELS with its inputs and params, its lowered training graph (what
    random plans tile) and the single-device step: (sym, shapes, vals, lowered, ref)."""
    from random_plans import lowered_training_graph

    sym, shapes, classes = MODELS[name]()
    vals = values(sym, shapes, classes)
    return sym, shapes, vals, lowered_training_graph(sym, shapes), reference_step(sym, shapes, vals)


def assert_same_step(res, ref, what, rtol=1e-4, atol=1e-5):
    """Outputs, gradients, updated params, optimizer states and auxiliary states (BatchNorm
    moving statistics) of a partitioned step equal the oracle's, name for name. float32 sums
    in another order differ by a few ulps of the largest term, so the absolute tolerance
    grows with an array's largest magnitude (`atol` up to magnitude 1; float64 callers pass
    tighter `rtol`/`atol`)."""
    assert len(res.outputs) == len(ref.outputs), f"{what}: {len(res.outputs)} outputs, expected {len(ref.outputs)}"
    for got, want in zip(res.outputs, ref.outputs):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"{what}: output")
    for kind in ("grads", "params", "states", "aux"):
        got, want = getattr(res, kind), getattr(ref, kind)
        assert sorted(got) == sorted(want), f"{what}: {kind} {sorted(got)[:5]}, expected {sorted(want)[:5]}"
        for name in want:
            assert got[name].dtype == want[name].dtype, f"{what}: dtype of {kind} {name}"
            scaled = atol * max(1.0, float(np.max(np.abs(want[name]), initial=0.0)))
            np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=scaled, err_msg=f"{what}: {kind} {name}")


def onnx_light(name: str, batch: int):
    """A real model shipped in the onnx wheel (backend/test/data/light/`name`) at `batch`, with
    small random weights and data: (symbol, inputs, params). Skips when onnx or the file is missing."""
    import os

    import pytest

    onnx = pytest.importorskip("onnx")
    path = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", name)
    if not os.path.exists(path):
        pytest.skip(f"{path} is not in this onnx wheel")
    sym = at.onnx.load(path, batch_size=batch)
    rng = np.random.default_rng(0)
    params = {k: (rng.standard_normal(v.shape) * 0.01).astype(np.float32) for k, v in sym.params.items()}
    data = [a for a in sym.list_arguments() if a not in params][0]
    shape = sym.infer_shape()[0][sym.list_arguments().index(data)]
    return sym, {data: rng.standard_normal(shape).astype(np.float32)}, params
