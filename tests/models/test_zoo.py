"""Model zoo: shapes infer with no arguments, parameter counts match published figures and
the weight sizes of Tofu Table 2, big models build fast."""
import time

import numpy as np
import pytest

import autotile as at
from autotile import models


def _param_count(sym, skip=lambda name: False):
    """Number of trainable weights (arguments that are not data/label) of `sym`."""
    arg_shapes, _, _ = sym.infer_shape()
    return sum(int(np.prod(s)) for n, s in zip(sym.list_arguments(), arg_shapes)
               if n != "data" and not n.endswith("label") and not skip(n))


@pytest.mark.parametrize("name,out_shape", [
    ("mlp", (4, 8192)), ("mlp-5-300", (4, 300)), ("alexnet", (4, 1000)), ("vgg11", (4, 1000)),
    ("vgg13", (4, 1000)), ("vgg16", (4, 1000)), ("vgg19", (4, 1000)), ("vgg16_bn", (4, 1000)),
    ("resnet50", (4, 1000)), ("wresnet-50-2", (4, 1000)), ("rnn-2-64", (20 * 4, 10000)),
])
def test_zoo_shapes_infer_without_arguments(name, out_shape):
    sym = models.get(name, batch=4)
    arg_shapes, out_shapes, aux_shapes = sym.infer_shape()
    assert out_shapes == [out_shape]
    shapes = dict(zip(sym.list_arguments(), arg_shapes))
    assert shapes["softmax_label"] == (out_shape[0],)


def test_builders_take_the_batch():
    assert models.mlp(400, layers=5, hidden=300).infer_shape()[1] == [(400, 300)]
    assert models.alexnet(2).infer_shape()[1] == [(2, 1000)]
    assert models.vgg(11, 3, batch_norm=True).infer_shape()[1] == [(3, 1000)]
    assert models.wresnet(50, 1, 2).infer_shape()[1] == [(2, 1000)]
    sym = models.rnn(2, 16, steps=5, batch=3, vocab=50)
    args = dict(zip(sym.list_arguments(), sym.infer_shape()[0]))
    assert args["data"] == (5, 3) and sym.infer_shape()[1] == [(15, 50)]
    assert args["lstm1_i2h_weight"] == (64, 16) and args["lstm1_h2h_bias"] == (64,)


def test_soybean_mlp_weight_size():
    # Soybean Sec 2.2: 5 layers of 300 units, batch 400: weights 300x300x5x4B = 1.8 MB,
    # forward activations 400x300x5x4B = 2.4 MB.
    sym = models.mlp(400, layers=5, hidden=300, no_bias=True)
    assert _param_count(sym) * 4 == 1.8e6
    internals = sym.get_internals()
    shapes = dict(zip(internals.list_outputs(), internals.infer_shape()[1]))
    acts = sum(int(np.prod(s)) for n, s in shapes.items() if n.startswith("fc") and n.endswith("_output"))
    assert acts * 4 == 2.4e6


def test_alexnet_parameter_count():
    # Layer by layer (weights + biases): conv1 96x3x11x11, conv2 256x96x5x5, conv3 384x256x3x3,
    # conv4 384x384x3x3, conv5 256x384x3x3, fc7 4096x4096, fc8 1000x4096.
    convs = 96 * 3 * 121 + 96 + 256 * 96 * 25 + 256 + 384 * 256 * 9 + 384 + 384 * 384 * 9 + 384 + 256 * 384 * 9 + 256
    tail = 4096 * 4096 + 4096 + 1000 * 4096 + 1000
    # MXNet's AlexNet takes 224x224 images: pool5 is 256x5x5, so fc6 has 6400 inputs.
    assert _param_count(models.alexnet(1)) == convs + 6400 * 4096 + 4096 + tail  # 50.8M
    # With the original 227x227 input pool5 is 256x6x6 (9216 inputs): 62.4M, the "~61M"
    # usually quoted (torchvision's 64-filter variant has 61.1M; Krizhevsky et al. say 60M).
    count = _param_count(models.alexnet(1, image=227))
    assert count == convs + 9216 * 4096 + 4096 + tail
    assert abs(count / 61e6 - 1) < 0.025


@pytest.mark.parametrize("depth,count", [(11, 132_863_336), (13, 133_047_848), (16, 138_357_544),
                                         (19, 143_667_240)])
def test_vgg_parameter_counts(depth, count):
    # Simonyan & Zisserman's configurations A, B, D, E (figures as torchvision/Gluon report them).
    assert _param_count(models.vgg(depth, 1)) == count


def test_vgg16_bn_adds_gamma_and_beta_per_conv():
    # Gluon's vgg16_bn: 138,365,992 trainable (its BN beta/gamma: 2 x 4224 channels).
    assert _param_count(models.vgg(16, 1, batch_norm=True)) == 138_365_992


def test_resnet50_parameter_count():
    # Pre-activation ResNet-50 (v2): MXNet Gluon's resnet50_v2 has 25,549,480 trainable
    # weights; ours has 6 more: MXNet's symbolic bn_data keeps gamma/beta as arguments (Gluon's
    # data BatchNorm has scale=center=False). ~25.5M, the usual ResNet-50 figure.
    count = _param_count(models.wresnet(50, 1, 1))
    assert count == 25_549_480 + 6
    assert abs(count / 25.5e6 - 1) < 0.01


# Tofu Table 2, "Total weight tensor sizes (GB)".
TOFU_WRESNET = {(50, 4): 4.2, (101, 4): 7.8, (152, 4): 10.5, (50, 6): 9.6, (101, 6): 17.1, (152, 6): 23.4,
                (50, 8): 17.1, (101, 8): 30.6, (152, 8): 41.7, (50, 10): 26.7, (101, 10): 47.7, (152, 10): 65.1}
TOFU_RNN = {(6, 4): 8.4, (8, 4): 11.4, (10, 4): 14.4, (6, 6): 18.6, (8, 6): 28.5, (10, 6): 32.1,
            (6, 8): 33.0, (8, 8): 45.3, (10, 8): 57.0}


def _table2_size(weights: int) -> float:
    """Table 2 counts, we find, 3 x the fp32 weights in GiB: Sec 7.1 says a model of weight size
    W needs 3W for weight, gradient and optimizer history, and 3 x 4 B x weights / 2^30
    reproduces the WResNet column to 2% (weights alone in GB would be 2.8x too small, and 3W
    in decimal GB 6-10% too large)."""
    return 3 * 4 * weights / 2 ** 30


@pytest.mark.parametrize("depth,width", sorted(TOFU_WRESNET))
def test_wresnet_weight_size_matches_tofu_table2(depth, width):
    ours = _table2_size(_param_count(models.wresnet(depth, width, 1)))
    assert abs(ours / TOFU_WRESNET[(depth, width)] - 1) < 0.025, ours


@pytest.mark.parametrize("layers,hidden_k", sorted(TOFU_RNN))
def test_rnn_weight_size_matches_tofu_table2(layers, hidden_k):
    # Only the LSTM weights (8H^2 + 8H per layer) are counted: the embedding and softmax
    # layers (vocab x H each) are not in Table 2 (with the 800K vocabulary of Tofu's [20]
    # they would dwarf it). Weights do not depend on steps, so 2 steps keep this fast.
    sym = models.rnn(layers, hidden_k * 1024, steps=2, batch=1, vocab=10)
    lstm = _param_count(sym, skip=lambda n: not n.startswith("lstm"))
    h = hidden_k * 1024
    assert lstm == layers * (8 * h * h + 8 * h)
    # Table 2's RNN column is not exactly linear in L (6K: 18.6, 28.5, 32.1 for L = 6, 8, 10,
    # while each layer adds the same weights), so no single rule reproduces all of it; our
    # 3W-in-GiB agrees within 10% everywhere (per-layer increments agree within 2% for 4K, 8K).
    ratio = _table2_size(lstm) / TOFU_RNN[(layers, hidden_k)]
    assert 0.9 < ratio < 1.1, ratio


def test_big_models_build_fast_without_arrays():
    for name in ("wresnet-152-10", "rnn-10-8k"):
        t0 = time.perf_counter()
        sym = models.get(name, batch=8)
        elapsed = time.perf_counter() - t0
        assert elapsed < 2.0, (name, elapsed)
        assert not sym.params  # nothing allocated
    assert len([n for n in sym.topo_nodes() if n.attrs.get("__timestep__") == "19"]) > 0


def test_rnn_timesteps_share_weights_and_are_marked():
    sym = models.rnn(2, 8, steps=4, batch=2, vocab=7)
    nodes = [n for n in sym.topo_nodes() if not n.is_variable and "__rnn_cell__" in n.attrs]
    cells = {(n.attrs["__rnn_cell__"], n.attrs["__timestep__"]) for n in nodes}
    assert cells == {(f"lstm{l}", str(t)) for l in range(2) for t in range(4)}
    # one set of weights per layer, used by every timestep's i2h (and h2h from t=1)
    i2h = [n for n in nodes if n.name.endswith("_i2h") and n.attrs["__rnn_cell__"] == "lstm1"]
    assert len(i2h) == 4 and len({n.inputs[1][0].name for n in i2h}) == 1
    assert sorted(a for a in sym.list_arguments() if a.startswith("lstm")) == sorted(
        f"lstm{l}_{w}" for l in range(2) for w in ("i2h_weight", "i2h_bias", "h2h_weight", "h2h_bias"))


def test_unknown_names_and_bad_arguments_raise():
    with pytest.raises(at.Error, match="unknown model 'resnext'.*wresnet-D-W"):
        models.get("resnext")
    with pytest.raises(at.Error, match="depth must be one of"):
        models.get("vgg17")
    with pytest.raises(at.Error, match="depth must be one of"):
        models.get("wresnet-34-2")
    with pytest.raises(at.Error, match="batch must be a positive integer"):
        models.get("alexnet", batch=0)


def test_zoo_names_reach_the_public_api():
    sym = at.model_input.as_symbol("rnn-2-1k", batch=2)
    assert sym.infer_shape()[1] == [(40, 10000)]
