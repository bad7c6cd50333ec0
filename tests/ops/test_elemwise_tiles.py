"""The ops of the element-wise/broadcast/LeakyReLU/softmax/loss families run on tiles: a
training step under random plans (every tiling and strategy their TDL allows) on virtual
devices equals the single-device step. This checks that each kernel, run by partition-n-
reduce on the regions its TDL describes, computes its part of the whole op (e.g. the loss
normalization of the whole batch, broadcast-gradient sums, whole softmax rows)."""
import os
import sys

import numpy as np
import pytest

import autotile as at

pytest.importorskip("autotile._core")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "execgraph"))
from random_plans import lowered_training_graph, random_plan  # noqa: E402

from autotile.backend.multi_device import run_multi_device  # noqa: E402
from strategy_validator import compare_results  # noqa: E402


def _softmax_head_net():
    x, label = at.sym.Variable("data"), at.sym.Variable("softmax_label")
    w, g = at.sym.Variable("w", shape=(8,)), at.sym.Variable("g", shape=(8,))
    h = at.sym.broadcast_mul(x, w, name="scale")
    h = at.sym.LeakyReLU(h, g, act_type="prelu", name="prelu")
    h = h * 2.0 + 1.0
    h = at.sym.elemwise_add(h, at.sym.tanh(x), name="skip")
    h = at.sym.broadcast_add(h, w, name="shift")
    return at.sym.SoftmaxOutput(h, label, normalization="valid", use_ignore=True, ignore_label=3, name="softmax")


def _regression_net():
    x, label, w = at.sym.Variable("data"), at.sym.Variable("label"), at.sym.Variable("w", shape=(8,))
    h = at.sym.broadcast_sub(x, w, name="diff")
    h = at.sym.softmax(h, axis=1, name="sm")
    h = at.sym.LeakyReLU(h, act_type="elu", slope=0.5, name="elu")
    a = at.sym.LinearRegressionOutput(h, label, grad_scale=2.0, name="reg")
    b = at.sym.MakeLoss(at.sym.square(at.sym.broadcast_div(x, w)), normalization="batch", name="aux")
    return at.sym.Group([a, b])


def _check(net, shapes, vals, factors, seed, n_plans=4, rtol=1e-4, atol=1e-6):
    """`n_plans` random plans of `net`'s training step at `factors` each equal the single-
    device step: outputs, gradients, updated params, optimizer and aux states (BatchNorm's
    moving statistics), by name both ways (strategy_validator.compare_results); and every
    op node of `net` runs split in at least one of them."""
    low = lowered_training_graph(net, shapes)
    rng = np.random.default_rng(seed)
    ref = at.backend.run(net, inputs={k: vals[k] for k in shapes},
                         params={k: v for k, v in vals.items() if k not in shapes}, train=True)
    split = set()
    for _ in range(n_plans):
        plan = random_plan(low, factors, rng, input_shapes=shapes)
        res = run_multi_device(net, plan.devices, vals, plan=plan)
        compare_results(res, ref, f"plan {plan.node_strategies}", rtol=rtol, atol=atol)
        split |= {n for n, row in plan.node_strategies.items() if any(v != "replicate" for v in row)}
    never = [n.name for n in net.topo_nodes() if not n.is_variable and n.name not in split]
    assert not never, f"nodes {never} ran split in none of the {n_plans} random plans at {factors}"


@pytest.mark.parametrize("factors", [[2], [2, 2]])
def test_softmax_output_network_on_tiles(factors):
    rng = np.random.default_rng(1)
    vals = {"data": rng.standard_normal((8, 8)).astype(np.float32),
            "softmax_label": np.array([0, 3, 5, 2, 3, 7, 1, 6], np.float32),
            "w": rng.uniform(0.5, 1.5, 8).astype(np.float32),
            "g": rng.uniform(0.1, 0.3, 8).astype(np.float32)}
    _check(_softmax_head_net(), {"data": (8, 8), "softmax_label": (8,)}, vals, factors, seed=sum(factors))


@pytest.mark.parametrize("factors", [[2], [2, 2]])
def test_regression_and_make_loss_network_on_tiles(factors):
    rng = np.random.default_rng(2)
    vals = {"data": rng.standard_normal((8, 8)).astype(np.float32),
            "label": rng.standard_normal((8, 8)).astype(np.float32),
            "w": rng.uniform(0.5, 1.5, 8).astype(np.float32)}
    _check(_regression_net(), {"data": (8, 8), "label": (8, 8)}, vals, factors, seed=10 + sum(factors))
