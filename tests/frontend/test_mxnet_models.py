"""MXNet-exported models run through autotile give MXNet's numbers: inference outputs, and
for one training step (simple_bind, forward(is_train=True), backward with a fixed head
gradient, sgd_update lr 0.1 wd 0) the gradients, updated params and BatchNorm statistics.
Oracle: tests/fixtures/mxnet/*-io.params and *-train.params, written by MXNet 1.9."""
import os

import numpy as np
import pytest

import autotile as at
from mxnet_fixtures import models, path

MODELS = ["mlp", "cnn", "resblock", "lstm", "gluon"]
RTOL, ATOL = 1e-4, 1e-5


def prefixed(d, prefix):
    return {k[len(prefix):]: v for k, v in d.items() if k.startswith(prefix)}


def checkpoint(name):
    sym = at.sym.load(path(f"{name}-symbol.json"))
    args, aux = at.nd.split_params(at.nd.load(path(f"{name}-0000.params")))
    return sym, args, aux


def inputs_of(name, io):
    return {k: io[k] for k in models.INPUTS[name]}


def close(got, want, what):
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=what)


@pytest.mark.parametrize("name", MODELS)
def test_inference_outputs_match_mxnet(name):
    sym, args, aux = checkpoint(name)
    io = at.nd.load(path(f"{name}-io.params"))
    res = at.backend.run(sym, inputs=inputs_of(name, io), params=args, aux=aux)
    want = prefixed(io, "output:")
    assert len(res.outputs) == len(want)
    for i, out in enumerate(res.outputs):
        assert out.shape == want[str(i)].shape
        close(out, want[str(i)], f"{name} output {i}")


@pytest.mark.parametrize("name", MODELS)
def test_training_step_matches_mxnet(name):
    _, args, aux = checkpoint(name)
    train_file = path(f"{name}-train-symbol.json")  # Dropout p=0 where the model has one
    sym = at.sym.load(train_file if os.path.exists(train_file) else path(f"{name}-symbol.json"))
    io = at.nd.load(path(f"{name}-io.params"))
    ref = at.nd.load(path(f"{name}-train.params"))
    head = prefixed(ref, "head_grad:")
    res = at.backend.run(sym, inputs=inputs_of(name, io), params=args, aux=aux, train=True,
                         optimizer="sgd", optimizer_args={"lr": 0.1, "wd": 0.0},
                         head_grads=[head[str(i)] for i in range(len(head))] if head else None)
    for i, out in enumerate(res.outputs):
        close(out, ref[f"output:{i}"], f"{name} train-mode output {i}")
    grads = prefixed(ref, "grad:")
    assert set(args) <= set(res.grads), f"missing gradients: {sorted(set(args) - set(res.grads))}"
    for k in args:
        close(res.grads[k], grads[k], f"{name} gradient of {k}")
    for k, v in prefixed(ref, "updated:").items():
        close(res.params[k], v, f"{name} {k} after one SGD step")
    for k, v in prefixed(ref, "aux:").items():
        close(res.aux[k], v, f"{name} auxiliary state {k} after the step")


@pytest.mark.parametrize("name", ["mlp", "resblock", "lstm"])
def test_symbol_built_here_runs_like_the_mxnet_file(name):
    # the same builder code through autotile.sym, with MXNet's checkpoint and inputs
    _, args, aux = checkpoint(name)
    io = at.nd.load(path(f"{name}-io.params"))
    sym = models.BUILDERS[name](at.sym)
    res = at.backend.run(sym, inputs=inputs_of(name, io), params=args, aux=aux)
    close(res.outputs[0], io["output:0"], f"{name} output")


def test_checkpoint_dict_is_accepted_as_params():
    # DESIGN's contract: params = at.nd.load("model-0000.params") goes straight to run()
    io = at.nd.load(path("cnn-io.params"))
    res = at.backend.run(path("cnn-symbol.json"), inputs=inputs_of("cnn", io),
                         params=at.nd.load(path("cnn-0000.params")))
    close(res.outputs[0], io["output:0"], "cnn output")


def test_head_grads_errors_name_the_outputs():
    sym, args, aux = checkpoint("resblock")
    io = at.nd.load(path("resblock-io.params"))
    kw = dict(inputs=inputs_of("resblock", io), params=args, aux=aux)
    with pytest.raises(at.Error, match=r"head_grads for \['nope'\].*outputs: \['fc_output'\]"):
        at.backend.run(sym, train=True, head_grads={"nope": np.ones((2, 3))}, **kw)
    with pytest.raises(at.Error, match=r"head_grads has 2 arrays for 1 outputs"):
        at.backend.run(sym, train=True, head_grads=[np.ones((2, 3))] * 2, **kw)
    with pytest.raises(at.Error, match=r"only used with train=True"):
        at.backend.run(sym, head_grads=[np.ones((2, 3))], **kw)
