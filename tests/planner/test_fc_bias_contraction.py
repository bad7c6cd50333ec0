"""FullyConnected with a bias split along its contraction (issue 23): the bias is added once,
by the tile holding the first k slab, so the search may leave the output partial and sum it
after, as XLA does, instead of keeping the small layer's weight whole."""
import numpy as np
import pytest

import autotile as at

from .hand_plans import assert_plans_train_as_one_device, hand_plan

SHAPES = {"data": (256, 784), "softmax_label": (256,)}


def _readme_mlp(bias: str = "fused"):
    """The README MLP; `bias`: fused (FullyConnected's own), none (no_bias) or separate (no_bias
    FullyConnected, then broadcast_add of a (1, 10) bias: the decomposition into two ops)."""
    data = at.sym.Variable("data")
    fc1 = at.sym.FullyConnected(data, num_hidden=512, name="fc1")
    act = at.sym.Activation(fc1, act_type="relu", name="relu1")
    fc2 = at.sym.FullyConnected(act, num_hidden=10, name="fc2", no_bias=bias != "fused")
    if bias == "separate":
        fc2 = at.sym.broadcast_add(fc2, at.sym.Variable("fc2_bias", shape=(1, 10)), name="fc2_add")
    return at.sym.SoftmaxOutput(fc2, name="softmax")


def _plan(bias: str):
    shapes = dict(SHAPES, **({"fc2_bias": (1, 10)} if bias == "separate" else {}))
    return at.plan(_readme_mlp(bias), devices=8, shapes=shapes)


def test_readme_mlp_splits_fc2_along_its_contraction():
    fused, separate, none = _plan("fused"), _plan("separate"), _plan("none")
    # fc2 runs on k slabs in every cut (a reduction strategy, its output partial)
    assert fused.node_strategies["fc2"] == ["k0", "k0", "k0"]
    # the fused op costs what the same model with the bias add as its own op costs, cut by cut
    assert fused.cut_costs == separate.cut_costs
    # ... which is the no-bias plan plus moving the bias gradient: at most a ring all-reduce
    # of its 10 float32 on 8 devices (2 (p - 1) x 40 bytes received over all devices)
    extra = fused.comm_bytes - none.comm_bytes
    assert 0 <= extra <= 2 * (8 - 1) * 10 * 4
    assert none.comm_bytes == 143_360  # the plan the issue quotes (was 674,192 with the bias)



@pytest.mark.parametrize("data_shape,flatten,row", [
    ((12, 8), True, ["k0", "k0", "k0"]),      # 8 slabs of one column each
    ((12, 4, 3), True, ["n", "k0", "k0"]),    # flattened (4, 3): slabs of data's rows
    ((6, 2, 8), False, ["k", "n0", "k"]),     # leading dims kept, k the last dim
])
def test_fc_with_bias_split_along_contraction_trains_as_one_device(data_shape, flatten, row):
    data = at.sym.Variable("data")
    fc = at.sym.FullyConnected(data, num_hidden=5, flatten=flatten, name="fc")
    net = at.sym.MakeLoss(at.sym.sum(at.sym.square(fc)), name="loss")
    rng = np.random.default_rng(0)
    k = int(np.prod(data_shape[1:])) if flatten else data_shape[-1]
    inputs = {"data": rng.standard_normal(data_shape)}
    params = {"fc_weight": rng.standard_normal((5, k)), "fc_bias": rng.standard_normal(5)}
    plan = at.plan(net, devices=8, shapes={"data": data_shape})
    assert_plans_train_as_one_device(net, inputs, params, [plan, hand_plan(plan, {"fc": row})])
