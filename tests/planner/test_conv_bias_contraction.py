"""Convolution with a bias split along its input channels (issue 23, as FullyConnected's): the
bias is added once, by the tile holding the first input-channel slab, so the search may leave
the output partial and sum it after instead of keeping a wide-input layer's weight whole."""
import numpy as np
import pytest

import autotile as at

from .hand_plans import assert_plans_train_as_one_device, hand_plan


def _net(bias: str, channels_in=64, channels_out=4):
    """conv (3x3, pad 1) -> sum of squares; `bias`: fused (Convolution's own), none (no_bias)
    or separate (no_bias, then broadcast_add of a (1, Cout, 1, 1) bias: the same model in two ops)."""
    data = at.sym.Variable("data")
    conv = at.sym.Convolution(data, num_filter=channels_out, kernel=(3, 3), pad=(1, 1), name="conv",
                              no_bias=bias != "fused")
    if bias == "separate":
        conv = at.sym.broadcast_add(conv, at.sym.Variable("conv_bias", shape=(1, channels_out, 1, 1)), name="add")
    return at.sym.MakeLoss(at.sym.sum(at.sym.square(conv)), name="loss")


def _plan(bias: str, shape=(4, 64, 6, 6)):
    shapes = {"data": shape, **({"conv_bias": (1, 4, 1, 1)} if bias == "separate" else {})}
    return at.plan(_net(bias), devices=8, shapes=shapes)


def test_fused_bias_costs_what_a_separate_bias_add_costs():
    fused, separate, none = _plan("fused"), _plan("separate"), _plan("none")
    # a wide input (64 channels), 4 filters, small maps: the weight is the big tensor, so the
    # plan splits the contraction (ci) somewhere and sums partial outputs
    assert any("ci" in s for s in fused.node_strategies["conv"]), fused.node_strategies["conv"]
    assert fused.cut_costs == separate.cut_costs
    # the bias costs at most a ring all-reduce of its gradient (4 float32 on 8 devices)
    assert 0 <= fused.comm_bytes - none.comm_bytes <= 2 * (8 - 1) * 4 * 4


@pytest.mark.parametrize("row", [["ci", "ci", "ci"], ["n", "ci", "co"], ["ci", "y", "ci"]])
def test_conv_with_bias_split_along_input_channels_trains_as_one_device(row):
    net = _net("fused", channels_in=8, channels_out=6)
    rng = np.random.default_rng(0)
    shape = (4, 8, 6, 6)
    inputs = {"data": rng.standard_normal(shape)}
    params = {"conv_weight": rng.standard_normal((6, 8, 3, 3)), "conv_bias": rng.standard_normal(6)}
    plan = at.plan(net, devices=8, shapes={"data": shape})
    assert_plans_train_as_one_device(net, inputs, params, [plan, hand_plan(plan, {"conv": row})])
