"""``autotile.jax.plan``'s arguments on one device (in process: no host device count needed):
the named losses against their definitions in optax/NumPy, the step's loss and update against
``jax.value_and_grad``, parameters in a tuple, and the errors for calls the plan cannot take."""
import numpy as np
import pytest

import autotile as at

jax = pytest.importorskip("jax", reason="jax is not installed (pip install 'autotile[jax]')")
jnp = jax.numpy
import autotile.jax  # noqa: E402


def rng(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def model(params, x):
    w, b = params
    return jnp.tanh(x @ w + b)


PARAMS = (rng(5, 3), rng(3, seed=1))
X = rng(4, 5, seed=2)


@pytest.mark.parametrize("loss", ["mse", "cross_entropy"])
def test_named_losses_step_as_value_and_grad(loss):
    target = rng(4, 3, seed=3) if loss == "mse" else np.array([0, 2, 1, 2], np.int32)
    planned = autotile.jax.plan(model, PARAMS, X, target, loss=loss, devices=1, optimizer_args={"lr": 0.5})
    got_loss, new = planned.step(PARAMS, X, target)
    if loss == "mse":
        ref = lambda p: jnp.mean((model(p, X) - target) ** 2)  # noqa: E731
    else:
        ref = lambda p: -jnp.mean(jax.nn.log_softmax(model(p, X))[np.arange(4), target])  # noqa: E731
    want_loss, grads = jax.value_and_grad(ref)(PARAMS)
    assert np.shape(got_loss) == () and abs(float(got_loss) - float(want_loss)) < 1e-6
    assert isinstance(new, tuple) and len(new) == 2
    for p, g, n in zip(PARAMS, grads, new):
        np.testing.assert_allclose(np.asarray(n), p - 0.5 * np.asarray(g), rtol=1e-5, atol=1e-6)
    assert planned.names[0] == ("params.0", "params.1") and planned.names[1] == "x"


def test_step_refuses_other_structures_and_shapes():
    planned = autotile.jax.plan(model, PARAMS, X, rng(4, 3), loss="mse", devices=1)
    with pytest.raises(at.Error, match="argument 0 \\(params\\) has another structure"):
        planned.step({"w": PARAMS[0], "b": PARAMS[1]}, X, rng(4, 3))
    with pytest.raises(at.Error, match="'x' has shape \\(2, 5\\), but the plan was made for \\(4, 5\\)"):
        planned.step(PARAMS, X[:2], rng(2, 3))
    with pytest.raises(at.Error, match="takes 3 arguments"):
        planned.step(PARAMS, X)


def test_bad_plan_arguments_named():
    with pytest.raises(at.Error, match="loss must be a callable or one of"):
        autotile.jax.plan(model, PARAMS, X, X, loss="hinge", devices=1)
    with pytest.raises(at.Error, match="params_argnums 3 does not name an argument"):
        autotile.jax.plan(lambda p, x: jnp.sum(model(p, x)), PARAMS, X, params_argnums=3, devices=1)
    with pytest.raises(at.Error, match="returns 2 arrays"):
        autotile.jax.plan(lambda p, x: (jnp.sum(model(p, x)), 1.0), PARAMS, X, devices=1)
    with pytest.raises(at.Error, match="does not depend on any parameter|does not depend on its arguments"):
        autotile.jax.plan(lambda p, x: jnp.sum(x), PARAMS, X, devices=1)


def test_embedding_lookup_trains_as_value_and_grad():
    """jnp.take(table, ids, axis=0) (Flax nn.Embed's lookup) with integer token ids as data."""
    table, w = rng(11, 4), rng(4, 11, seed=1)
    ids = np.array([[1, 10, 3], [0, 3, 7]], np.int32)
    labels = np.array([[2, 5, 0], [9, 1, 3]], np.int32)

    def lm(params, ids):
        return jnp.take(params["embed"], ids, axis=0) @ params["out"]

    params = {"embed": table, "out": w}
    planned = autotile.jax.plan(lm, params, ids, labels, loss="cross_entropy", devices=1)
    assert "Embedding" in [n.op for n in planned.symbol.topo_nodes() if not n.is_variable]
    got_loss, new = planned.step(params, ids, labels)

    def ref(p):
        logp = jax.nn.log_softmax(lm(p, ids))
        return -jnp.mean(jnp.take_along_axis(logp, labels[..., None], axis=-1))

    want_loss, grads = jax.value_and_grad(ref)(params)
    assert abs(float(got_loss) - float(want_loss)) < 1e-6
    for k in params:
        np.testing.assert_allclose(np.asarray(new[k]), params[k] - 0.1 * np.asarray(grads[k]), rtol=1e-5, atol=1e-6)


def test_more_devices_than_jax_sees_refused_before_planning():
    n = jax.device_count() + 1
    with pytest.raises(at.Error, match=f"the plan is for {n} devices .* but JAX sees {n - 1}.*XLA_FLAGS"):
        autotile.jax.plan(model, PARAMS, X, rng(4, 3), loss="mse", devices=n)
    with pytest.raises(at.Error, match="mesh \\{'data': 1, 'model': %d\\}" % n):
        autotile.jax.plan(model, PARAMS, X, rng(4, 3), loss="mse", mesh={"data": 1, "model": n})


def test_flax_nnx_state_plans_and_steps():
    """A Flax NNX model, split into its graph and State: the State is the parameter pytree
    (leaves named by their path), and the step returns a State equal to value_and_grad + SGD."""
    nnx = pytest.importorskip("flax.nnx", reason="flax is not installed (pip install 'autotile[jax]')")

    class Net(nnx.Module):
        def __init__(self, rngs):
            self.l1, self.l2 = nnx.Linear(5, 8, rngs=rngs), nnx.Linear(8, 3, rngs=rngs)

        def __call__(self, x):
            return self.l2(nnx.relu(self.l1(x)))

    graphdef, state = nnx.split(Net(nnx.Rngs(0)))
    target = rng(4, 3, seed=3)

    def loss(state, x, y):
        return jnp.mean((nnx.merge(graphdef, state)(x) - y) ** 2)

    planned = autotile.jax.plan(loss, state, X, target, devices=1)
    assert "state.l1.kernel.value" in jax.tree_util.tree_leaves(planned.names[0])
    got_loss, new = planned.step(state, X, target)
    want_loss, grads = jax.value_and_grad(loss)(state, X, target)
    assert type(new) is type(state) and abs(float(got_loss) - float(want_loss)) < 1e-6
    leaves = jax.tree_util.tree_leaves
    for n, p, g in zip(leaves(new), leaves(state), leaves(grads)):
        np.testing.assert_allclose(np.asarray(n), np.asarray(p) - 0.1 * np.asarray(g), rtol=1e-5, atol=1e-6)
