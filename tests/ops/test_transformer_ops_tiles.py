"""The element-wise/masking ops of today's models (activation_ext, compare, logical, mod,
rounding, where, cumsum, trilu, tile_pad) inside training steps under random plans on
virtual devices: every tiling and strategy their TDL allows, with their tile hooks (cumsum's
partial sums, trilu's shifted diagonal, pad/tile source maps), must give the single-device
step's outputs, gradients and updates."""
import numpy as np
import pytest

import autotile as at
from test_elemwise_tiles import _check

pytest.importorskip("autotile._core")


def _masking_net():
    x = at.sym.Variable("data")
    w, v = at.sym.Variable("w", shape=(8,)), at.sym.Variable("v", shape=(1, 10))
    h = at.sym.gelu(at.sym.broadcast_mul(x, w, name="scale"), approximate="tanh", name="gelu")
    keep = at.sym.broadcast_greater(x, w, name="gt")
    h = at.sym.where(keep, h, at.sym.silu(x, name="silu"), name="sel")
    h = at.sym.cumsum(h, axis=1, name="cs")
    h = at.sym.trilu(h, upper=False, k=1, name="tril")
    h = at.sym.pad(h, pad_width=(0, 0, 1, 1), mode="reflect", name="pad")             # (8, 10)
    h = at.sym.elemwise_add(h, at.sym.tile(v, reps=(8, 1), name="tile"), name="add")
    c = at.sym.cumsum(at.sym.pad(x, pad_width=(2, 2, 0, 0), constant_value=0.5, name="padc"),
                      axis=0, exclusive=True, reverse=True, name="rcs")               # (12, 8)
    return at.sym.Group([h, c])


def _activation_net():
    x = at.sym.Variable("data")
    w = at.sym.Variable("w", shape=(8,))
    h = at.sym.broadcast_add(x, w, name="shift")
    a = at.sym.elemwise_add(at.sym.mish(h, name="mish"), at.sym.hard_swish(h, name="hswish"), name="a")
    b = at.sym.elemwise_mul(at.sym.erf(h, name="erf"), at.sym.hard_sigmoid(h, alpha=0.3, name="hsig"), name="b")
    r = at.sym.broadcast_mod(x, w, name="mod")
    m = at.sym.broadcast_logical_and(at.sym.broadcast_lesser(x, w, name="lt"),
                                     at.sym.logical_not(at.sym.isnan(x, name="nan"), name="not"), name="and")
    s = at.sym.elemwise_mul(at.sym.sign(x, name="sgn"), at.sym.floor(h, name="fl"), name="sf")
    return at.sym.Group([a, at.sym.elemwise_add(b, m, name="bm"), r, s])


@pytest.mark.parametrize("factors", [[2], [2, 2]])
def test_masking_network_on_tiles(factors):
    rng = np.random.default_rng(3)
    vals = {"data": rng.standard_normal((8, 8)).astype(np.float32),
            "w": rng.uniform(-0.5, 0.5, 8).astype(np.float32),
            "v": rng.standard_normal((1, 10)).astype(np.float32)}
    _check(_masking_net(), {"data": (8, 8)}, vals, factors, seed=20 + sum(factors), n_plans=10)


@pytest.mark.parametrize("factors", [[2], [2, 2]])
def test_activation_network_on_tiles(factors):
    rng = np.random.default_rng(4)
    vals = {"data": rng.uniform(-4.0, 4.0, (8, 8)).astype(np.float32),
            "w": rng.uniform(0.6, 1.5, 8).astype(np.float32)}
    _check(_activation_net(), {"data": (8, 8)}, vals, factors, seed=30 + sum(factors), n_plans=10)


@pytest.mark.parametrize("factors", [[3], [2, 2]])
def test_pad_tiles_that_read_no_data(factors):
    # 3 workers over the 12 padded columns: the first and last tiles are all padding
    x, w = at.sym.Variable("data"), at.sym.Variable("w", shape=(12,))
    net = at.sym.broadcast_mul(at.sym.pad(x, pad_width=(0, 0, 4, 4), constant_value=0.5, name="pw"), w, name="m")
    rng = np.random.default_rng(5)
    vals = {"data": rng.standard_normal((8, 4)).astype(np.float32), "w": rng.standard_normal(12).astype(np.float32)}
    _check(net, {"data": (8, 4)}, vals, factors, seed=40 + sum(factors), n_plans=6)
