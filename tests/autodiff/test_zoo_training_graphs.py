"""Training graphs of the zoo models: complete maps, self-contained shapes, and a few real
training steps on small instances."""
import time

import numpy as np
import pytest

import autotile as at
from autotile import models
from autotile.autodiff import training_graph
from autotile.backend import training_step

from test_training_graph import _check_maps


@pytest.mark.parametrize("build", [
    lambda: models.mlp(4, layers=3, hidden=16),
    lambda: models.alexnet(2),
    lambda: models.vgg(11, 2, batch_norm=True),
    lambda: models.wresnet(50, 1, 2, image=64),
    lambda: models.rnn(2, 16, steps=4, batch=2, vocab=20),
], ids=["mlp", "alexnet", "vgg11_bn", "resnet50", "rnn"])
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_zoo_training_graph_maps_are_complete(build, optimizer):
    sym = build()
    tg = training_graph(sym, optimizer=optimizer)
    _check_maps(tg)
    assert tg.head_grad_names == []  # every zoo model ends in SoftmaxOutput
    assert tg.data_names == ["data", "softmax_label"]
    assert set(tg.param_names) == set(sym.list_arguments()) - {"data", "softmax_label"}
    # every forward node that influences the loss has backward nodes, except the loss-free
    # tail: nodes between a parameter-free input and the first parameter have none
    with_bwd = set(tg.backward_of.values())
    fwd_ops = {n.name: n for n in sym.topo_nodes() if not n.is_variable}
    assert "softmax" in with_bwd
    assert all(name in with_bwd for name, n in fwd_ops.items() if n.op in ("FullyConnected", "Convolution"))
    # the training symbol infers all its shapes on its own
    _, out_shapes, _ = tg.symbol.infer_shape()
    shapes = dict(zip(tg.symbol.list_outputs(), out_shapes))
    arg_shapes = dict(zip(sym.list_arguments(), sym.infer_shape()[0]))
    for p, g, u in zip(tg.param_names, tg.grad_names, tg.updated_names):
        assert shapes[g] == shapes[u] == arg_shapes[p]


def test_resnet_tensors_used_twice_have_gradient_sums():
    tg = training_graph(models.wresnet(50, 1, 2, image=64))
    # each unit's input feeds bn1 and the identity shortcut (or, in a stage's first unit, its
    # first activation feeds conv1 and the projection shortcut)
    summed = set(tg.grad_sum_of.values())
    assert "stage1_unit1_relu1_output" in summed
    assert "stage1_unit1_plus_output" in summed  # input of unit 2: bn1 + shortcut
    # one per bottleneck unit of ResNet-50 (3 + 4 + 6 + 3 = 16), and, as BatchNorm trains in
    # its synchronous form (ops/sync_batchnorm.py: _bn_moments and _bn_apply both read its
    # input), the input of every other BatchNorm that has a gradient: bn0, each unit's bn2 and
    # bn3 (2 x 16), each stage's first bn1 (4; pool0 or the previous stage's last sum) and the
    # final bn1: 16 + 1 + 32 + 4 + 1 = 54
    assert len(summed) == 54
    assert "conv0_output" in summed and "stage1_unit1_conv1_output" in summed


def test_big_training_graph_builds_in_seconds():
    sym = models.get("rnn-10-8k", batch=8)
    t0 = time.perf_counter()
    tg = training_graph(sym, optimizer="adam")
    assert time.perf_counter() - t0 < 5.0
    assert len(tg.update_nodes) == 10 * 4 + 2 + 1  # lstm weights, pred weight+bias, embedding


def test_sgd_steps_reduce_the_loss_of_a_small_mlp():
    rng = np.random.default_rng(0)
    sym = models.mlp(32, layers=2, hidden=8, classes=3, input_dim=4)
    centers = rng.standard_normal((3, 4)) * 3
    label = rng.integers(0, 3, 32)
    data = centers[label] + 0.3 * rng.standard_normal((32, 4))
    arg_shapes = dict(zip(sym.list_arguments(), sym.infer_shape()[0]))
    params = {n: 0.3 * rng.standard_normal(s) for n, s in arg_shapes.items() if n not in ("data", "softmax_label")}

    def ce(probs):
        return -np.mean(np.log(probs[np.arange(32), label]))

    losses = []
    for _ in range(30):
        res = training_step(sym, {"data": data, "softmax_label": label.astype(np.float64), **params}, list(params),
                            optimizer="momentum", optimizer_args={"lr": 0.01})
        losses.append(ce(res.outputs[0]))
        params = res.params
    assert losses[-1] < 0.5 * losses[0]


def test_rnn_training_step_runs_and_returns_every_param():
    sym = models.rnn(2, 8, steps=3, batch=2, vocab=11)
    rng = np.random.default_rng(1)
    arg_shapes = dict(zip(sym.list_arguments(), sym.infer_shape()[0]))
    values = {n: 0.1 * rng.standard_normal(s).astype(np.float32) for n, s in arg_shapes.items()}
    values["data"] = rng.integers(0, 11, (3, 2)).astype(np.float32)
    values["softmax_label"] = rng.integers(0, 11, 6).astype(np.float32)
    res = at.backend.run(sym, inputs=values, train=True, optimizer="adam")
    params = set(arg_shapes) - {"data", "softmax_label"}
    assert set(res.grads) == set(res.params) == params
    assert res.outputs[0].shape == (6, 11)
    assert all(res.params[p].dtype == np.float32 for p in params)
