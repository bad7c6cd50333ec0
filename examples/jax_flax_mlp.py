"""A Flax MLP planned by autotile from its jaxpr, trained one step on 8 host devices.

    python examples/jax_flax_mlp.py

``autotile.jax.plan`` reads the loss function's jaxpr (Dense, relu, the cross-entropy of
optax), plans the training step on a 2 x 4 mesh and returns the shardings of the parameters
and the batch (pytrees shaped like them) and the jitted step. The script checks the step
against the plain jitted JAX step (loss, gradients and updated parameters) and the compiled
program's collective bytes against the plan's.
"""
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")  # before jax is imported
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import flax.linen as nn  # noqa: E402
import optax  # noqa: E402

import autotile.jax  # noqa: E402


class MLP(nn.Module):
    hidden: int = 256
    classes: int = 16

    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Dense(self.hidden)(x))
        x = nn.relu(nn.Dense(self.hidden)(x))
        return nn.Dense(self.classes)(x)


def build(batch=64, features=128):
    """(loss function, params, x, y) of the example."""
    model = MLP()
    kx, ky, kp = jax.random.split(jax.random.PRNGKey(0), 3)
    x = jax.random.normal(kx, (batch, features), jnp.float32)
    y = jax.random.randint(ky, (batch,), 0, model.classes)
    params = model.init(kp, x)

    def loss_fn(params, x, y):
        logits = model.apply(params, x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    return loss_fn, params, x, y


def reference_step(loss_fn, lr=0.1):
    """The plain jitted step: loss, gradients, SGD update."""
    @jax.jit
    def step(params, *batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, *batch)
        return loss, grads, jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)

    return step


def main():
    loss_fn, params, x, y = build()
    planned = autotile.jax.plan(loss_fn, params, x, y, mesh={"data": 2, "model": 4})
    print(planned.plan.summary())
    params_sharded = jax.device_put(params, planned.shardings[0])
    loss, new_params = planned.step(params_sharded, x, y)
    ref_loss, _, ref_params = reference_step(loss_fn)(params, x, y)
    err = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(jax.tree_util.tree_leaves(new_params),
                                                               jax.tree_util.tree_leaves(ref_params)))
    compiled = planned.compiled_bytes(params, x, y)
    print(f"loss {float(loss):.6f} (plain JAX {float(ref_loss):.6f}), largest parameter difference {err:.2e}")
    print(f"bytes: planned {planned.plan.comm_bytes:,.0f}, compiled {compiled:,.0f}")


if __name__ == "__main__":
    main()
