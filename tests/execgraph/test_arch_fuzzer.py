"""Architecture fuzzer: random small graphs assembled from the blocks real models use
(tests/execgraph/arch_blocks.py), each trained one step on random plans
(tests/execgraph/random_plans.py) at 2, 3, 4 and 8 devices in float64. The k-device step
must equal the 1-device step: outputs, every gradient (name for name, both ways), updated
params, optimizer states and BatchNorm statistics. The same graphs served (train=False: the
forward graph alone, planned and run partitioned) must give the 1-device outputs.

The CI sample runs a few graphs naming every block; the slow sweep runs many and prints how
many (graph, plan) pairs it checked and which ops ran split. A mutation test shows the sample
fails when one op's tiles ignore where they sit."""
import os
import sys

import numpy as np
import pytest

import autotile as at
from arch_blocks import net_values, random_net
from autotile.backend.multi_device import run_multi_device
from models import assert_same_step
from random_plans import lowered_training_graph, on_random_plans

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "autodiff"))
from fd import forward_outputs, numeric_grad  # noqa: E402

def assert_same_step_float64(res, ref, what):
    assert_same_step(res, ref, what, rtol=1e-9, atol=1e-11)


#: optimizers and their arguments: Adam's update g / (sqrt(v) + epsilon) turns a rounding
#: difference in a near-zero gradient into lr / epsilon times as much, so epsilon is large
OPTIMIZERS = (("sgd", None), ("momentum", None), ("adam", {"epsilon": 1e-4}))


def check_net(seed: int, devices, plans_per_count: int, blocks: int = 2, kinds=None):
    """Train random net `seed` (or one of the blocks `kinds`) with the optimizer `seed` picks,
    on `plans_per_count` random plans per device count, each against the 1-device step.
    Returns (how many (graph, plan) pairs were checked, the ops some plan split)."""
    sym, shapes, consts, names = random_net(seed, blocks, kinds)
    optimizer, args = OPTIMIZERS[seed % len(OPTIMIZERS)]
    vals = net_values(sym, shapes, consts, seed)
    ref = at.backend.run(sym, inputs={k: vals[k] for k in shapes}, optimizer=optimizer, optimizer_args=args,
                         params={k: v for k, v in vals.items() if k not in shapes}, train=True)
    low = lowered_training_graph(sym, shapes, optimizer=optimizer, optimizer_args=args)
    return on_random_plans(low, seed, devices, plans_per_count, np.random.default_rng(1000 + seed), ref,
                           lambda plan: run_multi_device(sym, plan.devices, vals, plan=plan, optimizer=optimizer,
                                                         optimizer_args=args),
                           f"seed {seed} ({'+'.join(names)}, {optimizer})", optimizer=optimizer, input_shapes=shapes)


#: the CI sample: every block kind, each image block next to another, both sequence stems,
#: GroupNorm and DropPath (20), T5 buckets and a tied LM head (75), auxiliary losses
CI_GRAPHS = [(0, ["inverted_residual", "regnet_y"]), (1, ["convnext", "swin"]), (2, ["unet", "inverted_residual"]),
             (20, ["unet", "convnext"]), (3, ["transformer", "tcn"]), (4, ["tcn", "albert"]), (8, ["transformer"]),
             (75, ["transformer"])]


@pytest.mark.parametrize("seed,kinds", CI_GRAPHS)
def test_architectures_train_on_k_devices_as_on_1(seed, kinds):
    """CI sample: one random plan per device count (2, 3, 4 and 8) for each graph."""
    checked, split = check_net(seed, devices=(2, 3, 4, 8), plans_per_count=1, kinds=kinds)
    assert checked == 4 and len(split) >= 10, split


def check_net_inference(seed: int, devices, plans_per_count: int, blocks: int = 2, kinds=None):
    """Serve random net `seed` (or the blocks `kinds`): its forward graph alone (train=False:
    Dropout is the identity, BatchNorm reads its moving statistics) on random plans of that
    graph, each against the 1-device forward. Returns (pairs checked, ops some plan split)."""
    from autotile.planner import lowered_training_graph as lowered_graph

    sym, shapes, consts, names = random_net(seed, blocks, kinds)
    vals = net_values(sym, shapes, consts, seed)
    ref = at.backend.run(sym, inputs={k: vals[k] for k in shapes},
                         params={k: v for k, v in vals.items() if k not in shapes}, train=False)
    _, _, in_shapes, low = lowered_graph(sym, shapes, train=False)

    def serve(plan):
        plan.train = False
        return run_multi_device(sym, plan.devices, vals, plan=plan, train=False)

    return on_random_plans(low, seed, devices, plans_per_count, np.random.default_rng(2000 + seed), ref, serve,
                           f"seed {seed} ({'+'.join(names)}) served", optimizer="", input_shapes=in_shapes)


@pytest.mark.parametrize("seed,kinds", CI_GRAPHS)
def test_architectures_serve_on_k_devices_as_on_1(seed, kinds):
    """CI sample of partitioned inference: one random plan of the forward graph per device count."""
    checked, split = check_net_inference(seed, devices=(2, 3, 4, 8), plans_per_count=1, kinds=kinds)
    assert checked == 4 and len(split) >= 5, split


def sweep(check, seeds, plans_per_count, what):
    """`check` (check_net or check_net_inference) over graphs `seeds` of 3 blocks each, on
    `plans_per_count` random plans at each of 2, 3, 4 and 8 devices; prints the coverage."""
    checked, split = 0, set()
    for seed in seeds:
        pairs, ops = check(seed, devices=(2, 3, 4, 8), plans_per_count=plans_per_count, blocks=3)
        checked, split = checked + pairs, split | ops
    print(f"architecture fuzzer{what}: {checked} (graph, plan) pairs checked over {len(seeds)} graphs; "
          f"{len(split)} ops ran split: {' '.join(sorted(split))}")
    assert checked == len(seeds) * 4 * plans_per_count


@pytest.mark.slow
def test_architecture_sweep():
    """Many random graphs (3 blocks each), three random plans at each of 2, 3, 4 and 8 devices."""
    sweep(check_net, range(60), 3, "")


@pytest.mark.slow
def test_architecture_inference_sweep():
    """Partitioned inference of many random graphs (3 blocks each), two random plans of the
    forward graph at each of 2, 3, 4 and 8 devices."""
    sweep(check_net_inference, range(40), 2, ", inference")


def _loss(sym, shapes):
    """The scalar loss whose gradient the heads hand back, from the forward outputs:
    SoftmaxOutput's summed cross-entropy (per sample or per token), LinearRegressionOutput's
    half squared error over the outputs per sample, plus each auxiliary MakeLoss output."""
    def loss(values):
        out, *aux = forward_outputs(sym, values)
        total = float(sum(np.sum(a) for a in aux))  # MakeLoss: the output is the loss
        for name in ("softmax_label", "lm_label"):  # class per sample, or per token
            if name in shapes:
                label = values[name].astype(np.int64)
                return total - float(np.sum(np.log(np.take_along_axis(out, label[..., None], axis=-1))))
        return total + 0.5 * float(np.sum((out - values["regress_label"]) ** 2)) / out[0].size

    return loss


@pytest.mark.parametrize("seed,kinds", CI_GRAPHS)
def test_one_device_step_matches_finite_differences(seed, kinds):
    """The oracle itself: the 1-device float64 gradients of each CI graph equal central
    differences of its loss (a few entries of every weight)."""
    sym, shapes, consts, _ = random_net(seed, kinds=kinds)
    vals = net_values(sym, shapes, consts, seed)
    ref = at.backend.run(sym, inputs={k: vals[k] for k in shapes},
                         params={k: v for k, v in vals.items() if k not in shapes}, train=True)
    loss = _loss(sym, shapes)
    for name in sorted(ref.grads):  # a few entries of each weight keep it within CI time
        idx, num = numeric_grad(loss, vals, name, eps=1e-6, max_entries=4)
        np.testing.assert_allclose(ref.grads[name].reshape(-1)[idx], num, rtol=1e-5, atol=1e-7,
                                   err_msg=f"gradient of '{name}'")


@pytest.mark.parametrize("op,seed,kinds", [("_backward_Pooling", 0, ["inverted_residual", "regnet_y"]),
                                           ("_backward_slice_axis", 3, ["transformer", "tcn"]),
                                           ("Dropout", 8, ["transformer"])])
def test_fuzzer_catches_a_tile_that_ignores_its_place(op, seed, kinds, monkeypatch):
    """The fuzzer's power: with one op's tile hook dropped (a tile computing as if it held the
    whole tensor, as the global-pooling gradient once did) a CI graph fails."""
    from autotile.ops import registry

    monkeypatch.setitem(registry.get(op).extra, "tile_attrs", lambda attrs, *boxes: attrs)
    with pytest.raises(AssertionError):
        check_net(seed, devices=(2, 3, 4, 8), plans_per_count=1, kinds=kinds)


@pytest.mark.parametrize("op,seed,kinds", [("Convolution", 1, ["convnext", "swin"]),
                                           ("FullyConnected", 2, ["unet", "inverted_residual"]),
                                           ("GroupNorm", 20, ["unet", "convnext"])])
def test_inference_fuzzer_catches_a_tile_that_ignores_its_place(op, seed, kinds, monkeypatch):
    """The same for the forward-only check: a forward op's tile hook dropped fails a CI graph."""
    from autotile.ops import registry

    monkeypatch.setitem(registry.get(op).extra, "tile_attrs", lambda attrs, *boxes: attrs)
    with pytest.raises(AssertionError):
        check_net_inference(seed, devices=(2, 3, 4, 8), plans_per_count=1, kinds=kinds)


def _two_variables_one_name():
    """data -> FC -> + mask -> tanh -> x mask -> FC, the mask created as two Variables of one
    name (as a block builder that calls Variable("mask") per use writes it)."""
    S = at.sym
    h = S.FullyConnected(S.Variable("data"), num_hidden=6, name="fc1")
    h = S.Activation(S.broadcast_add(h, S.Variable("mask", attr={"__data__": "1"}), name="add"), act_type="tanh",
                     name="act")
    h = S.broadcast_mul(h, S.Variable("mask", attr={"__data__": "1"}), name="mul")
    return S.SoftmaxOutput(S.FullyConnected(h, num_hidden=3, name="fc2"), name="softmax")


def test_two_variables_of_one_name_are_one_input_or_refused_by_name():
    """Found while writing the fuzzer's blocks. MXNet refuses duplicated argument names at
    bind; either way the answer must be consistent and name the input: one input (shape
    inference and the k-device step work, equal to 1 device) or an Error naming 'mask'."""
    sym = _two_variables_one_name()
    shapes = {"data": (4, 5), "mask": (1, 6), "softmax_label": (4,)}
    try:
        sym.infer_shape(**shapes)
    except at.Error as e:
        assert "'mask'" in str(e), str(e)
        # refused: then by name everywhere, the 1-device run and planning alike
        rng = np.random.default_rng(0)
        inputs = {"data": rng.standard_normal((4, 5)), "mask": rng.standard_normal((1, 6)),
                  "softmax_label": np.array([0.0, 1.0, 2.0, 0.0])}
        params = {"fc1_weight": rng.standard_normal((6, 5)), "fc1_bias": rng.standard_normal(6),
                  "fc2_weight": rng.standard_normal((3, 6)), "fc2_bias": rng.standard_normal(3)}
        for call in (lambda: at.backend.run(sym, inputs=inputs, params=params, train=True),
                     lambda: at.plan(sym, devices=2, shapes=shapes)):
            with pytest.raises(at.Error, match="two different Variables named 'mask'"):
                call()
        return
    rng = np.random.default_rng(0)
    inputs = {"data": rng.standard_normal((4, 5)), "mask": rng.standard_normal((1, 6)),
              "softmax_label": np.array([0.0, 1.0, 2.0, 0.0])}
    params = {"fc1_weight": rng.standard_normal((6, 5)), "fc1_bias": rng.standard_normal(6),
              "fc2_weight": rng.standard_normal((3, 6)), "fc2_bias": rng.standard_normal(3)}
    ref = at.backend.run(sym, inputs=inputs, params=params, train=True)
    assert_same_step_float64(run_multi_device(sym, 2, {**inputs, **params}), ref, "two Variables named 'mask'")
