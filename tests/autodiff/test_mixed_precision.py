"""Mixed precision (issue 32 item 3): the autocast pass puts bfloat16 where compute reads it
and keeps weights, states, loss and BatchNorm statistics float32; a bf16 step equals a NumPy
oracle that rounds where a bf16 GPU stores; the planner counts bf16 tensors at 2 bytes;
MultiFetch reduces bf16 partial sums in float; what has no bf16 kernel is an Error."""
import numpy as np
import pytest

import autotile as at
from autotile import _core
from autotile.backend import lowp
from autotile.errors import Error
from autotile.ops.registry import KernelContext, get

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
S = at.sym
BATCH = 16


def tanh_mlp(batch=BATCH, hidden=(48, 32)):
    x = S.Variable("data", shape=(batch, 64))
    for i, h in enumerate(hidden, 1):
        x = S.Activation(S.FullyConnected(x, num_hidden=h, name=f"fc{i}"), act_type="tanh", name=f"tanh{i}")
    x = S.FullyConnected(x, num_hidden=10, name=f"fc{len(hidden) + 1}")
    return S.SoftmaxOutput(x, S.Variable("softmax_label", shape=(batch,)), name="softmax")


def mlp_values(sym, seed=0):
    rng = np.random.default_rng(seed)
    args, _, _ = sym.infer_shape()
    params = {n: (rng.standard_normal(s) / np.sqrt(s[-1] if len(s) > 1 else 16)).astype(np.float32)
              for n, s in zip(sym.list_arguments(), args) if n not in ("data", "softmax_label")}
    inputs = {"data": rng.standard_normal((BATCH, 64)).astype(np.float32),
              "softmax_label": rng.integers(0, 10, BATCH).astype(np.float32)}
    return inputs, params


def mlp_oracle(inputs, params, round_to):
    """Forward and backward of tanh_mlp in NumPy, every op output passed through `round_to`
    (identity: float32; bf16 rounding: what the bf16 step stores), matmuls in float32."""
    w = {k: round_to(v) for k, v in params.items()}
    y = inputs["softmax_label"].astype(int)
    a, acts, n = round_to(inputs["data"]), [], 3
    acts.append(a)
    for i in range(1, n + 1):
        h = round_to(a @ w[f"fc{i}_weight"].T + w[f"fc{i}_bias"])
        a = round_to(np.tanh(h)) if i < n else h
        acts.append(a)
    z = np.exp(a - a.max(1, keepdims=True))
    prob = z / z.sum(1, keepdims=True)
    g = prob.copy()
    g[np.arange(len(y)), y] -= 1  # SoftmaxOutput's gradient (normalization 'null')
    g, grads = round_to(g), {}
    for i in range(n, 0, -1):
        if i < n:
            g = round_to(g * (1 - acts[i] ** 2))
        grads[f"fc{i}_weight"] = round_to(g.T @ acts[i - 1])
        grads[f"fc{i}_bias"] = round_to(g.sum(0))
        g = round_to(g @ w[f"fc{i}_weight"])
    return prob, grads


def to_bf16(a):
    return np.asarray(a, np.float32).astype(BF16).astype(np.float32)


def rel(a, b):
    return float(np.abs(np.asarray(a, np.float64) - b).max() / np.abs(b).max())


def test_autocast_puts_casts_where_compute_reads():
    sym = tanh_mlp()
    msym = at.autodiff.autocast(sym, "bfloat16")
    casts = {n.name: n.attrs["dtype"] for n in msym.topo_nodes() if n.op == "Cast"}
    assert casts == {"data_bfloat16": "bfloat16", "fc1_weight_bfloat16": "bfloat16", "fc1_bias_bfloat16": "bfloat16",
                     "fc2_weight_bfloat16": "bfloat16", "fc2_bias_bfloat16": "bfloat16",
                     "fc3_weight_bfloat16": "bfloat16", "fc3_bias_bfloat16": "bfloat16",
                     "fc3_output_float32": "float32"}
    args, outs, _ = msym.infer_type()
    assert set(args) == {"float32"} and outs == ["float32"]  # weights stay float32, the loss is float32
    assert msym.list_arguments() == sym.list_arguments() and msym.list_outputs() == sym.list_outputs()
    # the training graph: bf16 activations and gradients, float32 weight gradients and updates
    tg = at.autodiff.training_graph(msym, optimizer="momentum")
    from autotile.symbol.infer import infer_entry_types

    types = {n.output_names()[i]: t for (nid, i), t in infer_entry_types(tg.symbol, {}).items()
             for n in tg.symbol.topo_nodes() if id(n) == nid}
    assert types["fc2_output"] == types["tanh1_output"] == "bfloat16"
    assert {types[g] for g in tg.grad_names} == {"float32"}
    assert {types[u] for u in tg.updated_names + tg.new_state_names} == {"float32"}
    assert at.autodiff.autocast(sym, "float32") is sym
    with pytest.raises(Error, match="mixed precision in dtype 'float64' is not supported"):
        at.autodiff.autocast(sym, "float64")


def test_bf16_step_equals_rounding_oracle_and_fp32_within_bf16():
    sym = tanh_mlp()
    inputs, params = mlp_values(sym)
    res = at.backend.run(sym, 1, inputs=inputs, params=params, train=True, dtype="bfloat16",
                         optimizer="momentum", optimizer_args={"lr": 0.1, "momentum": 0.9})
    p16, g16 = mlp_oracle(inputs, params, to_bf16)
    p32, g32 = mlp_oracle(inputs, params, lambda a: np.asarray(a, np.float32))
    assert {v.dtype for v in (*res.params.values(), *res.grads.values(), *res.states.values())} == {np.dtype("float32")}
    assert res.outputs[0].dtype == np.float32
    for name in g16:
        assert rel(res.grads[name], g16[name]) <= 2 ** -8, name  # the oracle that rounds as bf16 stores
        assert 1e-5 < rel(res.grads[name], g32[name]) <= 3e-2, name  # bf16, not a silent fp32
        # master weights: the float32 weight moved by the float32 gradient (momentum 0 at the start)
        np.testing.assert_allclose(res.params[name], params[name] - 0.1 * res.grads[name], rtol=1e-6, atol=1e-7)
    assert rel(res.outputs[0], p16) <= 2 ** -8 and rel(res.outputs[0], p32) <= 1e-2


def test_planner_counts_bf16_activations_at_two_bytes():
    sym = at.models.get("mlp-digits", batch=32)
    p32 = at.plan(sym, devices=2, algorithm="data")
    p16 = at.plan(at.autodiff.autocast(sym), devices=2, algorithm="data")
    acts = ["fc1_output", "act1_output", "fc2_output", "act2_output", "fc3_output"]

    def nbytes(plan, names):
        return sum(int(np.prod(plan.tensor_shapes[n])) * np.dtype(plan.tensor_dtypes[n]).itemsize for n in names)

    assert nbytes(p32, acts) == 4 * (32 * 128 * 4 + 32 * 10)
    assert nbytes(p16, acts) * 2 == nbytes(p32, acts)
    assert p16.tensor_dtypes["fc1_weight"] == "float32" and p16.tensor_dtypes["fc1_weight_bfloat16_output"] == "bfloat16"
    # data parallel: gradients reduce as bf16 partial sums (2 bytes), updated weights gather
    # as float32 (4 bytes): 3/4 of the float32 plan's bytes
    assert p16.comm_bytes == pytest.approx(0.75 * p32.comm_bytes, rel=1e-3)


def test_multifetch_reduces_bf16_partial_sums_in_float():
    rng = np.random.default_rng(1)
    parts = [(rng.standard_normal((4, 6)) * 10.0 ** rng.integers(-3, 3, (4, 6))).astype(BF16) for _ in range(3)]
    parts[0][1, 2], parts[1][1, 2], parts[2][1, 2] = 1, 2.0 ** -8, 2.0 ** -8  # each add alone rounds away
    dst = np.full((4, 6), 7, BF16)
    pieces = [(p.view(np.uint16), [0, 0], [0, 0], [4, 6]) for p in parts[:2]]
    pieces.append((parts[2][1:3, 2:].copy().view(np.uint16), [1, 2], [1, 2], [3, 6]))  # a piece of one region
    _core.multifetch(dst.view(np.uint16), [0, 0], pieces, True, bfloat16=True)
    want = parts[0].astype(np.float32) + parts[1].astype(np.float32)
    want[1:3, 2:] += parts[2][1:3, 2:].astype(np.float32)
    np.testing.assert_array_equal(dst.view(np.uint16), want.astype(BF16).view(np.uint16))  # rounded once
    per_add = (parts[0] + parts[1]).astype(np.float32)  # ml_dtypes' bf16 + rounds every add
    per_add[1:3, 2:] = (per_add[1:3, 2:].astype(BF16) + parts[2][1:3, 2:]).astype(np.float32)
    assert (per_add.astype(BF16) != want.astype(BF16)).any()  # the data tells the two apart
    copy = np.zeros((4, 6), BF16)
    _core.multifetch(copy.view(np.uint16), [0, 0], [(parts[0].view(np.uint16), [0, 0], [0, 0], [4, 6])], False,
                     bfloat16=True)
    np.testing.assert_array_equal(copy.view(np.uint16), parts[0].view(np.uint16))


def test_op_without_bf16_kernel_is_an_error_naming_op_and_dtype():
    ids = S.Cast(S.Variable("data", shape=(4, 3)), dtype="bfloat16", name="ids_bf16")
    emb = S.Embedding(ids, input_dim=300, output_dim=5, name="emb")
    sym = S.SoftmaxOutput(S.FullyConnected(S.Flatten(emb), num_hidden=3, name="fc"),
                          S.Variable("softmax_label", shape=(4,)), name="softmax")
    values = {"data": np.array([[1, 257, 299]] * 4, np.float32), "emb_weight": np.ones((300, 5), np.float32),
              "fc_weight": np.ones((3, 15), np.float32), "fc_bias": np.zeros(3, np.float32),
              "softmax_label": np.zeros(4, np.float32)}
    with pytest.raises(Error, match=r"node 'emb' \(op Embedding\) has no bfloat16 kernel for its input 'data'"):
        at.backend.run(sym, 1, inputs=values)
    with pytest.raises(Error, match=r"node 'emb' \(op Embedding\) has no bfloat16 kernel"):
        at.backend.run(sym, 2, inputs=values)  # the host runtime's kernels too
    upd = get("sgd_update")
    with pytest.raises(Error, match=r"node 'w_update' \(op sgd_update\) has no bfloat16 kernel: its input 'weight'"):
        lowp.forward(upd, "w_update", {"lr": 0.1, "wd": 0.0, "rescale_grad": 1.0, "clip_gradient": -1.0},
                     [np.ones(3, BF16), np.ones(3, np.float32)], KernelContext())


def test_unsupported_dtype_and_runtime_are_errors():
    sym = tanh_mlp()
    inputs, params = mlp_values(sym)
    with pytest.raises(Error, match="dtype='int8' is not supported"):
        at.backend.run(sym, 1, inputs=inputs, params=params, train=True, dtype="int8")
    with pytest.raises(Error, match="dtype=.bfloat16. runs on the host and MPI runtimes"):
        at.backend.run(sym, 1, inputs=inputs, params=params, train=True, dtype="bfloat16", ctx="gpu")


def test_plan_of_the_autocast_graph_runs_a_bf16_step():
    sym = tanh_mlp()
    inputs, params = mlp_values(sym)
    shapes = {k: v.shape for k, v in inputs.items()}
    kw = dict(inputs=inputs, params=params, train=True, dtype="bfloat16")
    plan = at.plan(at.autodiff.autocast(sym), devices=2, shapes=shapes)
    planned = at.backend.run(sym, 2, plan=plan, **kw)
    own = at.backend.run(sym, 2, **kw)
    for name in own.grads:
        np.testing.assert_array_equal(planned.grads[name], own.grads[name])
    with pytest.raises(Error, match="plan was made for another graph"):  # a float32 plan has no casts
        at.backend.run(sym, 2, plan=at.plan(sym, devices=2, shapes=shapes), **kw)
