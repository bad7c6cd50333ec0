"""The jaxpr reader (autotile/jax/jaxpr_import.py and its rules): each function's jaxpr read
into an autotile Symbol computes what JAX computes (oracle: the function itself, run by JAX;
the Symbol run by autotile's NumPy backend on one device), and a primitive with no rule is an
Error naming it, its equation and its source line, raised before any plan."""
import numpy as np
import pytest

import autotile as at

jax = pytest.importorskip("jax", reason="jax is not installed (pip install 'autotile[jax]')")
jnp = jax.numpy

from autotile.jax.jaxpr_import import jaxpr_symbol  # noqa: E402


def run_symbol(fn, *args, param_args=(0,)):
    """fn(*args) through the reader and autotile's forward pass."""
    sym, info = jaxpr_symbol(fn, args, param_args)
    leaves = jax.tree_util.tree_leaves(list(args))
    values = {n: np.asarray(v).reshape(np.shape(v) or (1,)) for n, v in zip(info["names"], leaves)
              if n in set(sym.list_arguments())}
    params = {n: v for n, v in values.items() if n in info["param_names"]}
    inputs = {n: v for n, v in values.items() if n not in params}
    res = at.backend.run(sym, inputs=inputs, params={**sym.params, **params}, train=False)
    (out,) = res.outputs
    return np.asarray(out), sym


def rng(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


CASES = {
    # dot_general with batch dims in JAX's order and a transposed rhs (attention scores)
    "attention_scores": (lambda q, k: jnp.einsum("bqhd,bkhd->bhqk", q, k), (rng(2, 5, 3, 4), rng(2, 6, 3, 4, seed=1))),
    # contraction over two dims (an output projection of heads)
    "two_dim_contraction": (lambda w, x: jnp.einsum("bshd,hdo->bso", x, w), (rng(3, 4, 6), rng(2, 5, 3, 4, seed=1))),
    "softmax": (lambda x: jax.nn.softmax(x, axis=-1), (rng(4, 7),)),
    "softmax_axis1": (lambda x: jax.nn.softmax(x, axis=1), (rng(2, 5, 3),)),
    "layer_norm_gelu": (lambda x: jax.nn.gelu((x - x.mean(-1, keepdims=True)) *
                                              jax.lax.rsqrt(x.var(-1, keepdims=True) + 1e-5)), (rng(3, 8),)),
    "log_softmax_ce": (lambda x, y: -jnp.take_along_axis(jax.nn.log_softmax(x), y[:, None], axis=1).mean(),
                       (rng(6, 5), np.array([0, 4, 2, 1, 3, 4], np.int32))),
    "embedding": (lambda table, ids: jnp.take(table, ids, axis=0), (rng(10, 4), np.array([[1, 9], [0, 3]], np.int32))),
    "constant_index": (lambda x: x[:, 2] * 2.0, (rng(3, 5),)),
    "elementwise": (lambda x: jnp.where(x > 0.1, jnp.exp(-x) + jnp.tanh(x) ** 3, jnp.sqrt(jnp.abs(x)) / 3.0)
                    + jax.nn.sigmoid(x) - jnp.maximum(x, 0.5), (rng(4, 4),)),
    "conv_nhwc": (lambda w, x: jax.lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1)),
                                                            dimension_numbers=("NHWC", "HWIO", "NHWC")),
                  (rng(3, 3, 2, 4), rng(2, 6, 6, 2, seed=1))),
    "reductions_and_reshape": (lambda x: (x.reshape(4, 3, 2).max(axis=2).sum(axis=0) + x.T.min(axis=1)[:3]),
                               (rng(6, 4),)),
    "concat_slice": (lambda x: jnp.concatenate([x[:, :2], x[:, 3:]], axis=1) ** 2, (rng(3, 5),)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_read_symbol_computes_the_function(case):
    fn, args = CASES[case]
    got, _ = run_symbol(fn, *args)
    want = np.asarray(fn(*args))
    assert got.reshape(want.shape).shape == want.shape
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=2e-5, atol=2e-5)


def test_softmax_read_as_one_op():
    _, sym = run_symbol(CASES["softmax"][0], *CASES["softmax"][1])
    assert [n.op for n in sym.topo_nodes() if not n.is_variable] == ["softmax"]


def test_jit_and_custom_jvp_calls_are_inlined():
    inner = jax.jit(lambda x: jax.nn.relu(x) * 2.0)
    got, sym = run_symbol(lambda x: inner(x) + 1.0, rng(3, 3))
    np.testing.assert_allclose(got, np.maximum(rng(3, 3), 0) * 2 + 1, rtol=1e-6)
    assert [n.op for n in sym.topo_nodes() if not n.is_variable] == ["relu", "_mul_scalar", "_plus_scalar"]


def test_leaves_named_by_pytree_path_and_role():
    params = {"dense": {"kernel": rng(4, 2), "bias": rng(2)}}

    def loss(params, batch):
        return jnp.mean(batch["x"] @ params["dense"]["kernel"] + params["dense"]["bias"])

    _, info = jaxpr_symbol(loss, (params, {"x": rng(3, 4)}))
    assert info["param_names"] == ["params.dense.bias", "params.dense.kernel"]
    assert info["data_names"] == ["batch.x"] and info["out_shape"] == ()


def test_unsupported_primitive_named_with_its_source_line():
    def loss(w, x):
        return jnp.sum(jnp.cumsum(x @ w, axis=0))  # cumsum has no rule

    with pytest.raises(at.Error) as e:
        jaxpr_symbol(loss, (rng(4, 2), rng(3, 4)))
    msg = str(e.value)
    assert "JAX primitive 'cumsum'" in msg and "cumsum[" in msg
    assert "test_jaxpr_import.py" in msg and "supported:" in msg


def test_unsupported_gather_names_its_dimension_numbers():
    with pytest.raises(at.Error, match="JAX primitive 'gather'.*offset_dims"):
        jaxpr_symbol(lambda t, i: jnp.sum(t[i[:, 0], i[:, 1]]), (rng(5, 5), np.array([[0, 1], [2, 3]], np.int32)))


def test_non_scalar_loss_and_non_float_params_refused():
    import autotile.jax

    with pytest.raises(at.Error, match="not a scalar"):
        autotile.jax.plan(lambda w, x: x @ w, rng(4, 2), rng(3, 4), devices=1)
    with pytest.raises(at.Error, match="parameter 'w' holds int32"):
        autotile.jax.plan(lambda w, x: jnp.sum(x * w), np.ones(3, np.int32), rng(3), devices=1)


def test_docs_list_every_primitive_read():
    """docs/jax.md's table names every primitive the reader has a rule for, and no other."""
    import os
    import re

    from autotile.jax.jaxpr_rules import RULES

    text = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "jax.md")).read()
    table = text.split("| JAX primitive |")[1].split("\n\n")[0]
    named = {m for row in table.splitlines()[2:] for m in re.findall(r"`([a-z_0-9]+)`", row.split("|")[1])}
    assert set(RULES) - named == set()
    assert named - set(RULES) == set()
