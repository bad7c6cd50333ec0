"""``autotile.jax.plan``: plan a JAX loss function (or a model function and a loss) from its
jaxpr, and get back shardings shaped like its arguments and the planned, jitted training step.

    planned = autotile.jax.plan(loss_fn, params, x, y, mesh={"data": 2, "model": 4})
    params = jax.device_put(params, planned.shardings[0])    # a pytree like params
    loss, params = planned.step(params, x, y)                 # one SGD step, as planned
    planned.plan.comm_bytes, planned.compiled_bytes(params, x, y)
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from ..errors import Error

#: losses named by a string: (model output, target) -> scalar
NAMED_LOSSES = ("cross_entropy", "mse")


def _named_loss(name: str):
    import jax
    import jax.numpy as jnp

    if name == "cross_entropy":  # integer class labels on the last axis, mean over the rest
        def cross_entropy(logits, labels):
            logp = jax.nn.log_softmax(logits, axis=-1)
            picked = jnp.take_along_axis(logp, labels[..., None].astype(jnp.int32), axis=-1)
            return -jnp.mean(picked)

        return cross_entropy

    def mse(out, target):
        return jnp.mean((out - target) ** 2)

    return mse


def training_function(fn, loss):
    """The scalar function to differentiate: `fn` itself without `loss`; with one, ``loss(
    fn(*args[:-1]), args[-1])`` (the last argument is the target)."""
    if loss is None:
        return fn
    if isinstance(loss, str):
        if loss not in NAMED_LOSSES:
            raise Error(f"loss must be a callable or one of {NAMED_LOSSES}, got {loss!r}")
        loss = _named_loss(loss)
    elif not callable(loss):
        raise Error(f"loss must be a callable (outputs, target) -> scalar or one of {NAMED_LOSSES}, "
                    f"got {type(loss).__name__}")

    def with_loss(*args):
        return loss(fn(*args[:-1]), args[-1])

    return with_loss


class JaxPlan:
    """What :func:`plan` returns.

    - ``plan``: the autotile :class:`~autotile.planner.Plan` of the training step.
    - ``symbol``: the Symbol read from the jaxpr; ``names``: a pytree like the arguments
      holding each leaf's tensor name in the plan.
    - ``shardings``: a tuple, one entry per argument, each a pytree shaped like that argument
      of ``NamedSharding`` on ``mesh`` (the plan's layout of each parameter and input).
    - ``step(*args) -> (loss, new_params)``: one training step of the plan (autotile's
      gradients and optimizer update, every tensor laid out as planned), jitted on ``mesh``;
      ``new_params`` is shaped like the parameter argument. The loss is the gradient of the
      function as written (a mean stays a mean: no rescaling over the batch).
    - ``lower(*args)``: the step lowered (``.compile().as_text()`` is the partitioned program);
      ``compiled_bytes(*args)``: the bytes its collectives move, in ``plan.comm_bytes``'
      accounting.
    - ``training_step``: the underlying :class:`~autotile.jax.TrainingStep`.
    """

    def __init__(self, symbol, info, plan, step, param_args):
        import jax

        self.symbol, self.plan, self.training_step = symbol, plan, step
        self.mesh = step.mesh
        self._info, self._param_args = info, tuple(param_args)
        self._trees = info["trees"]
        names = info["names"]
        self._split = []
        k = 0
        for tree in self._trees:
            self._split.append((k, k + tree.num_leaves))
            k += tree.num_leaves
        self.names = tuple(jax.tree_util.tree_unflatten(t, names[a:b]) for t, (a, b) in zip(self._trees, self._split))
        replicated = jax.sharding.NamedSharding(self.mesh, jax.sharding.PartitionSpec())
        leaves = [step._sharding.get(n, replicated) for n in names]
        self.shardings = tuple(jax.tree_util.tree_unflatten(t, leaves[a:b]) for t, (a, b) in zip(self._trees,
                                                                                                   self._split))

    def _named(self, args):
        import jax

        if len(args) != len(self._trees):
            raise Error(f"the step takes {len(self._trees)} arguments, as the planned function did; got {len(args)}")
        params, inputs = {}, {}
        used = set(self.training_step.param_names) | set(self.training_step.aux_names) | \
            set(self.training_step.data_names)
        for i, (arg, tree, (a, b)) in enumerate(zip(args, self._trees, self._split)):
            leaves, got = jax.tree_util.tree_flatten(arg)
            if got != tree:
                raise Error(f"argument {i} ({self._info['arg_names'][i]}) has another structure than the planned "
                            f"one: {got} against {tree}")
            for name, leaf in zip(self._info["names"][a:b], leaves):
                if name not in used:
                    continue
                shape = tuple(np.shape(leaf))
                if (shape or (1,)) != tuple(self._info["shapes"][name]):
                    raise Error(f"'{name}' has shape {shape}, but the plan was made for "
                                f"{self._info['shapes'][name]}")
                value = jax.numpy.reshape(leaf, (1,)) if not shape else leaf
                (params if i in self._param_args else inputs)[name] = value
        return params, inputs

    def step(self, *args):
        """One training step: ``(loss, new_params)``, see the class."""
        import jax

        params, inputs = self._named(args)
        outputs, new = self.training_step(params, inputs)
        (loss,) = outputs.values()
        out_shape = self._info["out_shape"]
        loss = loss.reshape(out_shape)
        result = []
        for i in self._param_args:
            a, b = self._split[i]
            leaves = jax.tree_util.tree_leaves(args[i])
            updated = [new[n].reshape(np.shape(leaf)) if n in new else leaf
                       for n, leaf in zip(self._info["names"][a:b], leaves)]
            result.append(jax.tree_util.tree_unflatten(self._trees[i], updated))
        return loss, (result[0] if len(result) == 1 else tuple(result))

    __call__ = step

    def lower(self, *args):
        """The jitted step lowered for these arguments."""
        return self.training_step.lower(*self._named(args))

    def compiled_bytes(self, *args) -> float:
        """Bytes the compiled step's collectives move, in ``plan.comm_bytes``' accounting."""
        from .collectives import collective_bytes

        return collective_bytes(self.lower(*args).compile().as_text(), self.plan.devices)


def plan(fn, *example_args, loss=None, mesh=None, devices: Optional[int] = None, layout=None,
         params_argnums: Any = 0, optimizer: str = "sgd", optimizer_args: Optional[dict] = None,
         jax_devices: Optional[Sequence] = None, **plan_kwargs) -> JaxPlan:
    """Plan the training step of a JAX function on its example arguments.

    `fn` returns a scalar loss (differentiated with respect to the argument(s) at
    `params_argnums`, default the first: a pytree of float arrays such as Flax's variables),
    or, with `loss` given, the model's output: ``loss(fn(*args[:-1]), args[-1])`` is then the
    loss, the last argument the target (`loss` a callable, ``"cross_entropy"`` for integer
    labels or ``"mse"``). The function's jaxpr is read into autotile's graph
    (:mod:`autotile.jax.jaxpr_import`; a primitive with no rule is an Error naming it and
    its source line) and planned by :func:`autotile.plan` on `mesh` (``{"data": 2,
    "model": 4}``) or `devices` (default: every JAX device); `layout` fixes some tensors'
    layouts by leaf name (``{"x": {0: "data"}}``, names as in ``.names``); `plan_kwargs` go to
    :func:`autotile.plan` (``algorithm``, ``device_memory``...). `optimizer` and
    `optimizer_args` (``{"lr": 0.1}``) as in ``autotile.plan``/``backend.run`` (SGD, lr 0.1);
    `jax_devices` the JAX devices the step runs on (default ``jax.devices()``).
    Returns a :class:`JaxPlan` (``.shardings``, ``.step``, ``.plan``)."""
    import jax

    from ..planner import plan as at_plan
    from .jaxpr_import import jaxpr_symbol
    from .step import training_step

    if not example_args:
        raise Error("autotile.jax.plan needs the function's example arguments (the parameters first)")
    n_args = len(example_args)
    argnums = (params_argnums,) if isinstance(params_argnums, int) else tuple(params_argnums)
    bad = [a for a in argnums if not isinstance(a, int) or not 0 <= a < n_args - (loss is not None)]
    if bad or not argnums:
        raise Error(f"params_argnums {params_argnums!r} does not name an argument of the function "
                    f"(it takes {n_args - (loss is not None)})")
    available = len(jax_devices) if jax_devices is not None else jax.device_count()
    if mesh is None and devices is None:
        devices = available
    wanted = devices if mesh is None else None
    if isinstance(mesh, dict) and all(isinstance(v, (int, np.integer)) for v in mesh.values()):
        wanted = int(np.prod(list(mesh.values())))  # other meshes: autotile.plan names what is wrong
    if isinstance(wanted, (int, np.integer)) and wanted > available:
        raise Error(f"the plan is for {wanted} devices ({'mesh ' + repr(mesh) if mesh is not None else 'devices'}) but "
                    f"JAX sees {available}: on a host, set XLA_FLAGS=--xla_force_host_platform_device_count={wanted} "
                    "before jax is first imported")
    train_fn = training_function(fn, loss)
    arg_names = None
    if loss is not None:
        from .jaxpr_import import positional_names

        arg_names = positional_names(fn, n_args - 1) + ["target"]
    sym, info = jaxpr_symbol(train_fn, example_args, argnums, arg_names)
    if info["out_shape"] != ():
        what = "loss" if loss is not None else "function"
        hint = "" if loss is not None else " (pass a model function with loss=)"
        raise Error(f"the {what} returns shape {info['out_shape']}, not a scalar: autotile.jax.plan differentiates "
                    f"a scalar loss{hint}")
    if not info["param_names"]:
        raise Error("the loss does not depend on any parameter leaf: nothing to train")
    # data shapes only: the step takes the names given shapes as its inputs (the parameters'
    # shapes are their Variables')
    shapes = {n: info["shapes"][n] for n in info["data_names"]}
    plan_kwargs = dict(plan_kwargs)
    if mesh is not None:
        plan_kwargs["mesh"] = mesh
    else:
        plan_kwargs["devices"] = devices
    p = at_plan(sym, shapes=shapes, layout=layout, optimizer=optimizer, **plan_kwargs)
    step = training_step(sym, p, optimizer_args=optimizer_args, devices=jax_devices)
    return JaxPlan(sym, info, p, step, argnums)
