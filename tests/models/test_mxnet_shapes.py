"""Zoo models against MXNet: MXNet 1.9 loads each model's symbol JSON and its own shape
inference (recorded in fixtures/mxnet_shapes.json by fixtures/gen_mxnet_shapes.py) gives the
same shape for every argument, auxiliary state and internal output as ours."""
import json
import os

import pytest

import autotile as at

with open(os.path.join(os.path.dirname(__file__), "fixtures", "mxnet_shapes.json")) as f:
    MXNET = json.load(f)

BUILD = {
    "mlp-5-300": lambda: at.models.get("mlp-5-300", batch=2),
    "alexnet": lambda: at.models.get("alexnet", batch=2),
    "vgg16_bn": lambda: at.models.get("vgg16_bn", batch=2),
    "resnet50": lambda: at.models.get("resnet50", batch=2),
    "rnn-2-256-steps3": lambda: at.models.rnn(2, 256, steps=3, batch=2),
}


@pytest.mark.parametrize("key", sorted(BUILD))
def test_shapes_match_mxnet(key):
    internals = BUILD[key]().get_internals()
    args, outs, aux = internals.infer_shape()
    ours = {"args": dict(zip(internals.list_arguments(), args)),
            "outputs": dict(zip(internals.list_outputs(), outs)),
            "aux": dict(zip(internals.list_auxiliary_states(), aux))}
    for part in ("args", "outputs", "aux"):
        want = {k: tuple(v) for k, v in MXNET[key][part].items()}
        assert ours[part] == want, part
