"""Synchronous BatchNorm (ops/sync_batchnorm.py): the training form of BatchNorm as
_bn_moments -> _bn_stats -> _bn_apply equals BatchNorm (forward, gradients, moving
statistics), each new op's gradient equals finite differences, its TDL covers what its
kernel reads, and its statistics are sums the analysis can split along the batch."""
import numpy as np
import pytest

import autotile as at
import autotile.ops.sync_batchnorm as sync_bn
from autotile import _core
from autotile.autodiff import training_graph
from autotile.backend import training_step
from autotile.ops.registry import KernelContext, parse_attrs
from gradcheck import check_gradient
from tdl_interp import check_op_tdl


def _model(shape, axis, fix_gamma):
    x = at.sym.Variable("data", shape=shape)
    h = at.sym.BatchNorm(x, fix_gamma=fix_gamma, axis=axis, momentum=0.7, eps=1e-3, name="bn1")
    h = at.sym.Activation(h, act_type="tanh", name="act")
    return at.sym.BatchNorm(h, fix_gamma=False, axis=axis, name="bn2")


def _values(sym, seed):
    rng = np.random.default_rng(seed)
    args, _, aux = sym.infer_shape()
    vals = {n: rng.standard_normal(s) * 1.5 + 0.5 for n, s in zip(sym.list_arguments(), args)}
    vals.update({n: (rng.random(s) + 0.5 if n.endswith("var") else rng.standard_normal(s))
                 for n, s in zip(sym.list_auxiliary_states(), aux)})
    return vals


@pytest.mark.parametrize("shape, axis", [((4, 3, 2, 3), 1), ((6, 5), 1), ((2, 3, 4), -1)])
@pytest.mark.parametrize("fix_gamma", [True, False])
def test_expanded_step_equals_fused_batchnorm(shape, axis, fix_gamma, monkeypatch):
    sym = _model(shape, axis, fix_gamma)
    vals = _values(sym, 0)
    head = {"bn2_output_head_grad": np.random.default_rng(1).standard_normal(shape)}
    params = [p for p in sym.list_arguments() if p != "data"]
    tg = training_graph(sym)
    ops = {n.op for n in tg.symbol.topo_nodes()}
    assert {"_bn_moments", "_bn_stats", "_bn_apply", "_backward_bn_apply"} <= ops and "BatchNorm" not in ops
    new = training_step(sym, {**vals, **head}, params)
    monkeypatch.setattr(sync_bn, "expand_batchnorm", lambda s, shapes=None: s)  # the fused op, as MXNet has it
    assert "BatchNorm" in {n.op for n in training_graph(sym).symbol.topo_nodes()}
    old = training_step(sym, {**vals, **head}, params)
    np.testing.assert_allclose(new.outputs[0], old.outputs[0], rtol=1e-10, atol=1e-12)
    for p in params:
        np.testing.assert_allclose(new.grads[p], old.grads[p], rtol=1e-9, atol=1e-11, err_msg=p)
    assert sorted(new.aux) == sorted(old.aux) == sorted(sym.list_auxiliary_states())
    for name in old.aux:
        np.testing.assert_allclose(new.aux[name], old.aux[name], rtol=1e-10, atol=1e-12, err_msg=name)


def test_global_stats_and_unknown_shapes_keep_batchnorm():
    x = at.sym.Variable("data", shape=(4, 3))
    glob = at.sym.BatchNorm(x, use_global_stats=True, name="bn")
    assert sync_bn.expand_batchnorm(glob) is glob
    free = at.sym.BatchNorm(at.sym.Variable("data"), name="bn")
    assert [n.op for n in sync_bn.expand_batchnorm(free).topo_nodes() if not n.is_variable] == ["BatchNorm"]
    ops = [n.op for n in sync_bn.expand_batchnorm(free, {"data": (4, 3)}).topo_nodes() if not n.is_variable]
    assert ops == ["_bn_moments", "_bn_stats", "_bn_apply"]


def test_moments_of_batch_halves_add_up_to_the_whole():
    # What a batch-split plan does: each device sums its half over the whole count, the
    # execution graph adds the partial results.
    rng = np.random.default_rng(2)
    x = rng.standard_normal((8, 3, 2, 2)) * 3 + 2
    op = at.ops.get("_bn_moments")
    attrs = parse_attrs(op, {"axis": "1", "count": "32"}, "m")
    halves = [op.forward(attrs, [x[:4]], KernelContext()), op.forward(attrs, [x[4:]], KernelContext())]
    whole = op.forward(attrs, [x], KernelContext())
    np.testing.assert_allclose(halves[0][0] + halves[1][0], x.mean(axis=(0, 2, 3)), rtol=1e-12)
    np.testing.assert_allclose(halves[0][1] + halves[1][1], (x * x).mean(axis=(0, 2, 3)), rtol=1e-12)
    np.testing.assert_allclose(whole[1] - whole[0] ** 2, x.var(axis=(0, 2, 3)), rtol=1e-10)


def _stat_inputs(rng, c):
    m1 = rng.standard_normal(c)
    return {"batch_mean": m1, "batch_meansq": m1 ** 2 + rng.random(c) + 0.5,
            "moving_mean": rng.standard_normal(c), "moving_var": rng.random(c) + 0.5}


@pytest.mark.parametrize("fix_gamma", [True, False])
def test_gradients_match_finite_differences(fix_gamma):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 2, 2, 3))
    check_gradient("_bn_moments", {"data": x}, {"count": 18})
    check_gradient("_bn_stats", _stat_inputs(rng, 2), {"eps": 1e-3}, wrt=["batch_mean", "batch_meansq"])
    check_gradient("_bn_apply", {"data": x, "gamma": rng.standard_normal(2), "beta": rng.standard_normal(2),
                                 "mean": rng.standard_normal(2), "invstd": rng.random(2) + 0.5},
                   {"fix_gamma": fix_gamma}, wrt=["data", "gamma", "beta", "mean", "invstd"])


def test_tdl_covers_what_the_kernels_read():
    rng = np.random.default_rng(4)
    x, dy = rng.standard_normal((3, 2, 2, 3)), rng.standard_normal((3, 2, 2, 3))
    c = [rng.standard_normal(2) for _ in range(4)]
    pos = {"invstd": lambda r, s: r.random(s) + 0.5}
    check_op_tdl("_bn_moments", [x], {"count": 18}, samples=10)
    check_op_tdl("_backward_bn_moments", [c[0], c[1], x], {"count": 18}, samples=10)
    st = _stat_inputs(rng, 2)
    check_op_tdl("_bn_stats", [st[k] for k in ("batch_mean", "batch_meansq", "moving_mean", "moving_var")],
                 samples=10, perturb={"batch_meansq": lambda r, s: r.random(s) + 5})
    check_op_tdl("_backward_bn_stats", [c[0], c[1], c[2], np.abs(c[3]) + 0.5], samples=10, perturb=pos)
    check_op_tdl("_bn_apply", [x, c[0], c[1], c[2], np.abs(c[3]) + 0.5], {"fix_gamma": False}, samples=10,
                 perturb=pos)
    check_op_tdl("_backward_bn_apply", [dy, x, c[0], c[2], np.abs(c[3]) + 0.5], {"fix_gamma": False}, samples=10,
                 perturb=pos)


def _strategies(op_name, attrs, ins):
    op = at.ops.get(op_name)
    parsed = parse_attrs(op, attrs, "op")
    in_shapes, out_shapes = op.infer_shape(parsed, ins)[:2]
    text = op.tdl(parsed, in_shapes, out_shapes)
    return {s["var"]: s for s in _core.analyze_tdl(text, in_shapes, out_shapes, 2)["strategies"]}


def test_the_batch_split_is_a_strategy_with_partial_statistics():
    x = (8, 4, 6, 6)
    moments = _strategies("_bn_moments", {"count": "288"}, [x])
    assert moments["n"]["reduction"] and all(o["partial"] for o in moments["n"]["outputs"])
    assert moments["n"]["inputs"][0]["dim"] == 0  # each worker reads its half of the batch only
    assert not moments["c"]["reduction"]
    apply = _strategies("_bn_apply", {}, [x, (4,), (4,), (4,), (4,)])
    assert apply["n"]["outputs"][0]["dim"] == 0 and apply["n"]["inputs"][0]["dim"] == 0
    bwd = _strategies("_backward_bn_apply", {}, [x, x, (4,), (4,), (4,)])
    made = bwd["n"]["outputs"]
    assert made[0]["dim"] == 0 and all(m["partial"] for m in made[1:])
    # the fused op only offers the channel split: a batch split would read the whole batch
    fused = _strategies("BatchNorm", {}, [x, (4,), (4,), (4,), (4,)])
    assert list(fused) == ["c"]
