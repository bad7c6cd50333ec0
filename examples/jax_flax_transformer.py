"""A Flax Transformer block (pre-LayerNorm self-attention and a GELU MLP) planned by autotile
from its jaxpr and trained one step on 8 host devices.

    python examples/jax_flax_transformer.py

The model function and ``loss="mse"`` are given: ``autotile.jax.plan`` differentiates
``mse(block(params, x), target)``. The script checks the step against the plain jitted JAX
step and the compiled program's collective bytes against the plan's.
"""
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")  # before jax is imported
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import flax.linen as nn  # noqa: E402

import autotile.jax  # noqa: E402


class Block(nn.Module):
    heads: int = 4
    hidden: int = 256

    @nn.compact
    def __call__(self, x):
        h = nn.LayerNorm()(x)
        x = x + nn.MultiHeadDotProductAttention(num_heads=self.heads)(h, h)
        h = nn.LayerNorm()(x)
        h = nn.Dense(x.shape[-1])(nn.gelu(nn.Dense(self.hidden)(h)))
        return x + h


def build(batch=8, seq=16, width=64):
    """(model function, params, x, target) of the example."""
    block = Block()
    kx, kt, kp = jax.random.split(jax.random.PRNGKey(0), 3)
    x = jax.random.normal(kx, (batch, seq, width), jnp.float32)
    target = jax.random.normal(kt, (batch, seq, width), jnp.float32)
    params = block.init(kp, x)
    return block.apply, params, x, target


def mse(out, target):
    return jnp.mean((out - target) ** 2)


def main():
    from jax_flax_mlp import reference_step

    model, params, x, target = build()
    planned = autotile.jax.plan(model, params, x, target, loss="mse", mesh={"data": 2, "model": 4})
    print(planned.plan.summary())
    loss, new_params = planned.step(jax.device_put(params, planned.shardings[0]), x, target)
    ref_loss, _, ref_params = reference_step(lambda p, x, t: mse(model(p, x), t))(params, x, target)
    err = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(jax.tree_util.tree_leaves(new_params),
                                                               jax.tree_util.tree_leaves(ref_params)))
    compiled = planned.compiled_bytes(params, x, target)
    print(f"loss {float(loss):.6f} (plain JAX {float(ref_loss):.6f}), largest parameter difference {err:.2e}")
    print(f"bytes: planned {planned.plan.comm_bytes:,.0f}, compiled {compiled:,.0f}")


if __name__ == "__main__":
    main()
