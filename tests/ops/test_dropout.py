import numpy as np
import pytest

import autotile as at
from autotile.backend.reference import execute
from autotile.errors import Error
from autotile.symbol.symbol import Group, Symbol
from gradcheck import check_gradient, single_op
from tdl_interp import check_op_tdl


def _run(attrs, x, is_train, seed=0):
    node = single_op("Dropout", ["data"], **attrs).entries[0][0]
    outs, _, _ = execute(Symbol([(node, 0), (node, 1)]), {"data": x}, is_train=is_train,
                         rng=np.random.default_rng(seed), seed=seed)
    return outs


def test_inference_is_identity():
    x = np.random.default_rng(0).standard_normal((3, 4))
    out, mask = _run(dict(p=0.5), x, is_train=False)
    np.testing.assert_array_equal(out, x)
    np.testing.assert_array_equal(mask, np.ones_like(x))
    assert len(single_op("Dropout", ["data"], p=0.5).entries) == 1  # the mask is hidden


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_training_mask_statistics_and_scale(p):
    x = np.ones((400, 500), dtype=np.float32)
    out, mask = _run(dict(p=p), x, is_train=True)
    assert out.dtype == np.float32 and mask.dtype == np.float32
    values = set(np.unique(mask).tolist())
    assert values <= {0.0, np.float32(1 / (1 - p))}, values
    kept = float(np.mean(mask != 0))
    sigma = np.sqrt(p * (1 - p) / x.size)
    assert abs(kept - (1 - p)) < 5 * sigma, (kept, 1 - p)
    np.testing.assert_array_equal(out, x * mask)
    assert abs(float(out.mean()) - 1.0) < 5 * sigma / (1 - p)  # expectation preserved


def test_mode_always_is_active_in_inference_and_p0_p1():
    x = np.ones((50, 40))
    out, mask = _run(dict(p=0.5, mode="always"), x, is_train=False)
    assert 0.3 < float(np.mean(mask == 0)) < 0.7
    out0, _ = _run(dict(p=0.0), x, is_train=True)
    np.testing.assert_array_equal(out0, x)
    out1, mask1 = _run(dict(p=1.0), x, is_train=True)
    np.testing.assert_array_equal(out1, np.zeros_like(x))
    assert np.all(np.isfinite(mask1))


def test_axes_share_one_draw():
    x = np.ones((6, 40, 4))
    _, mask = _run(dict(p=0.5, axes=(0, 2)), x, is_train=True)
    assert mask.shape == x.shape
    np.testing.assert_array_equal(mask, np.broadcast_to(mask[:1, :, :1], x.shape))
    assert set(np.unique(mask[0, :, 0]).tolist()) == {0.0, 2.0}  # independent draws along axis 1


def test_draws_follow_the_step_seed():
    x = np.ones((20, 30))
    a = _run(dict(p=0.5), x, True, seed=1)[1]
    b = _run(dict(p=0.5), x, True, seed=1)[1]
    c = _run(dict(p=0.5), x, True, seed=2)[1]
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_backward_uses_the_forward_mask():
    """One execution computing the output and _backward_Dropout: dx is dy where the forward kept an element."""
    x = at.sym.Variable("data")
    dy = at.sym.Variable("dy")
    drop = at.sym.create("Dropout", x, p=0.5, name="drop")
    node = drop.entries[0][0]
    dx = at.sym.create("_backward_Dropout", dy, Symbol([(node, 1)]), name="drop_bwd")
    xv = np.random.default_rng(3).random((30, 20)) + 1.0  # never 0, so out == 0 exactly where dropped
    dyv = np.random.default_rng(4).standard_normal((30, 20))
    out, grad = execute(Group([drop, dx]), {"data": xv, "dy": dyv}, is_train=True,
                        rng=np.random.default_rng(5))[0]
    kept = out != 0
    assert 0 < kept.mean() < 1
    np.testing.assert_allclose(grad, np.where(kept, dyv * 2.0, 0.0), rtol=1e-12)
    np.testing.assert_allclose(out, np.where(kept, xv * 2.0, 0.0), rtol=1e-12)


def test_gradient_matches_finite_differences():
    x = np.random.default_rng(6).standard_normal((4, 5))
    check_gradient("Dropout", {"data": x}, dict(p=0.4))
    check_gradient("Dropout", {"data": x}, dict(p=0.4), is_train=False)


def test_tdl_is_elementwise():
    x = np.random.default_rng(7).standard_normal((3, 4))
    text = check_op_tdl("Dropout", [x], dict(p=0.5), samples=8)
    assert text == "data -> out, mask: out[i0, i1] = dropout(data[i0, i1]); mask[i0, i1] = bernoulli(data[i0, i1])"
    check_op_tdl("_backward_Dropout", [x, x], dict(p=0.5), samples=8)


@pytest.mark.parametrize("attrs, needle", [(dict(p=1.5), "'p'"), (dict(p=0.5, axes=(3,)), "axes")])
def test_bad_attributes_name_node(attrs, needle):
    sym = at.sym.create("Dropout", at.sym.Variable("data"), name="drop_bad", **attrs)
    with pytest.raises(Error, match=needle) as info:
        sym.infer_shape(data=(2, 3))
    assert "drop_bad" in str(info.value)


def test_planner_regions_cover_what_the_kernels_read():
    from tdl_regions import check_regions

    x = np.random.default_rng(10).standard_normal((4, 6))
    check_regions("_backward_Dropout", [x, x], dict(p=0.5))
    check_regions("Dropout", [x], dict(p=0.5), is_train=False)


def test_a_tile_draws_its_part_of_the_whole_mask():
    """Draws depend on the node's key and global indices only, so a tile (tile hook attributes)
    gets exactly its slice of the single-device mask: partitioned training drops the same units."""
    from autotile.ops import get, parse_attrs
    from autotile.ops.registry import KernelContext, node_key

    op = get("Dropout")
    x = np.ones((8, 6), np.float32)
    attrs = parse_attrs(op, {"p": "0.5"})
    whole = op.forward(attrs, [x], KernelContext(is_train=True, key=node_key("drop", 7)))[1]
    box = ((4, 2), (8, 5))
    tile_attrs = op.extra["tile_attrs"](attrs, [box], [box], [x.shape], [x.shape])
    part = op.forward(tile_attrs, [x[4:8, 2:5]], KernelContext(is_train=True, key=node_key("drop", 7)))[1]
    np.testing.assert_array_equal(part, whole[4:8, 2:5])
    assert 0 < (whole == 0).sum() < whole.size
