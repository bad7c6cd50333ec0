"""The planned training step in JAX: the training graph autotile plans (forward, loss,
backward, optimizer update) traced op by op with the registry kernels on ``jax.numpy``,
every tensor constrained to the plan's layout (``jax.lax.with_sharding_constraint``), jitted
on a ``jax.sharding.Mesh`` built from the plan."""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np

from ..errors import Error, install_hint


#: ops whose XLA SPMD partitioning computes wrong values when their inputs are split along
#: a spatial dim (jax 0.10 / XLA CPU): the convolution filter gradient on any spatial sharding
#: (off by 1e1-1e2 in a 3x3 conv on 8x8 data), and convolutions in RegNetY's stem/grouped
#: blocks (found on fresh ShuffleNetV2 and RegNetY exports). The mapped path computes their
#: tiles explicitly and is right; in the global view (halo reads) they are computed whole on
#: every device from gathered inputs, outside XLA's partitioning: more bytes, right values.
WHOLE_IN_GLOBAL_VIEW = frozenset({"Convolution", "_backward_Convolution_data", "_backward_Convolution_weight",
                                  "Deconvolution"})


def _jax():
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as e:
        raise Error(f"autotile.jax needs jax ({install_hint('jax')}): {e}") from None
    return jax, jnp


def mesh_of(plan, granularity: Optional[str] = None, devices=None):
    """``(jax.sharding.Mesh, layout)`` of `plan`: its mesh over the first ``plan.devices`` JAX
    devices (or `devices`) in autotile's device order, and ``plan.to_jax(tensors="all")``."""
    jax, _ = _jax()
    layout = plan.to_jax(granularity=granularity, tensors="all")
    if devices is not None:
        if isinstance(devices, (str, bytes)) or not hasattr(devices, "__iter__"):
            raise Error(f"devices must be a list of JAX devices (jax.devices()[:n]), got {type(devices).__name__}")
        devices = list(devices)
        bad = next((d for d in devices if not isinstance(d, jax.Device)), None)
        if bad is not None:
            raise Error(f"devices must be a list of JAX devices (jax.devices()[:n]), got a list holding "
                        f"{type(bad).__name__} {bad!r}")
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
    first step). As ``backend.run``, it casts integer arrays to the dtypes the model declares
    (an int32 weight trains as float32) and refuses class labels outside [0, classes) and
    token ids outside their table, checked on the host before the jitted step (a jitted
    caller's traced values are not checked). ``outputs`` are the
    forward outputs by name in the model's output order, ``new_params`` the updated
    parameters. ``step.lower(params, inputs)`` lowers it as any jitted function (then
    ``.compile().as_text()`` is the partitioned program). ``step.mesh`` and ``step.layout``
    are the mesh and ``plan.to_jax(tensors="all")``; ``step.constrained`` names the tensors
    given a sharding constraint (all but those the plan leaves partial and those in
    `unconstrained`, whose layout XLA then chooses).

    With ``lowering="shard_map"`` (the default) every node whose tiles are mesh tiles runs as
    a ``jax.shard_map`` of its kernel over the plan's mesh (one mesh axis per cut), its
    partial sums reduced as the plan reduces them (jax/node_map.py); ``step.mapped`` names
    those nodes, ``step.global_nodes`` the others with the reason. ``lowering="global"``
    traces every node on whole arrays and leaves each re-layout to XLA's partitioner. Each
    node traces under ``jax.named_scope("at_n<i>")`` and each re-layout of a tensor under
    ``"at_t<i>"`` (``step.scope_names`` maps them back), so the compiled program's
    collectives can be attributed (:func:`autotile.jax.compiled_bytes_by_tensor`)."""

    def __init__(self, sym, plan, optimizer_args=None, granularity=None, devices=None, unconstrained=(),
                 lowering="shard_map"):
        jax, _ = _jax()
        from ..autodiff import training_graph
        from ..symbol.infer import infer_entry_shapes

        if not plan.train:
            raise Error("autotile.jax.training_step needs a training plan (this plan was made with train=False)")
        if optimizer_args is not None and not isinstance(optimizer_args, dict):
            raise Error(f"optimizer_args must be a dict (e.g. {{'lr': 0.1}}), got {type(optimizer_args).__name__}")
        if lowering not in ("shard_map", "global"):
            raise Error(f"lowering must be 'shard_map' or 'global', got {lowering!r}")
        if lowering == "shard_map":
            if granularity not in (None, "cut"):
                raise Error(f"lowering='shard_map' runs on the mesh of one axis per cut (granularity 'cut'), "
                            f"got granularity={granularity!r}; pass lowering='global' for another mesh")
            granularity = "cut"
        self.lowering = lowering
        arguments = set(sym.list_arguments())
        self.tg = tg = training_graph(sym, optimizer=plan.optimizer, optimizer_args=optimizer_args,
                                      shapes={k: v for k, v in plan.input_shapes.items() if k in arguments})
        self.plan, self.sym = plan, sym
        self.mesh, self.layout = mesh_of(plan, granularity, devices)
        specs = self.layout["specs"]
        free = self._unconstrained(unconstrained)
        self._free = free
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
        self.scope_names = {f"at_t{i}": n for i, n in enumerate(sorted(plan.tensor_tilings))}
        self.scope_names.update({f"at_n{i}": n.name for i, n in enumerate(names)})
        self._scope = {n: s for s, n in self.scope_names.items()}
        self.mapped, self.global_nodes = {}, {}
        #: tensor -> how its re-layouts were lowered where that may cost more than the plan
        #: ("xla: src -> dst at node", "move", "order", "uneven: ...")
        self.notes = {}
        self._eg, self._optimizer_args = None, optimizer_args
        if lowering == "shard_map":
            self._map_nodes()
        else:
            self.global_nodes = {n.name: "lowering='global'" for n in names}
        self._jitted = jax.jit(self._trace, in_shardings=self._full(in_sh))

    def _map_nodes(self):
        """The per-device tiles of every node (the plan's execution graph) as shard_map specs."""
        from .node_map import node_maps

        eg = self.exec_graph
        mesh = self.layout["mesh"]
        self.mapped, self.global_nodes = node_maps(eg, tuple(mesh["shape"]), tuple(mesh["axis_names"]))
        for n in self.tg.symbol.topo_nodes():  # a tensor left to XLA: its producer and readers too
            if n.is_variable or n.name not in self.mapped:
                continue
            touched = [s.name if s.is_variable else s.output_names()[i] for s, i in n.inputs] + n.output_names()
            free = [t for t in touched if t in self._free]
            if free:
                del self.mapped[n.name]
                self.global_nodes[n.name] = f"reads or writes '{free[0]}', which is left to XLA (unconstrained)"
        for n in self.tg.symbol.topo_nodes():
            if not n.is_variable and n.name not in self.mapped and n.name not in self.global_nodes:
                self.global_nodes[n.name] = "not in the execution graph"

    @property
    def exec_graph(self):
        """autotile's execution graph of the plan (``execgraph.transform``): the tiles each
        device computes and the fetches between them."""
        if self._eg is None:
            from ..execgraph.graph import transform

            self._eg = transform(self.sym, self.plan, optimizer_args=self._optimizer_args)
        return self._eg

    def _note(self, tensor, node, src, dst, steps):
        """Record how a re-layout of `tensor` at `node` was lowered, for the bench's causes."""
        if src is None or dst is None or tuple(src) == tuple(dst):
            return
        if steps is None:
            self.notes.setdefault(tensor, []).append(f"xla: {_spec(src)} -> {_spec(dst)} at {node}")
        elif any(s[0] == "move" for s in steps):
            self.notes.setdefault(tensor, []).append("move")
        elif any(s[0] == "gather" for s in steps) and any(s[0] == "a2a" for s in steps):
            self.notes.setdefault(tensor, []).append("gather+a2a")
        elif sum(s[0] == "a2a" for s in steps) > 1:
            self.notes.setdefault(tensor, []).append(f"a2a: {sum(s[0] == 'a2a' for s in steps)}")

    def _whole_on_every_device(self, node, kernel, attrs, args, ctx):
        """Node outputs computed whole on every device from whole inputs, inside a shard_map
        (XLA partitions nothing in it): see WHOLE_IN_GLOBAL_VIEW."""
        import jax
        from jax.sharding import PartitionSpec

        n_out = len(node.output_names())
        fn = jax.shard_map(lambda *a: tuple(kernel(attrs, list(a), ctx)), mesh=self.mesh,
                           in_specs=tuple(PartitionSpec() for _ in args),
                           out_specs=tuple(PartitionSpec() for _ in range(n_out)), check_vma=False)
        return list(fn(*args))

    def _stored(self, name):
        """The stored layout of tensor `name` as a mesh spec (per dimension, a tuple of mesh
        axes), None if it has no constraint."""
        spec = self.layout["specs"].get(name)
        if spec is None or name not in self._sharding:
            return None
        return tuple(() if e is None else (e,) if isinstance(e, str) else tuple(e) for e in spec)

    def _mapped_node(self, node, m, args, kernel, n_args):
        """Outputs of `node` run as a shard_map of its kernel (jax/node_map.py)."""
        import jax
        import jax.numpy as jnp
        from jax.sharding import NamedSharding

        from ..ops.registry import KernelContext, node_key
        from .halo import apply_halo
        from .node_map import apply_relayout, device_index, reduce_partial, reduction, relayout, tile_offset

        sizes = dict(zip(self.mesh.axis_names, self.mesh.devices.shape))
        read = [j for j, s in enumerate(m.in_specs) if s is not None]
        names = [src.name if src.is_variable else src.output_names()[i] for src, i in node.inputs]
        # each input enters the map in its stored layout and is re-laid out inside it by the
        # plan's collectives (node_map.relayout); where those cannot, XLA re-lays it out first
        enter, inside = {}, {}
        for j in read:
            stored = self._stored(names[j])
            steps = None if stored is None else relayout(stored, m.in_specs[j], sizes, self.plan.tensor_shapes[names[j]])
            self._note(names[j], node.name, stored, m.in_specs[j], steps)
            if steps is None:
                with jax.named_scope(self._scope.get(names[j], "at_t")):
                    args[j] = jax.lax.with_sharding_constraint(args[j], NamedSharding(self.mesh, _spec(m.in_specs[j])))
                enter[j], inside[j] = m.in_specs[j], []
            else:
                enter[j], inside[j] = stored, steps
        outs_names = node.output_names()
        plans, exits = [], []
        for n, spec, summed, tile in zip(outs_names, m.out_specs, m.partial, m.out_tiles):
            scatters, left, spec, notes = reduction(spec, summed, self._stored(n), tile, sizes,
                                                     self.plan.tensor_shapes[n]) if summed else \
                ([], (), spec, [])
            stored = self._stored(n)
            steps = None if stored is None else relayout(spec, stored, sizes, self.plan.tensor_shapes[n])
            self.notes.setdefault(n, []).extend(notes)
            self._note(n, node.name, spec, stored, steps)
            plans.append((scatters, left, steps or []))
            exits.append(spec if steps is None else stored)
        dtypes = {j: args[j].dtype for j in range(len(args))}
        full = [tuple(self.plan.tensor_shapes[n]) for n in outs_names]

        def run(attrs, ins):
            ctx = KernelContext(is_train=True, aux=list(ins[n_args:]), xp=jnp, key=node_key(node.name), out=None)
            outs = kernel(attrs, list(ins), ctx)
            result = []
            for o, tile, spec, shape in zip(outs, m.out_tiles, m.out_specs, full):
                o = jnp.asarray(o)
                for d in range(o.ndim if o.ndim == len(tile) else 0):  # a whole dim computed: keep the tile's part
                    if o.shape[d] != tile[d] and o.shape[d] == shape[d]:
                        o = jax.lax.dynamic_slice_in_dim(o, tile_offset(spec, d, tile[d], sizes), tile[d], d)
                result.append(o)
            return result

        def body(*local):
            ins, k = [], 0
            for j in range(len(m.in_specs)):
                if m.in_specs[j] is None:
                    ins.append(jnp.zeros(m.shape_only[j], dtypes[j]))
                    continue
                with jax.named_scope(self._scope.get(names[j], "at_t")):
                    x = apply_relayout(local[k], inside[j], sizes)
                    ins.append(apply_halo(x, m.halos[j], self.mesh.axis_names, self.mesh.devices.shape)
                               if j in m.halos else x)
                k += 1
            if len(m.attrs) == 1:
                outs = run(m.attrs[0], ins)
            else:
                group = jnp.asarray(np.array(m.groups, np.int32))[device_index(self.mesh.axis_names,
                                                                                self.mesh.devices.shape)]
                outs = jax.lax.switch(group, [lambda v, a=a: run(a, v) for a in m.attrs], ins)
            reduced = []
            for n, o, (scatters, left, steps) in zip(outs_names, outs, plans):
                with jax.named_scope(self._scope.get(n, "at_t")):
                    reduced.append(apply_relayout(reduce_partial(o, scatters, left, sizes), steps, sizes))
            return tuple(reduced)

        fn = jax.shard_map(body, mesh=self.mesh, in_specs=tuple(_spec(enter[j]) for j in read),
                           out_specs=tuple(_spec(spec) for spec in exits), check_vma=False)
        return list(fn(*[args[j] for j in read]))

    def _unconstrained(self, names):
        """Tensor names to leave to XLA: `names`, with "gradients" standing for the parameter
        gradients the optimizer update reads."""
        tg = self.tg
        if not (names is None or isinstance(names, str) or (hasattr(names, "__iter__") and not isinstance(names, dict))):
            raise Error(f"unconstrained must be a tensor name or a list of them, got {type(names).__name__}")
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
        if sh is None:
            return value
        with jax.named_scope(self._scope.get(name, "at_t")):
            return jax.lax.with_sharding_constraint(value, sh)

    def _trace(self, params, inputs):
        import jax
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
                with jax.named_scope(self._scope[node.name]):
                    m = self.mapped.get(node.name)
                    if m:
                        outs = self._mapped_node(node, m, args, kernel, n_args)
                    elif node.op in WHOLE_IN_GLOBAL_VIEW:
                        outs = self._whole_on_every_device(node, kernel, attrs, args, ctx)
                    else:
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
        from ..arguments import check_arrays

        params, inputs = dict(check_arrays(params, "params") or {}), dict(check_arrays(inputs, "inputs") or {})
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
        params, inputs = self._cast(params, "params"), self._cast(inputs, "inputs")
        for n, v in {**params, **inputs}.items():
            want = tuple(self.plan.tensor_shapes.get(n, np.shape(v)))
            if tuple(np.shape(v)) != want:
                raise Error(f"'{n}' has shape {tuple(np.shape(v))}, but the plan was made for {want}")
        from ..ops.gather import check_index_inputs

        # index inputs (token ids) checked on the host: a traced index has no value to check
        check_index_inputs(self.sym, {k: v for k, v in inputs.items() if not hasattr(v, "sharding")})
        check_labels(self.tg.symbol, self.plan.tensor_shapes, inputs)
        return params, inputs

    def _cast(self, values, what):
        """`values` with integer and boolean arrays cast to the dtype the model declares
        (float32 for weights and labels, token ids stay integer), as backend.run casts them
        (arguments.cast_inputs): an int32 weight trains as float32 rather than truncating
        every update to 0. Arrays of strings or objects are an Error naming them."""
        from ..arguments import cast_inputs

        ints = {}
        for n, v in values.items():
            dtype = getattr(v, "dtype", None)
            try:
                dtype = np.dtype(dtype) if dtype is not None else np.asarray(v).dtype
            except (TypeError, ValueError) as e:  # ragged nested lists
                raise Error(f"{what} '{n}' is no array: {str(e).splitlines()[0][:120]}") from None
            if dtype.kind not in "biufc":
                raise Error(f"{what} '{n}' holds {dtype} data, not numbers: pass a numeric array")
            if dtype.kind in "biu" and not _traced(v):  # a jitted caller's tracer is cast by JAX
                ints[n] = v
        return {**values, **cast_inputs(self.sym, ints)} if ints else values

    def __call__(self, params, inputs):
        return self._jitted(*self._args(params, inputs))

    def lower(self, params, inputs):
        """The jitted step lowered for these arguments (``.compile()``, ``.as_text()``)."""
        return self._jitted.lower(*self._args(params, inputs))


def _traced(v) -> bool:
    import jax

    return isinstance(v, jax.core.Tracer)


def check_labels(graph, shapes, inputs) -> None:
    """Class labels fed from `inputs` to a SoftmaxOutput gradient of training graph `graph`
    (tensor shapes `shapes`): Error naming the input, the node and the first label outside
    [0, classes) (NaN, infinities), as backend.run's kernel refuses them
    (ops/loss.py's first_label_out_of_range), checked on the host before the jitted step: a
    traced step cannot raise on a value. Ignored labels (use_ignore) are exempt; a jitted
    caller's traced labels cannot be checked."""
    from ..ops.loss import class_labels, first_label_out_of_range

    for node in graph.topo_nodes():
        if node.op != "_backward_SoftmaxOutput" or len(node.inputs) < 2:
            continue
        (src, i), (lab, _) = node.inputs[0], node.inputs[1]
        if not lab.is_variable or lab.name not in inputs or _traced(inputs[lab.name]):
            continue
        out_shape = tuple(shapes[src.name if src.is_variable else src.output_names()[i]])
        label = np.asarray(inputs[lab.name])
        if label.shape == out_shape:  # probability labels
            continue
        attrs = node.parsed_attrs()
        read, k = class_labels(attrs, out_shape, label)
        bad = first_label_out_of_range(read, k, attrs["ignore_label"] if attrs["use_ignore"] else None)
        if bad is not None:
            raise Error(f"input '{lab.name}' holds the label {bad}, out of range: node '{node.name}' (SoftmaxOutput "
                        f"gradient) has {k} classes, so labels must lie in [0, {k})"
                        + (f" or equal ignore_label {attrs['ignore_label']:g}" if attrs["use_ignore"] else ""))


def training_step(model, plan, optimizer_args: Optional[Dict] = None, granularity: Optional[str] = None,
                  devices=None, batch: Optional[int] = None, unconstrained=(), lowering: str = "shard_map") -> TrainingStep:
    """The training step of `model` (Symbol, model path or zoo name) as `plan` tiles it, in
    JAX: see :class:`TrainingStep`. `optimizer_args` (``lr``, ``momentum``...) as in
    ``backend.run``; `devices` the JAX devices to use (default ``jax.devices()``);
    `unconstrained` names tensors left to XLA, their producers and readers traced in the
    global view (``"gradients"``: the parameter gradients; XLA
    on CPU lowers a split gradient as an all-reduce and a slice, docs/layouts.md);
    `lowering` "shard_map" (nodes as per-device kernels with the plan's collectives) or
    "global" (whole arrays, re-layouts left to XLA): see :class:`TrainingStep`."""
    from ..arguments import check_plan
    from ..model_input import as_symbol

    check_plan(plan)
    return TrainingStep(as_symbol(model, batch=batch), plan, optimizer_args, granularity, devices, unconstrained,
                        lowering)
