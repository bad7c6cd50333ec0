"""bfloat16 mixed-precision training steps (issue 32 item 3) on the host runtime: k devices
equal one device within bf16 rounding (same graph; the plan only reorders sums), one device
equals float32 within bf16 tolerance, master weights / optimizer states / BatchNorm
statistics stay float32, and digits trains to float32's accuracy."""
import re

import numpy as np
import pytest

import autotile as at
from autotile import cli

pytest.importorskip("ml_dtypes")
S = at.sym
BATCH = 16


def tanh_mlp():
    x = S.Variable("data", shape=(BATCH, 64))
    for i, h in enumerate((48, 32), 1):
        x = S.Activation(S.FullyConnected(x, num_hidden=h, name=f"fc{i}"), act_type="tanh", name=f"tanh{i}")
    x = S.FullyConnected(x, num_hidden=10, name="fc3")
    return S.SoftmaxOutput(x, S.Variable("softmax_label", shape=(BATCH,)), name="softmax")


def bn_cnn():
    """Conv (no bias: BatchNorm follows) -> BatchNorm -> tanh -> avg pool -> FC -> softmax."""
    x = S.Variable("data", shape=(BATCH, 2, 8, 8))
    x = S.Convolution(x, num_filter=8, kernel=(3, 3), pad=(1, 1), no_bias=True, name="conv1")
    x = S.Activation(S.BatchNorm(x, fix_gamma=False, name="bn1"), act_type="tanh", name="tanh1")
    x = S.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="avg", name="pool1")
    x = S.FullyConnected(S.Flatten(x, name="flat"), num_hidden=10, name="fc1")
    return S.SoftmaxOutput(x, S.Variable("softmax_label", shape=(BATCH,)), name="softmax")


def step_args(sym, seed=0):
    rng = np.random.default_rng(seed)
    args, _, aux_shapes = sym.infer_shape()
    data_shape = dict(zip(sym.list_arguments(), args))["data"]
    params = {n: (rng.standard_normal(s) / np.sqrt(np.prod(s[1:]) if len(s) > 1 else 8) + (n.endswith("gamma"))
                  ).astype(np.float32) for n, s in zip(sym.list_arguments(), args) if n not in ("data", "softmax_label")}
    aux = {n: (np.full(s, 0.1, np.float32) if "mean" in n else np.full(s, 0.9, np.float32))
           for n, s in zip(sym.list_auxiliary_states(), aux_shapes)}
    inputs = {"data": rng.standard_normal(data_shape).astype(np.float32),
              "softmax_label": rng.integers(0, 10, BATCH).astype(np.float32)}
    return dict(inputs=inputs, params=params, aux=aux, train=True, optimizer="momentum",
                optimizer_args={"lr": 0.1, "momentum": 0.9})


def rel(a, b):
    return float(np.abs(np.asarray(a, np.float64) - b).max() / np.abs(b).max())


@pytest.mark.parametrize("build", [tanh_mlp, bn_cnn])
def test_bf16_one_device_within_bf16_of_float32(build):
    sym = build()
    kw = step_args(sym)
    f = at.backend.run(sym, 1, **kw)
    b = at.backend.run(sym, 1, dtype="bfloat16", **kw)
    for name in f.grads:
        assert 1e-5 < rel(b.grads[name], f.grads[name]) <= 3e-2, name  # rounded as bf16, not fp32
        assert b.params[name].dtype == b.grads[name].dtype == np.float32
    assert {v.dtype for v in b.states.values()} == {np.dtype("float32")}
    assert rel(b.outputs[0], f.outputs[0]) <= 1e-2 and b.outputs[0].dtype == np.float32
    for name in f.aux:  # BatchNorm's moving statistics: float32, from float32 batch statistics
        assert b.aux[name].dtype == np.float32
        np.testing.assert_allclose(b.aux[name], f.aux[name], rtol=1e-2, atol=1e-3, err_msg=name)


def test_batchnorm_statistics_are_float32_in_the_graph():
    msym = at.autodiff.autocast(bn_cnn())
    bn = next(n for n in msym.topo_nodes() if n.op == "BatchNorm")
    assert bn.inputs[0][0].op == "Cast" and bn.inputs[0][0].attrs["dtype"] == "float32"
    users = [n for n in msym.topo_nodes() if any(src is bn for src, _ in n.inputs)]
    assert [(n.op, n.attrs["dtype"]) for n in users] == [("Cast", "bfloat16")]  # stored back in bf16
    tg = at.autodiff.training_graph(msym, shapes={"data": (BATCH, 2, 8, 8), "softmax_label": (BATCH,)})
    _, out_types, aux_types = tg.symbol.infer_type()
    assert set(aux_types) == {"float32"}
    from autotile.symbol.infer import infer_entry_types

    types = infer_entry_types(tg.symbol, {})
    moments = [t for n in tg.symbol.topo_nodes() if n.op == "_bn_moments" for (nid, _), t in types.items()
               if nid == id(n)]
    assert moments and set(moments) == {"float32"}


@pytest.mark.parametrize("build", [tanh_mlp, bn_cnn])
@pytest.mark.parametrize("devices,algorithm", [(2, "tofu"), (4, "tofu"), (4, "data")])
def test_bf16_k_devices_equal_one_device(build, devices, algorithm):
    sym = build()
    kw = step_args(sym)
    one = at.backend.run(sym, 1, dtype="bfloat16", **kw)
    k = at.backend.run(sym, devices, dtype="bfloat16", algorithm=algorithm, **kw)
    # the same bf16 graph: only where the plan splits a sum (partials rounded to bf16, summed
    # in float) do the numbers move, by about one bf16 rounding (2^-8) of the largest value
    for name in one.grads:
        assert rel(k.grads[name], one.grads[name]) <= 2 ** -6, name
        assert rel(k.params[name], one.params[name]) <= 2 ** -8, name
        assert k.params[name].dtype == np.float32
    assert rel(k.outputs[0], one.outputs[0]) <= 2 ** -7
    for name in one.aux:
        assert k.aux[name].dtype == np.float32
        np.testing.assert_allclose(k.aux[name], one.aux[name], rtol=2 ** -8, atol=1e-6, err_msg=name)
    if algorithm == "data":  # batch split only: every forward value is computed as on one device
        np.testing.assert_array_equal(k.outputs[0], one.outputs[0])


@pytest.mark.slow
def test_digits_bf16_reaches_float32_accuracy(capsys):
    pytest.importorskip("sklearn")
    assert cli.main(["train", "mlp", "--data", "digits", "--devices", "2", "--epochs", "5",
                     "--dtype", "bfloat16"]) == 0
    out = capsys.readouterr().out
    bf16 = float(re.findall(r"test accuracy (\S+)%", out)[-1])
    fp32 = at.train("mlp", data="digits", devices=2, epochs=5, out=False)
    assert bf16 == pytest.approx(100 * fp32.epochs[-1].test_accuracy, abs=1.0), out
    assert bf16 >= 95.0


def test_tiny_gpt2_bf16_step():
    """Embedding, LayerNorm, batch_dot attention with a causal softmax, GELU, tied head: the
    ids stay float32 (Embedding has no bf16 kernel for them), softmax and LayerNorm compute in
    float32, the matrix work in bf16; 2 devices equal 1."""
    from autotile.models.gpt2 import gpt2

    sym = gpt2(batch=2, seq=8, layers=2, d_model=16, heads=2, vocab=50, positions=8)
    rng = np.random.default_rng(0)
    args, _, _ = sym.infer_shape()
    params, inputs = {}, {}
    for n, s in zip(sym.list_arguments(), args):
        if n in ("data", "softmax_label"):
            inputs[n] = rng.integers(0, 50, s).astype(np.float32)
        elif n in sym.params:
            params[n] = np.asarray(sym.params[n])
        else:
            params[n] = (0.1 * rng.standard_normal(s)).astype(np.float32)
    kw = dict(inputs=inputs, params=params, train=True)
    f = at.backend.run(sym, 1, **kw)
    b = at.backend.run(sym, 1, dtype="bfloat16", **kw)
    b2 = at.backend.run(sym, 2, dtype="bfloat16", **kw)
    msym = at.autodiff.autocast(sym)
    emb = [n for n in msym.topo_nodes() if n.op == "Embedding"]
    assert emb and all(n.inputs[0][0].op == "null" for n in emb)  # ids read as given
    scale = max(float(np.abs(g).max()) for g in f.grads.values())
    for name in f.grads:  # against the largest gradient: a key bias's is zero (softmax shift)
        assert np.abs(b.grads[name] - f.grads[name]).max() <= 3e-2 * scale, name
        assert np.abs(b2.grads[name] - b.grads[name]).max() <= 2 ** -6 * scale, name
        assert b.params[name].dtype == np.float32
    assert rel(b.outputs[0], f.outputs[0]) <= 2e-2
