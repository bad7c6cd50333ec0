"""A parameter read through a slice moves only the slice's gradient (issue 23): a table of
256 positions of which a sequence reads 16. The slice of the replicated table, the gradient
padded back to the table's shape and the table's update may run whole on every device (as
XLA runs them), so a plan no longer shards the update and all-gathers the whole table."""
import numpy as np
import pytest

import autotile as at

B, S, P, D = 8, 16, 256, 32  # batch, sequence, table rows, width
DEVICES = 8


def _model():
    """data (B, S, D) + the first S rows of a learned (P, D) table, squared (the loss)."""
    x = at.sym.Variable("data")
    table = at.sym.Variable("pos_weight", shape=(P, D))
    rows = at.sym.slice_axis(table, axis=0, begin=0, end=S, name="rows")
    y = at.sym.broadcast_add(x, at.sym.reshape(rows, shape=(1, S, D), name="expand"), name="add")
    return at.sym.MakeLoss(at.sym.square(y, name="sq"), name="loss")


def test_data_parallelism_all_reduces_the_used_rows_gradient_only():
    plan = at.plan(_model(), devices=DEVICES, shapes={"data": (B, S, D)}, algorithm="data")
    # a ring all-reduce of the S x D float32 gradient, bytes received summed over devices;
    # before: 258,048 (the slice gathered, its gradient all-reduced, the whole updated table gathered)
    assert plan.comm_bytes == 2 * (DEVICES - 1) * S * D * 4  # 28,672
    assert plan.tiling("pos_weight_update_output") == "replicate replicate replicate"


def test_a_replicated_table_moves_no_more_than_its_used_rows():
    # the table held replicated, as an engine given the parameter layouts keeps it: the search
    # splits the sequence, each device computes 2 rows' gradient and gathers the other 14
    plan = at.plan(_model(), devices=DEVICES, shapes={"data": (B, S, D)}, layout={"pos_weight": {}})
    assert plan.comm_bytes == (DEVICES - 1) * S * D * 4  # 14,336 (was 229,376: the whole table gathered)


@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam"])
@pytest.mark.parametrize("algorithm", ["data", "tofu"])
def test_the_step_equals_one_device(optimizer, algorithm):
    net = _model()
    rng = np.random.default_rng(1)
    inputs = {"data": rng.standard_normal((B, S, D))}
    params = {"pos_weight": rng.standard_normal((P, D))}
    args = {"optimizer": optimizer, "optimizer_args": {"lr": 0.1, "wd": 0.01}}
    want = at.backend.run(net, devices=1, inputs=inputs, params=params, train=True, **args)
    layout = {"pos_weight": {}} if algorithm == "tofu" else None
    plan = at.plan(net, devices=DEVICES, shapes={"data": (B, S, D)}, algorithm=algorithm, layout=layout,
                   optimizer=optimizer)
    assert "replicate" in plan.node_strategies["pos_weight_update"]
    got = at.backend.run(net, devices=DEVICES, inputs=inputs, params=params, train=True, plan=plan, **args)
    np.testing.assert_allclose(got.outputs[0], want.outputs[0], rtol=1e-12)
    for what in ("grads", "params", "states"):
        g, w = getattr(got, what) or {}, getattr(want, what) or {}
        assert set(g) == set(w), what
        for name in w:
            np.testing.assert_allclose(g[name], w[name], rtol=1e-12, atol=1e-12, err_msg=f"{what}[{name}]")
