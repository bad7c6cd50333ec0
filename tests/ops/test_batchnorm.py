import numpy as np
import pytest

import autotile as at
from autotile.backend.reference import execute
from autotile.errors import Error
from autotile.symbol.symbol import Symbol
from gradcheck import check_gradient, single_op
from mxfixtures import case_ids, cases, check_case
from tdl_interp import check_op_tdl

NAMES = ["data", "gamma", "beta", "moving_mean", "moving_var"]


def _values(rng, shape, axis=1):
    c = shape[axis]
    return {"data": rng.standard_normal(shape) * 2 + 1, "gamma": rng.standard_normal(c), "beta": rng.standard_normal(c),
            "moving_mean": rng.standard_normal(c), "moving_var": rng.random(c) + 0.5}


def naive_batchnorm(v, axis, eps, train, fix_gamma, momentum):
    """Per-channel loops with explicit sums (biased variance)."""
    x = np.moveaxis(v["data"], axis, 0)
    out = np.empty_like(x)
    means, invstds, new_mm, new_mv = [], [], [], []
    for c in range(x.shape[0]):
        vals = x[c].reshape(-1)
        if train:
            mean = sum(vals) / len(vals)
            var = sum((t - mean) ** 2 for t in vals) / len(vals)
        else:
            mean, var = v["moving_mean"][c], v["moving_var"][c]
        g = 1.0 if fix_gamma else v["gamma"][c]
        out[c] = (x[c] - mean) / np.sqrt(var + eps) * g + v["beta"][c]
        means.append(mean)
        invstds.append(1 / np.sqrt(var + eps))
        new_mm.append(v["moving_mean"][c] * momentum + mean * (1 - momentum) if train else v["moving_mean"][c])
        new_mv.append(v["moving_var"][c] * momentum + var * (1 - momentum) if train else v["moving_var"][c])
    return np.moveaxis(out, 0, axis), np.array(means), np.array(invstds), np.array(new_mm), np.array(new_mv)


def _run_all_outputs(attrs, values, is_train):
    sym = single_op("BatchNorm", NAMES, **attrs)
    node = sym.entries[0][0]
    outs, aux, _ = execute(Symbol([(node, i) for i in range(3)]), values, is_train=is_train)
    return sym, outs, aux


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("fix_gamma", [True, False])
@pytest.mark.parametrize("shape, axis", [((4, 3, 2, 3), 1), ((5, 3), 1), ((2, 3, 4), -1), ((2, 3, 4), 0)])
def test_forward_and_aux_update_match_naive_loops(train, fix_gamma, shape, axis):
    rng = np.random.default_rng(0)
    values = _values(rng, shape, axis)
    attrs = dict(fix_gamma=fix_gamma, axis=axis, momentum=0.8, eps=1e-3)
    _, outs, aux = _run_all_outputs(attrs, values, train)
    y, mean, invstd, mm, mv = naive_batchnorm(values, axis, 1e-3, train, fix_gamma, 0.8)
    np.testing.assert_allclose(outs[0], y, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(outs[1], mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(outs[2], invstd, rtol=1e-10)
    if train:
        np.testing.assert_allclose(aux["moving_mean"], mm, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(aux["moving_var"], mv, rtol=1e-10)
    else:
        assert "moving_mean" not in aux or np.array_equal(aux["moving_mean"], values["moving_mean"])


def test_use_global_stats_in_training_uses_and_keeps_moving_stats():
    values = _values(np.random.default_rng(1), (3, 2, 2, 2))
    _, outs, aux = _run_all_outputs(dict(use_global_stats=True, fix_gamma=False), values, True)
    y, *_ = naive_batchnorm(values, 1, 1e-3, False, False, 0.9)
    np.testing.assert_allclose(outs[0], y, rtol=1e-10)
    np.testing.assert_array_equal(aux.get("moving_mean", values["moving_mean"]), values["moving_mean"])


@pytest.mark.parametrize("attrs, is_train", [
    (dict(fix_gamma=False), True),
    (dict(fix_gamma=True), True),
    (dict(fix_gamma=False, axis=-1), True),
    (dict(fix_gamma=False, use_global_stats=True), True),
    (dict(fix_gamma=False), False),
    (dict(fix_gamma=True), False),
])
def test_gradient_matches_finite_differences(attrs, is_train):
    rng = np.random.default_rng(2)
    values = _values(rng, (3, 2, 2, 3), attrs.get("axis", 1))
    check_gradient("BatchNorm", values, attrs, wrt=["data", "gamma", "beta"], is_train=is_train)


def test_fix_gamma_gradient_is_zero_and_aux_get_none():
    from gradcheck import analytic_gradient

    rng = np.random.default_rng(3)
    values = _values(rng, (3, 2, 2))
    sym = single_op("BatchNorm", NAMES, fix_gamma=True)
    heads = [rng.standard_normal((3, 2, 2)), np.zeros(2), np.zeros(2)]
    grads = analytic_gradient(sym, values, heads)
    np.testing.assert_array_equal(grads[1], np.zeros(2))
    assert grads[3] is None and grads[4] is None


def test_visible_outputs_and_aux_listing():
    sym = at.sym.create("BatchNorm", at.sym.Variable("data"), name="bn0")
    assert len(sym.entries) == 1
    assert sym.list_auxiliary_states() == ["bn0_moving_mean", "bn0_moving_var"]
    assert sym.list_arguments() == ["data", "bn0_gamma", "bn0_beta"]
    both = at.sym.create("BatchNorm", at.sym.Variable("data"), name="bn1", output_mean_var=True)
    assert both.list_outputs() == ["bn1_output", "bn1_mean", "bn1_var"]
    args, outs, aux = both.infer_shape(data=(2, 5, 3))
    assert args == [(2, 5, 3), (5,), (5,)] and aux == [(5,), (5,)] and outs == [(2, 5, 3), (5,), (5,)]


@pytest.mark.parametrize("name", case_ids("batchnorm.npz"))
def test_matches_mxnet(name):
    case, arrays = next((c, a) for c, a in cases("batchnorm.npz") if c["name"] == name)
    check_case(case, arrays, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("attrs", [dict(fix_gamma=False), dict(fix_gamma=False, use_global_stats=True),
                                   dict(fix_gamma=True, axis=-1)])
def test_tdl_covers_what_the_kernels_read(attrs):
    rng = np.random.default_rng(4)
    values = _values(rng, (3, 2, 2, 3), attrs.get("axis", 1))
    check_op_tdl("BatchNorm", [values[k] for k in NAMES], attrs, samples=10,
                 perturb={"moving_var": lambda r, s: r.random(s) + 0.5})
    _, outs, _ = _run_all_outputs(attrs, values, True)
    dy = rng.standard_normal(values["data"].shape)
    bwd = {k: v for k, v in attrs.items()}
    check_op_tdl("_backward_BatchNorm", [dy, values["data"], values["gamma"], outs[1], outs[2]], bwd, samples=10,
                 perturb={"invstd": lambda r, s: r.random(s) + 0.5})


@pytest.mark.parametrize("attrs, shapes, needle", [
    (dict(axis=4), dict(data=(2, 3, 4, 4)), "axis"),
    (dict(), dict(data=(2, 3, 4, 4), bn_bad_gamma=(4,)), "bn_bad_gamma"),
])
def test_bad_input_names_node(attrs, shapes, needle):
    sym = at.sym.create("BatchNorm", at.sym.Variable("data"), name="bn_bad", **attrs)
    with pytest.raises(Error, match=needle) as info:
        sym.infer_shape(**shapes)
    assert "bn_bad" in str(info.value)


@pytest.mark.parametrize("attrs", [dict(fix_gamma=False), dict(fix_gamma=False, use_global_stats=True)])
def test_planner_regions_cover_what_the_kernels_read(attrs):
    from tdl_regions import check_regions

    rng = np.random.default_rng(9)
    values = _values(rng, (4, 2, 2, 3))
    pos = {4: lambda r, s: r.random(s) + 0.5}
    check_regions("BatchNorm", [values[k] for k in NAMES], attrs, perturb=pos)
    _, outs, _ = _run_all_outputs(attrs, values, True)
    dy = rng.standard_normal(values["data"].shape)
    check_regions("_backward_BatchNorm", [dy, values["data"], values["gamma"], outs[1], outs[2]], attrs,
                  perturb=pos)
