"""The attention core as Transformers write it, checked op by op and on virtual devices:
batch_dot with several batch dims (out[b, h, i, j] = sum(k) { q[b, h, i, k] * k[b, h, j, k] }
with transpose_b), softmax / log_softmax on any axis including one the planner splits (whole
rows are read, never partial normalisers), and gelu's tanh approximation."""
import math

import numpy as np
import pytest

import autotile as at
from autotile import _core
from device_checks import check_planned_step, check_random_plans
from gradcheck import check_gradient, forward, single_op
from tdl_op_checks import check_tdl

RNG = np.random.default_rng(0)


def _strategies(op_name, attrs, ins, outs, k):
    op = at.ops.get(op_name)
    parsed = at.ops.parse_attrs(op, {a: at.ops.registry.format_value(v) for a, v in attrs.items()}, "op")
    return {s["var"]: s for s in _core.analyze_tdl(op.tdl(parsed, ins, outs), ins, outs, k)["strategies"]}


@pytest.mark.parametrize("ta, tb", [(False, True), (False, False), (True, False), (True, True)])
def test_four_d_batch_dot_is_the_attention_einsum(ta, tb):
    q = RNG.standard_normal((2, 3, 5, 4) if not ta else (2, 3, 4, 5))
    k = RNG.standard_normal((2, 3, 6, 4) if tb else (2, 3, 4, 6))
    (out,) = forward(single_op("batch_dot", ["lhs", "rhs"], transpose_a=ta, transpose_b=tb), {"lhs": q, "rhs": k})
    want = np.einsum("bhik,bhjk->bhij", np.swapaxes(q, -1, -2) if ta else q, k if tb else np.swapaxes(k, -1, -2))
    np.testing.assert_allclose(out, want, rtol=1e-12)


def test_four_d_batch_dot_gradient_and_tdl():
    q, k = RNG.standard_normal((2, 2, 3, 2)), RNG.standard_normal((2, 2, 4, 2))
    check_gradient("batch_dot", {"lhs": q, "rhs": k}, {"transpose_b": True})
    check_tdl("batch_dot", [q, k], {"transpose_b": True}, ks=(2,))
    got = _strategies("batch_dot", {"transpose_b": True}, [(2, 4, 6, 8), (2, 4, 6, 8)], [(2, 4, 6, 6)], 2)
    assert list(got) == ["b0", "b1", "i", "j", "k"]
    assert got["b1"]["inputs"][0]["dim"] == 1 and got["b1"]["inputs"][1]["dim"] == 1  # heads split both
    assert got["j"]["inputs"][0]["replicate"] and got["j"]["inputs"][1]["dim"] == 2
    assert got["k"]["reduction"] and got["k"]["outputs"][0]["partial"]  # head-dim split: partial scores


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_softmax_any_axis_reads_whole_rows(op, axis):
    x = RNG.standard_normal((4, 6, 2))
    check_tdl(op, [x], {"axis": axis}, ks=(2,))
    (y,) = forward(single_op(op, ["data"], axis=axis), {"data": x})
    check_tdl(f"_backward_{op}", [RNG.standard_normal(x.shape), y], {"axis": axis}, ks=(2,))
    ax = axis % 3
    got = _strategies(op, {"axis": axis}, [x.shape], [x.shape], 2)
    # splitting the softmax axis is allowed, but each worker reads the whole axis: never partial
    assert not got[f"i{ax}"]["reduction"] and got[f"i{ax}"]["inputs"][0]["per_worker"] == [(0, x.shape[ax])] * 2


def test_gelu_tanh_approximation():
    x = np.linspace(-4, 4, 17)
    (y,) = forward(single_op("gelu", ["data"], approximate="tanh"), {"data": x})
    # GELU paper's approximation, the constants of ONNX Gelu-20 / torch approximate='tanh'
    want = [0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3))) for v in x]
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-15)
    check_gradient("gelu", {"data": RNG.standard_normal((3, 4))}, {"approximate": "tanh"})


def _attention(heads=2, d=4):
    """softmax(q k^T / sqrt(d)) v on (batch, heads, seq, d) tensors, a GELU on the result."""
    q, k, v = (at.sym.Variable(n) for n in ("data", "k_label", "v_label"))
    wq = at.sym.Variable("wq", shape=(heads, 1, d))
    s = at.sym.batch_dot(at.sym.broadcast_mul(q, wq, name="qs"), k, transpose_b=True, name="scores")
    p = at.sym.softmax(s * (1.0 / math.sqrt(d)), axis=-1, name="attn")
    o = at.sym.batch_dot(p, v, name="ctx")
    lp = at.sym.log_softmax(o, axis=2, name="lsm")  # over the sequence axis
    return at.sym.Group([at.sym.gelu(o, approximate="tanh", name="act"), lp])


SHAPES = {"data": (2, 2, 4, 4), "k_label": (2, 2, 4, 4), "v_label": (2, 2, 4, 4)}


def _values(rng):
    vals = {n: rng.standard_normal(s).astype(np.float32) for n, s in SHAPES.items()}
    vals["wq"] = rng.uniform(0.5, 1.5, (2, 1, 4)).astype(np.float32)
    return vals


@pytest.mark.parametrize("devices", [2, 4])
def test_planned_attention_equals_one_device(devices):
    check_planned_step(_attention(), SHAPES, _values(np.random.default_rng(1)), devices)


@pytest.mark.parametrize("factors", [[2], [2, 2], [4]])
def test_attention_under_every_split(factors):
    # random plans split the softmax axis, the head dim (partial scores), heads and batch
    check_random_plans(_attention(), SHAPES, _values(np.random.default_rng(2)), factors, seed=100 + sum(factors),
                       n_plans=10)
