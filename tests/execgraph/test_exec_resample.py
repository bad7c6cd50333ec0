"""The resampling and index ops inside small training graphs (a U-Net-like decoder with
resize, skip concatenation and a transposed convolution; a DCGAN-like generator head; a
CLIP-like argmax pooling feeding a gather and a ScatterND of computed updates): under
random plans at 2, 3 and 4 devices the k-device training step equals the 1-device step
(outputs, gradients, updated weights), and the ops themselves run split."""
import numpy as np
import pytest

import autotile as at
from autotile.backend.multi_device import run_multi_device
from autotile.symbol.ops_api import create
from models import assert_same_step, reference_step, values
from random_plans import lowered_training_graph, random_plan

B = 4


def unet():
    x = at.sym.Variable("data")
    h1 = at.sym.Activation(at.sym.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=6, name="enc1"),
                           act_type="relu", name="relu1")
    h = at.sym.Pooling(h1, kernel=(2, 2), stride=(2, 2), pool_type="max", name="down")
    h = at.sym.Convolution(h, kernel=(3, 3), pad=(1, 1), num_filter=6, name="enc2")
    h = create("resize", h, axes=(2, 3), sizes=(8, 8), scales="2,2", mode="linear", coord="half_pixel", name="up")
    h = at.sym.Concat(h, h1, dim=1, num_args=2, name="skip")
    h = create("Deconvolution", h, kernel=(4, 4), stride=(2, 2), pad=(1, 1), num_filter=4, no_bias=False,
               name="deconv")
    h = create("resize", h, axes=(2, 3), sizes=(8, 8), mode="nearest", coord="asymmetric", nearest_mode="floor",
               name="down2")
    h = at.sym.FullyConnected(at.sym.Flatten(h, name="flat"), num_hidden=4, name="fc")
    return at.sym.SoftmaxOutput(h, name="softmax"), {"data": (B, 3, 8, 8), "softmax_label": (B,)}, 4


def generator():
    z = at.sym.Variable("data")
    h = create("Deconvolution", z, kernel=(4, 4), num_filter=8, no_bias=True, name="g1")  # 1x1 -> 4x4
    h = at.sym.Activation(h, act_type="relu", name="grelu")
    h = create("Deconvolution", h, kernel=(4, 4), stride=(2, 2), pad=(1, 1), num_filter=4, num_group=4,
               no_bias=False, name="g2")  # grouped, 4x4 -> 8x8
    h = create("Deconvolution", h, kernel=(3, 3), stride=(2, 2), pad=(1, 1), adj=(1, 1), num_filter=4,
               num_group=4, name="g3")  # depthwise, 8x8 -> 16x16
    h = at.sym.Convolution(h, kernel=(4, 4), stride=(4, 4), num_filter=2, name="d1")
    h = at.sym.FullyConnected(at.sym.Flatten(h, name="flat"), num_hidden=3, name="fc")
    return at.sym.SoftmaxOutput(h, name="softmax"), {"data": (B, 6, 1, 1), "softmax_label": (B,)}, 3


def pooling_and_scatter():
    x = at.sym.Variable("data")
    idx = at.sym.Variable("indices", attr={"__data__": "1"})  # fed, not trained
    table = at.sym.Variable("table", shape=(6, 5))
    am = create("argmax", x, axis=1, name="am")  # CLIP's pooling: the row of the largest id
    rows = create("take", table, am, name="pool")
    h = at.sym.FullyConnected(x, num_hidden=12, name="fc1")
    upd = at.sym.FullyConnected(x, num_hidden=8, name="fc2")
    h = create("ScatterND", at.sym.Reshape(h, shape=(B, 3, 4), name="r1"), idx,
               at.sym.Reshape(upd, shape=(B, 2, 4), name="r2"), name="scatter")
    h = at.sym.Concat(at.sym.Flatten(h, name="flat"), rows, dim=1, num_args=2, name="cat")
    h = at.sym.FullyConnected(h, num_hidden=3, name="fc")
    shapes = {"data": (B, 6), "indices": (B, 2, 2), "softmax_label": (B,)}
    return at.sym.SoftmaxOutput(h, name="softmax"), shapes, 3


MODELS = {"unet": unet, "generator": generator, "pooling_and_scatter": pooling_and_scatter}
OPS = {"unet": {"resize", "_backward_resize", "Deconvolution"},
       "generator": {"Deconvolution", "Convolution", "_backward_Convolution_weight"},
       "pooling_and_scatter": {"argmax", "ScatterND", "_backward_ScatterND_data", "gather_nd"}}


def _values(model, sym, shapes, classes):
    vals = values(sym, shapes, classes)
    if model == "pooling_and_scatter":  # distinct (batch row, slot) pairs per sample
        idx = np.stack([np.stack([np.full(2, b), np.random.default_rng(b).permutation(3)[:2]], axis=1)
                        for b in range(B)])
        vals["indices"] = idx.astype(np.float32)
    return vals


@pytest.mark.parametrize("factors", [[2], [3], [2, 2], [4]])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_random_plans_match_one_device(model, factors):
    sym, shapes, classes = MODELS[model]()
    vals = _values(model, sym, shapes, classes)
    low = lowered_training_graph(sym, shapes)
    ref = reference_step(sym, shapes, vals)
    rng = np.random.default_rng(17 * len(factors) + sum(factors))
    split = set()
    ops = {name: low.core.node(i)["op"] for i, name in enumerate(low.node_names)}
    for _ in range(6):
        plan = random_plan(low, factors, rng, input_shapes=shapes)
        res = run_multi_device(sym, plan.devices, vals, plan=plan)
        assert_same_step(res, ref, f"{model} under a random plan {factors}")
        split |= {ops[n] for n, row in plan.node_strategies.items() if any(v != "replicate" for v in row)}
    assert OPS[model] & split, f"{model}: none of {sorted(OPS[model])} ran split (split: {sorted(split)})"
