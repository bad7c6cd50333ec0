"""The planned training step in JAX: the training graph autotile plans (forward, loss,
backward, optimizer update) traced op by op with the registry kernels on ``jax.numpy``,
every tensor constrained to the plan's layout (``jax.lax.with_sharding_constraint``), jitted
on a ``jax.sharding.Mesh`` built from the plan."""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np

from ..errors import Error


def _jax():
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as e:
        raise Error(f"autotile.jax needs jax (pip install 'autotile[jax]'): {e}") from None
    return jax, jnp


def mesh_of(plan, granularity: Optional[str] = None, devices=None):
    """``(jax.sharding.Mesh, layout)`` of `plan`: its mesh over the first ``plan.devices`` JAX
    devices (or `devices`) in autotile's device order, and ``plan.to_jax(tensors="all")``."""
    jax, _ = _jax()
    layout = plan.to_jax(granularity=granularity, tensors="all")
    devs = list(jax.devices() if devices is None else devices)
    if len(devs) < plan.devices:
        raise Error(f"the plan is for {plan.devices} devices but JAX sees {len(devs)} (on a host: set "
                    f"XLA_FLAGS=--xla_force_host_platform_device_count={plan.devices} before importing jax)")
    grid = np.array(devs[:plan.devices], dtype=object).reshape(layout["mesh"]["shape"])
    return jax.sharding.Mesh(grid, tuple(layout["mesh"]["axis_names"])), layout


def _spec(entries):
    from jax.sharding import PartitionSpec

    return PartitionSpec(*[tuple(e) if isinstance(e, list) else e for e in entries])


def _kernel(op_name: str, opdef):
    """The kernel the step runs for `op_name`: the JAX table, the array-module-generic
    kernels (given ``ctx.xp = jax.numpy``), else the registry's own NumPy kernel on traced
    arrays seen through NumPy's dispatch protocols (jax/duck.py)."""
    from ..backend.gpu_kernels import KERNELS as GENERIC
    from .duck import run_kernel
    from .kernels import KERNELS

    kernel = KERNELS.get(op_name) or GENERIC.get(op_name)
    if kernel is not None or opdef.forward is None:
        return kernel
    return lambda attrs, inputs, ctx: run_kernel(opdef.forward, attrs, inputs, ctx)


class TrainingStep:
    """``step(params, inputs) -> (outputs, new_params)``: one jitted training step of the
    planned graph. ``params`` holds the trainable parameters (and auxiliary states and
    constants, which default to the model's own ``sym.params``) by name,
    ``inputs`` the data and labels; optimizer states start at zero and head gradients of
    non-loss outputs at one, as in ``backend.run(..., train=True)`` without ``states=`` (the
    step returns parameters, not optimizer states: with a stateful optimizer each call is a
    first step). ``outputs`` are the
    forward outputs by name in the model's output order, ``new_params`` the updated
    parameters. ``step.lower(params, inputs)`` lowers it as any jitted function (then
    ``.compile().as_text()`` is the partitioned program). ``step.mesh`` and ``step.layout``
    are the mesh and ``plan.to_jax(tensors="all")``; ``step.constrained`` names the tensors
    given a sharding constraint (all but those the plan leaves partial and those in
    `unconstrained`, whose layout XLA then chooses)."""

    def __init__(self, sym, plan, optimizer_args=None, granularity=None, devices=None, unconstrained=()):
        jax, _ = _jax()
        from ..autodiff import training_graph
        from ..symbol.infer import infer_entry_shapes

        if not plan.train:
            raise Error("autotile.jax.training_step needs a training plan (this plan was made with train=False)")
        arguments = set(sym.list_arguments())
        self.tg = tg = training_graph(sym, optimizer=plan.optimizer, optimizer_args=optimizer_args,
                                      shapes={k: v for k, v in plan.input_shapes.items() if k in arguments})
        self.plan, self.sym = plan, sym
        self.mesh, self.layout = mesh_of(plan, granularity, devices)
        specs = self.layout["specs"]
        free = self._unconstrained(unconstrained)
        self._sharding = {n: jax.sharding.NamedSharding(self.mesh, _spec(s)) for n, s in specs.items()
                          if n not in free}
        graph_inputs = tg.symbol.list_inputs()
        shapes = dict(plan.input_shapes)
        entry = infer_entry_shapes(tg.symbol, {k: v for k, v in shapes.items() if k in set(graph_inputs)})
        names = [n for n in tg.symbol.topo_nodes() if not n.is_variable]
        unplanned = [o for n in names for o in n.output_names() if o not in plan.tensor_tilings]
        if unplanned:
            raise Error(f"plan has no layout for tensor '{unplanned[0]}' of the training graph: the plan was made "
                        "for another model or optimizer")
        self.param_names = list(tg.param_names)
        self.data_names = [n for n in graph_inputs if n in plan.input_shapes and n not in tg.head_grad_names]
        self.aux_names = [n for n in graph_inputs if n not in set(self.param_names) | set(self.data_names)
                          | set(tg.state_names) | set(tg.head_grad_names)]
        self.output_names = list(tg.output_names)
        self.constrained = sorted(self._sharding)
        self._entry_shape = entry
        in_sh = ({n: self._sharding[n] for n in self.param_names + self.aux_names if n in self._sharding},
                 {n: self._sharding[n] for n in self.data_names if n in self._sharding})
        self._jitted = jax.jit(self._trace, in_shardings=self._full(in_sh))

    def _unconstrained(self, names):
        """Tensor names to leave to XLA: `names`, with "gradients" standing for the parameter
        gradients the optimizer update reads."""
        tg = self.tg
        names = [names] if isinstance(names, str) else list(names or ())
        out = set()
        n_fwd, n_p = len(tg.output_names), len(tg.param_names)
        for name in names:
            if name == "gradients":
                out |= {n.output_names()[i] for n, i in tg.symbol.entries[n_fwd:n_fwd + n_p]}
            elif name in self.plan.tensor_tilings:
                out.add(name)
            else:
                raise Error(f"unconstrained names '{name}', which is not a tensor of the plan (nor 'gradients')")
        return out

    def _full(self, in_sh):
        """in_shardings for every name the step takes (None: left to XLA)."""
        params = {n: in_sh[0].get(n) for n in self.param_names + self.aux_names}
        inputs = {n: in_sh[1].get(n) for n in self.data_names}
        return (params, inputs)

    def _constrain(self, name, value):
        import jax

        sh = self._sharding.get(name)
        return value if sh is None else jax.lax.with_sharding_constraint(value, sh)

    def _trace(self, params, inputs):
        import jax.numpy as jnp

        from ..ops.registry import KernelContext, node_key

        tg = self.tg
        env, values = {}, {**params, **inputs}
        for node in tg.symbol.topo_nodes():
            key = (id(node), 0)
            if node.is_variable:
                name = node.name
                if name in values:
                    v = values[name]
                elif name in tg.state_of:  # optimizer state: zero at the first step
                    v = jnp.zeros_like(values[tg.state_of[name]])
                elif name in tg.head_grad_names:  # gradient of a non-loss output: ones
                    v = jnp.ones(self._entry_shape[key], jnp.float32)
                else:
                    raise Error(f"missing input '{name}' of the training step: pass it in params or inputs")
                env[key] = self._constrain(name, v)
                continue
            op = node.opdef()
            attrs = node.parsed_attrs()
            n_args = len(op.arguments(attrs))
            args = [env[(id(src), i)] for src, i in node.inputs]
            ctx = KernelContext(is_train=True, aux=list(args[n_args:]), xp=jnp, key=node_key(node.name), out=None)
            kernel = _kernel(node.op, op)
            if kernel is None:
                raise Error(f"node '{node.name}' (op {node.op}) has no kernel")
            try:
                outs = kernel(attrs, args, ctx)
            except Error:
                raise
            except Exception as e:  # a NumPy-only kernel meets a traced array
                raise Error(f"node '{node.name}' (op {node.op}) has no kernel that runs on jax.numpy "
                            f"({type(e).__name__}: {str(e).splitlines()[0][:160]}); add one to "
                            "autotile/jax/kernels.py") from e
            for i, (name, out) in enumerate(zip(node.output_names(), outs)):
                env[(id(node), i)] = self._constrain(name, out)
        results = [env[(id(n), i)] for n, i in tg.symbol.entries]
        n_fwd, n_p = len(tg.output_names), len(tg.param_names)
        outputs = dict(zip(self.output_names, results[:n_fwd]))
        new_params = dict(zip(tg.param_names, results[n_fwd + n_p:n_fwd + 2 * n_p]))
        return outputs, new_params

    def _args(self, params, inputs):
        params, inputs = dict(params or {}), dict(inputs or {})
        own = getattr(self.sym, "params", None) or {}
        for n in self.aux_names:  # constants and auxiliary states default to the model's own
            if n not in params and n in own:
                params[n] = own[n]
        want_p, want_i = self.param_names + self.aux_names, self.data_names
        for given, want, what in ((params, want_p, "params"), (inputs, want_i, "inputs")):
            missing = [n for n in want if n not in given]
            if missing:
                raise Error(f"{what} lacks {missing[:10]} (the step takes params {want_p[:20]} and inputs {want_i})")
            unknown = sorted(set(given) - set(want))
            if unknown:
                raise Error(f"{what} names {unknown[:10]}, which the step does not take (params {want_p[:20]}, "
                            f"inputs {want_i})")
        for n, v in {**params, **inputs}.items():
            want = tuple(self.plan.tensor_shapes.get(n, np.shape(v)))
            if tuple(np.shape(v)) != want:
                raise Error(f"'{n}' has shape {tuple(np.shape(v))}, but the plan was made for {want}")
        from ..ops.gather import check_index_inputs

        # index inputs (token ids) checked on the host: a traced index has no value to check
        check_index_inputs(self.sym, {k: v for k, v in inputs.items() if not hasattr(v, "sharding")})
        return params, inputs

    def __call__(self, params, inputs):
        return self._jitted(*self._args(params, inputs))

    def lower(self, params, inputs):
        """The jitted step lowered for these arguments (``.compile()``, ``.as_text()``)."""
        return self._jitted.lower(*self._args(params, inputs))


def training_step(model, plan, optimizer_args: Optional[Dict] = None, granularity: Optional[str] = None,
                  devices=None, batch: Optional[int] = None, unconstrained=()) -> TrainingStep:
    """The training step of `model` (Symbol, model path or zoo name) as `plan` tiles it, in
    JAX: see :class:`TrainingStep`. `optimizer_args` (``lr``, ``momentum``...) as in
    ``backend.run``; `devices` the JAX devices to use (default ``jax.devices()``);
    `unconstrained` names tensors left to XLA (``"gradients"``: the parameter gradients; XLA
    on CPU lowers a split gradient as an all-reduce and a slice, docs/layouts.md)."""
    from ..arguments import check_plan
    from ..model_input import as_symbol

    check_plan(plan)
    return TrainingStep(as_symbol(model, batch=batch), plan, optimizer_args, granularity, devices, unconstrained)
