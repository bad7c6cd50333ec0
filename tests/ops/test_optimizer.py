import numpy as np
import pytest

import autotile as at
from autotile.symbol.symbol import Symbol
from fixtures_ew import case, cases
from gradcheck import forward, single_op

STATES = {"sgd_update": [], "sgd_mom_update": ["mom"], "adam_update": ["mean", "var"]}


def _all_outputs(sym):
    node = sym.entries[0][0]
    n = node.opdef().num_outputs(node.parsed_attrs())
    return Symbol([(node, i) for i in range(n)])


def _step(op, attrs, w, g, states):
    sym = _all_outputs(single_op(op, ["weight", "grad"] + STATES[op], **attrs))
    vals = {"weight": w, "grad": g, **dict(zip(STATES[op], states))}
    outs = forward(sym, vals)
    return outs[0], outs[1:]


@pytest.mark.parametrize("name", cases("sgd_") + cases("adam"))
def test_steps_match_mxnet(name):
    attrs, arr = case(name)
    op = attrs.pop("op")
    if op == "adam_update":
        attrs = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, **attrs}
    # MXNet holds these attributes as float32 (beta2 = 0.999000013): round them alike
    attrs = {k: float(np.float32(v)) for k, v in attrs.items()}
    w, states = arr["weight0"], list(arr["states0"])
    for k in range(len(arr["grads"])):
        w, states = _step(op, attrs, w, arr["grads"][k], states)
        np.testing.assert_allclose(w, arr["weights"][k], rtol=1e-6, atol=1e-7, err_msg=f"{name} step {k}")
        for s, want in zip(states, arr["states"][k]):
            np.testing.assert_allclose(s, want, rtol=1e-6, atol=1e-7, err_msg=f"{name} state, step {k}")


def _clip(v, c):
    return v if c < 0 else min(max(v, -c), c)


def test_formulas_elementwise():
    # MXNet's kernels written out per element (optimizer_op-inl.h)
    rng = np.random.default_rng(0)
    w, g, m, v = rng.standard_normal(6), rng.standard_normal(6) * 4, rng.standard_normal(6), rng.uniform(0, 1, 6)
    lr, wd, rs, cg, mom = 0.1, 0.03, 0.5, 0.7, 0.9
    common = dict(lr=lr, wd=wd, rescale_grad=rs, clip_gradient=cg)
    new_w, _ = _step("sgd_update", common, w, g, [])
    new_w2, (new_m,) = _step("sgd_mom_update", dict(common, momentum=mom), w, g, [m])
    new_w3, (new_mean, new_var) = _step("adam_update", dict(common, beta1=0.8, beta2=0.95, epsilon=1e-3), w, g, [m, v])
    for i in range(6):
        assert new_w[i] == pytest.approx((1 - lr * wd) * w[i] - lr * _clip(rs * g[i], cg), rel=1e-12)
        mi = mom * m[i] - lr * wd * w[i] - lr * _clip(rs * g[i], cg)
        assert new_m[i] == pytest.approx(mi, rel=1e-12) and new_w2[i] == pytest.approx(w[i] + mi, rel=1e-12)
        gi = _clip(rs * g[i] + wd * w[i], cg)
        mean = 0.8 * m[i] + 0.2 * gi
        var = 0.95 * v[i] + 0.05 * gi * gi
        assert new_mean[i] == pytest.approx(mean, rel=1e-12) and new_var[i] == pytest.approx(var, rel=1e-12)
        assert new_w3[i] == pytest.approx(w[i] - lr * mean / (np.sqrt(var) + 1e-3), rel=1e-12)


def test_clip_gradient_zero_clips_everything_like_mxnet():
    # MXNet 1.9.1: sgd_update(w=[1, 2], g=[3, -4], lr=0.1, clip_gradient=0) -> [1, 2]
    w, _ = _step("sgd_update", dict(lr=0.1, clip_gradient=0.0), np.array([1.0, 2.0]), np.array([3.0, -4.0]), [])
    np.testing.assert_array_equal(w, [1.0, 2.0])


@pytest.mark.parametrize("op", sorted(STATES))
def test_one_visible_output_and_hidden_states(op):
    sym = single_op(op, ["weight", "grad"] + STATES[op], lr=0.1)
    assert len(sym.list_outputs()) == 1
    node = sym.entries[0][0]
    assert node.opdef().num_outputs(node.parsed_attrs()) == 1 + len(STATES[op])
    args, outs, _ = _all_outputs(sym).infer_shape(weight=(3, 4))
    assert args == [(3, 4)] * (2 + len(STATES[op])) and outs == [(3, 4)] * (1 + len(STATES[op]))


@pytest.mark.parametrize("op", sorted(STATES))
def test_no_gradient_and_elementwise(op):
    opdef = at.ops.get(op)
    assert opdef.elementwise
    assert opdef.gradient(None) == [None] * (2 + len(STATES[op]))


def test_shape_mismatch_names_node_and_shapes():
    w, g, m = at.sym.Variable("w"), at.sym.Variable("g"), at.sym.Variable("m")
    with pytest.raises(at.Error) as e:
        at.sym.sgd_mom_update(w, g, m, lr=0.1, name="upd").infer_shape(w=(3, 4), g=(3, 4), m=(4, 3))
    msg = str(e.value)
    assert "upd" in msg and "sgd_mom_update" in msg and "(3, 4)" in msg and "(4, 3)" in msg


def test_lr_is_required():
    with pytest.raises(at.Error) as e:
        at.sym.sgd_update(at.sym.Variable("w"), at.sym.Variable("g"), name="upd")
    assert "upd" in str(e.value) and "lr" in str(e.value)


def test_momentum_training_step_uses_hidden_state():
    # two steps of the training graph with momentum: the second reads the first's new state
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((2, 3)), rng.standard_normal(3)
    X, W = at.sym.Variable("x"), at.sym.Variable("w")
    net = at.sym.MakeLoss(at.sym.broadcast_mul(X, W))
    args = {"lr": 0.1, "momentum": 0.5}
    r1 = at.backend.training_step(net, {"x": x, "w": w}, ["w"], optimizer="momentum", optimizer_args=args)
    grad = x.sum(axis=0)  # d sum(x * w) / dw
    np.testing.assert_allclose(r1.params["w"], w - 0.1 * grad)
    states = r1.stats["optimizer_states"]
    r2 = at.backend.training_step(net, {"x": x, "w": r1.params["w"], **states}, ["w"], optimizer="momentum",
                                   optimizer_args=args)
    np.testing.assert_allclose(r2.params["w"], r1.params["w"] + 0.5 * (-0.1 * grad) - 0.1 * grad)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("clip", [-1.0, 0.25])
def test_in_place_kernels_equal_the_plain_expressions_bit_for_bit(dtype, clip):
    # the kernels update in arrays they allocate (one temporary): same bits as the plain NumPy
    # expressions of MXNet's formulas, evaluated in the same order, and the inputs untouched
    rng = np.random.default_rng(1)
    w, g, m = (rng.standard_normal((9, 5)).astype(dtype) for _ in range(3))
    v = np.abs(rng.standard_normal((9, 5))).astype(dtype)
    lr, wd, rs, mo, b1, b2, eps = 0.05, 0.01, 0.5, 0.9, 0.8, float(np.float32(0.999)), 1e-3
    common = dict(lr=lr, wd=wd, rescale_grad=rs, clip_gradient=clip)
    cl = (lambda x: np.clip(x, -clip, clip)) if clip >= 0 else (lambda x: x)
    before = [x.copy() for x in (w, g, m, v)]
    got, _ = _step("sgd_update", common, w, g, [])
    np.testing.assert_array_equal(got, (1.0 - lr * wd) * w - lr * cl(rs * g), strict=True)
    got, (got_m,) = _step("sgd_mom_update", dict(common, momentum=mo), w, g, [m])
    want_m = mo * m - lr * wd * w - lr * cl(rs * g)
    np.testing.assert_array_equal(got_m, want_m, strict=True)
    np.testing.assert_array_equal(got, w + want_m, strict=True)
    got, (got_mean, got_var) = _step("adam_update", dict(common, beta1=b1, beta2=b2, epsilon=eps), w, g, [m, v])
    gr = cl(rs * g + wd * w)
    mean, var = b1 * m + (1.0 - b1) * gr, b2 * v + (1.0 - b2) * gr * gr
    np.testing.assert_array_equal(got_mean, mean, strict=True)
    np.testing.assert_array_equal(got_var, var, strict=True)
    np.testing.assert_array_equal(got, w - lr * mean / (np.sqrt(var) + eps), strict=True)
    for x, b in zip((w, g, m, v), before):
        np.testing.assert_array_equal(x, b)
