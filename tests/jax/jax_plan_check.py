"""Run by tests/jax/test_jax_plan.py in a subprocess with 8 host devices (the device count
must be set before jax is imported): the Flax examples planned by ``autotile.jax.plan``, one
step each, against the plain jitted JAX step. Prints one JSON object by example name.

    XLA_FLAGS=--xla_force_host_platform_device_count=8 python tests/jax/jax_plan_check.py mlp transformer
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import autotile.jax  # noqa: E402

LR = 0.1


def reference(loss_fn):
    """loss, gradients and SGD-updated parameters of the plain jitted step (one device)."""
    @jax.jit
    def step(params, *batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, *batch)
        return loss, grads, jax.tree_util.tree_map(lambda p, g: p - LR * g, params, grads)

    return step


def check(name, fn, args, loss=None, **plan_kwargs):
    """The planned step of fn on args against the plain one: errors, structures, bytes."""
    planned = autotile.jax.plan(fn, *args, loss=loss, optimizer_args={"lr": LR}, **plan_kwargs)
    params = args[0]
    sharded = (jax.device_put(params, planned.shardings[0]),) + tuple(args[1:])
    loss_v, new = planned.step(*sharded)
    loss_fn = fn if loss is None else (lambda p, *a: autotile.jax.function_plan.training_function(fn, loss)(p, *a))
    ref_loss, ref_grads, ref_new = reference(loss_fn)(*args)
    leaves = jax.tree_util.tree_leaves
    # the step's gradients: its SGD update undone (p - new) / lr
    grads = jax.tree_util.tree_map(lambda p, n: (np.asarray(p) - np.asarray(n)) / LR, params, new)
    scale = max(float(jnp.max(jnp.abs(g))) for g in leaves(ref_grads))
    structure = [jax.tree_util.tree_structure(s) == jax.tree_util.tree_structure(a)
                 for s, a in zip(planned.shardings, args)]
    kinds = sorted({type(s).__name__ for s in leaves(planned.shardings)})
    on_mesh = [s.mesh.devices.size for s in leaves(planned.shardings)]
    # every sharding tiles its leaf as the plan does
    tiles_ok = all(tuple(s.shard_shape(np.shape(a) or (1,))) == planned.plan.tile_shape(n)
                   for s, a, n in zip(leaves(planned.shardings), leaves(list(args)), leaves(planned.names))
                   if n in planned.plan.tensor_tilings)
    return {"loss": float(loss_v), "ref_loss": float(ref_loss), "loss_shape": list(np.shape(loss_v)),
            "param_err": max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
                             for a, b in zip(leaves(new), leaves(ref_new))),
            "grad_err": max(float(np.max(np.abs(a - np.asarray(b)))) for a, b in zip(leaves(grads), leaves(ref_grads))),
            "grad_scale": scale, "new_structure_ok": jax.tree_util.tree_structure(new) ==
            jax.tree_util.tree_structure(params), "shardings_structure_ok": structure, "sharding_kinds": kinds,
            "mesh_sizes": sorted(set(on_mesh)), "tiles_ok": tiles_ok, "plan_bytes": float(planned.plan.comm_bytes),
            "compiled_bytes": float(planned.compiled_bytes(*args)),
            "global_nodes": planned.training_step.global_nodes, "n_params": len(leaves(params))}


def main(names):
    out = {}
    if "mlp" in names:
        import jax_flax_mlp

        loss_fn, params, x, y = jax_flax_mlp.build(batch=32, features=64)
        out["mlp"] = check("mlp", loss_fn, (params, x, y), mesh={"data": 2, "model": 4})
    if "transformer" in names:
        import jax_flax_transformer

        model, params, x, t = jax_flax_transformer.build(batch=4, seq=8, width=32)
        out["transformer"] = check("transformer", model, (params, x, t), loss="mse", mesh={"data": 2, "model": 4})
    if "cnn" in names:
        out["cnn"] = check("cnn", *small_cnn(), mesh={"data": 2, "model": 4})
    print(json.dumps(out))


def small_cnn():
    """(loss function, params, images, labels) of a Flax CNN: NHWC convolutions (SAME padding,
    a strided one, a grouped one), relu, global mean pooling, a dense classifier."""
    import flax.linen as nn
    import optax

    class CNN(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.relu(nn.Conv(8, (3, 3))(x))
            x = nn.relu(nn.Conv(16, (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))(x))
            x = nn.relu(nn.Conv(16, (3, 3), feature_group_count=4)(x))
            return nn.Dense(10)(x.mean(axis=(1, 2)))

    model = CNN()
    x = jax.random.normal(jax.random.PRNGKey(0), (8, 8, 8, 3))
    y = jax.random.randint(jax.random.PRNGKey(1), (8,), 0, 10)
    params = model.init(jax.random.PRNGKey(2), x)

    def loss_fn(params, x, y):
        return optax.softmax_cross_entropy_with_integer_labels(model.apply(params, x), y).mean()

    return loss_fn, (params, x, y)


if __name__ == "__main__":
    main(sys.argv[1:])
