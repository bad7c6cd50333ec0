"""``parallelize(module, plan)``: an ``nn.Module`` distributed as an autotile plan says, with
PyTorch DTensor. Parameters become DTensors with the plan's placements; forward hooks turn
the inputs into DTensors and redistribute each module call's output to the layout the plan
gives that tensor (``plan.to_dtensor(tensors="all")``). Between module boundaries DTensor's
own sharding propagation lays out the ops, and autograd carries each redistribution's
inverse into the backward pass."""
from __future__ import annotations

import functools
import traceback
import types
from typing import Dict, Optional

import numpy as np

from ..errors import Error, install_hint
from .names import ModuleMap, flat_tensors, forward_arg_names


def _torch():
    try:
        import torch
        import torch.distributed as dist
        from torch.distributed.tensor import DTensor  # noqa: F401
    except ImportError as e:
        raise Error(f"autotile.torch needs PyTorch with torch.distributed.tensor "
                    f"({install_hint('torch')}): {e}") from None
    return torch, dist


def plan_layout(plan, granularity: Optional[str] = None) -> dict:
    """``plan.to_dtensor(tensors="all")`` over the fewest mesh dimensions that express every
    parameter and input: consecutive cuts of one mesh axis stay one mesh dimension while
    every parameter and input is laid out alike over them (the README MLP's tofu plan: one
    dimension of 8; a CNN splitting the batch at the first cut and the channels at the next
    two: 2 x 4), rather than one dimension per cut (DTensor's sharding propagation grows
    with the mesh's dimensions: a 3-dimensional mesh of 2 x 2 x 2 is many times slower). An
    activation or gradient split differently within such a dimension is left out of
    ``placements`` and listed in ``"unexpressed"``. `granularity` ("axis", "cut") forces
    the export's own."""
    import copy

    from ..planner.export import _mesh_of

    if granularity is not None:
        return {**plan.to_dtensor(granularity=granularity, tensors="all"), "unexpressed": []}
    mesh, axes = _mesh_of(plan)
    io = list(plan.input_shapes) + list(plan.param_names)
    groups = []  # [axis, first cut, size]
    for c, (k, axis) in enumerate(zip(plan.factors, axes)):
        same = c > 0 and axes[c - 1] == axis and all(
            plan.tensor_tilings[n][c] == plan.tensor_tilings[n][c - 1] for n in io if n in plan.tensor_tilings)
        if same:
            groups[-1][2] *= k
        else:
            groups.append([axis, c, k])
    names = []
    for axis, first, _ in groups:
        split = sum(g[0] == axis for g in groups) > 1
        names.append(f"{axis}.{sum(g[0] == axis for g in groups if g[1] < first)}" if split else axis)
    regrouped = copy.copy(plan)
    regrouped.mesh = {n: g[2] for n, g in zip(names, groups)}
    regrouped.cut_axes = [names[[i for i, g in enumerate(groups) if g[1] <= c][-1]] for c in range(len(axes))]
    out = regrouped.to_dtensor(granularity="axis", tensors="io")
    out["unexpressed"] = []
    for name in plan.tensor_tilings:
        if name in out["placements"]:
            continue
        try:  # one tensor at a time: an inexpressible one is an Error naming it
            row = _one_tensor(regrouped, name)
        except Error:
            out["unexpressed"].append(name)
            continue
        out["placements"][name] = row
    return out


def _one_tensor(plan, name: str):
    """The DTensor placements of one tensor of `plan` at axis granularity."""
    from ..planner.export import _mesh_dims, _per_dim

    names, _, cut_dim = _mesh_dims(plan, "axis")
    per = _per_dim(plan.tensor_tilings[name], cut_dim)
    if per is None:
        raise Error(f"tensor '{name}' splits different dimensions within one mesh dimension")
    kinds = [per.get(m, ("replicate",)) for m in range(len(names))]
    return [f"Shard({k[1]})" if k[0] == "shard" else ("Partial()" if k[0] == "partial" else "Replicate()")
            for k in kinds]


def device_mesh(plan, device_type: Optional[str] = None, granularity: Optional[str] = None):
    """``(DeviceMesh, layout)``: the plan's mesh over ranks ``0 .. plan.devices - 1`` of the
    default process group in autotile's device order (row-major), and the placements of
    every tensor (:func:`plan_layout`, as strings). `device_type`: ``"cpu"`` for gloo, else
    ``"cuda"``, unless given."""
    torch, dist = _torch()
    from torch.distributed.device_mesh import DeviceMesh

    if not dist.is_initialized():
        raise Error("autotile.torch.parallelize needs torch.distributed initialised "
                    "(torch.distributed.init_process_group, or run under torchrun)")
    if dist.get_world_size() != plan.devices:
        raise Error(f"the plan is for {plan.devices} devices but the process group has "
                    f"{dist.get_world_size()} ranks")
    layout = plan_layout(plan, granularity)
    if device_type is None:
        device_type = "cpu" if dist.get_backend() == "gloo" else "cuda"
    names = tuple(n.replace(".", "_") for n in layout["mesh"]["dim_names"])
    grid = torch.arange(plan.devices).reshape(layout["mesh"]["shape"])
    return DeviceMesh(device_type, grid, mesh_dim_names=names), layout


def _placements(row):
    from torch.distributed.tensor import Partial, Replicate, Shard

    return tuple(Shard(int(p[6:-1])) if p.startswith("Shard(") else (Partial() if p == "Partial()" else Replicate())
                 for p in row)


def _orientation(p, shape: tuple, value, by_value_only: bool = False) -> Optional[str]:
    """How a plan tensor of `shape` (and `value`, when the Symbol carries it) holds module
    parameter `p`: ``"stored"``, ``"transposed"`` (a 2-D weight the import keeps as its
    transpose, as ``x @ W`` reads it) or None. The values decide a square weight; without
    them (or with a module trained since its export) the shapes decide, stored first."""
    have = tuple(p.shape) or (1,)  # a 0-d parameter (CLIP's logit_scale) is a (1,) plan tensor
    stored, trans = have == shape, len(have) == 2 and have[::-1] == shape
    if value is not None and (stored or trans):
        v, mine = np.asarray(value), p.detach().cpu().numpy()
        if stored and np.array_equal(mine.reshape(have), v):
            return "stored"
        if trans and np.array_equal(mine.T, v):
            return "transposed"
    if by_value_only:
        return None
    return "stored" if stored else ("transposed" if trans else None)


def _match(module, plan, model=None):
    """``(params, transposed, views)``: module parameter -> the plan tensor giving its layout;
    the module parameters that tensor holds transposed; the other plan tensors holding a
    module parameter (a weight read in two orientations: ``x @ W`` and ``h @ W.T`` import as
    ``W_T`` and ``W``), plan tensor -> (module parameter, orientation)."""
    params = dict(module.named_parameters())
    tmap: Optional[ModuleMap] = getattr(model, "torch_map", None)
    onnx_of = dict(tmap.params) if tmap else {}
    if model is not None and not onnx_of:
        onnx_of = {v: k for k, v in getattr(model, "onnx_names", {}).items()}
    values = getattr(model, "params", None) or {}
    held: Dict[str, list] = {}  # module parameter -> [(plan tensor, orientation)]
    for name in plan.param_names:
        shape = tuple(plan.tensor_shapes[name])
        value = values.get(name)
        found, how = None, None
        for cand in (onnx_of.get(name), name):
            if cand in params:
                found = cand
                how = _orientation(params[found], shape, value)
                if how is None:
                    raise Error(f"module parameter '{found}' has shape {tuple(params[found].shape)} but plan "
                                f"tensor '{name}' has shape {shape}")
                break
        if found is None and value is not None:
            # by value: a parameter no plan tensor holds yet first (equal values: two fresh LayerNorms)
            for pname, p in sorted(params.items(), key=lambda kv: kv[0] in held):
                how = _orientation(p, shape, value, by_value_only=True)
                if how is not None:
                    found = pname
                    break
        if found is None:
            raise Error(f"plan tensor '{name}' (ONNX initializer '{onnx_of.get(name, name)}', shape {shape}) has "
                        f"no parameter in {type(module).__name__}: no named_parameters() entry of that name or "
                        f"value (export with autotile.torch.export, which keeps the names)")
        held.setdefault(found, []).append((name, how))
    out, transposed, views = {}, set(), {}
    for pname, tensors in held.items():
        stored = [t for t, how in tensors if how == "stored"]
        if len(stored) > 1:
            raise Error(f"module parameter '{pname}' matches two plan tensors, '{stored[0]}' and '{stored[1]}'")
        first, how = next((t, h) for t, h in tensors if h == "stored") if stored else tensors[0]
        out[pname] = first
        if how == "transposed":
            transposed.add(pname)
        views.update({t: (pname, h) for t, h in tensors if t != first})
    return out, transposed, views


def match_parameters(module, plan, model=None) -> Dict[str, str]:
    """``{module parameter name: plan tensor name}`` for every trainable tensor of the plan.
    By the ONNX initializer name each plan parameter came from (the TorchScript exporter
    keeps ``named_parameters()`` names); a plan parameter whose initializer has no such name
    (an export with constant folding names a Linear weight it transposed ``onnx::MatMul_94``;
    the import transposes it back) is matched by value against the module's parameters when
    `model` (the imported Symbol) carries its value. A weight the plan holds transposed
    (``x @ W`` imports as ``W_T``) maps to that tensor; one it holds both ways maps to the
    tensor as stored (``Parallelized.views`` lists the other). Error naming the tensor when
    none matches, the shapes differ, or two plan tensors claim one parameter as stored."""
    return _match(module, plan, model)[0]


class Parallelized:
    """What :func:`parallelize` did: the mesh, the layout, parameter and activation mapping
    (``params``: module parameter -> plan tensor, every owner of a tied one by its own name;
    ``transposed``: the parameters that tensor holds transposed; ``views``: other plan tensors
    holding a parameter; ``activations``: (module, call) -> plan tensors), and the hook
    handles (``remove()`` takes the hooks and replaced forwards off)."""

    def __init__(self, module, plan, mesh, layout, params, tmap, transposed=(), views=None):
        self.module, self.plan, self.mesh, self.layout = module, plan, mesh, layout
        self.params = params
        self.transposed = set(transposed)
        self.views = dict(views or {})
        self.map: Optional[ModuleMap] = tmap
        #: (module, k) -> plan tensor per output of its k-th call; the calls left unmapped
        self.activations, self.unmapped = tmap.resolve(plan.tensor_shapes) if tmap else ({}, [])
        self.handles = []
        self.calls: Dict[str, int] = {}  # module -> calls so far in this forward
        #: per forward: (module, call index, plan tensor, placements before, after) of each redistribution
        self.redistributed = []
        #: per forward: (module, input placements) of each GroupNorm call run replicated (replicated_group_norm)
        self.gathered = []
        self.stack = []  # the module calls in progress (qualified names), innermost last

    def placements(self, tensor: str):
        """The plan's DTensor placements of `tensor` (objects)."""
        return _placements(self.layout["placements"][tensor])

    def param_placements(self, name: str) -> list:
        """The placements (strings) module parameter `name` gets: its plan tensor's, with
        ``Shard(0)`` and ``Shard(1)`` swapped where the plan holds it transposed; replicated
        when the plan does not train it."""
        if name not in self.params:
            return ["Replicate()"] * self.mesh.ndim
        row = self.layout["placements"][self.params[name]]
        if name in self.transposed:
            swap = {"Shard(0)": "Shard(1)", "Shard(1)": "Shard(0)"}
            row = [swap.get(r, r) for r in row]
        return list(row)

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []


def parallelize(module, plan, model=None, *, device_type: Optional[str] = None,
                activations: bool = True, granularity: Optional[str] = None):
    """Distribute `module` (an ``nn.Module``) as `plan` says, in place, and return it.

    `plan` is an autotile plan of the module's ONNX export, `model` the Symbol that export was
    imported as (``autotile.torch.export(module, *example_inputs)``; None: the module is
    exported here on zero inputs of the plan's input shapes). Needs ``torch.distributed``
    initialised with ``plan.devices`` ranks (gloo or nccl; torchrun sets it up across hosts).

    - Every plan parameter becomes a DTensor with the plan's placements, found among
      ``module.named_parameters()`` by its ONNX initializer name (:func:`match_parameters`);
      rank 0's values are the ones distributed. A parameter several modules own (tied
      weights) is one DTensor they all point at. Module parameters the plan does not train,
      and buffers, are replicated.
    - A forward pre-hook makes each plain tensor argument of ``module(...)`` a DTensor with
      the plan's layout of that input: every rank passes the whole tensor and keeps its own
      shard (no communication).
    - With `activations`, a forward hook on each submodule redistributes the output of every
      module call that maps to a plan tensor (``model.torch_map``) to the plan's placements,
      unless the plan leaves it partial. The outputs of ``module(...)`` are DTensors
      (``.full_tensor()`` gathers one).
    - Where DTensor itself goes wrong: a BatchNorm's running statistics are laid out as its
      input's channels before each call (else their update is lost in a redistributed copy);
      a GroupNorm runs on whole tensors (DTensor's backward of a split one fails),
      its output handed back in the input's layout (``Parallelized.gathered`` lists the calls).

    The returned module carries ``module.autotile`` (a :class:`Parallelized`)."""
    torch, dist = _torch()
    from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

    from ..planner.plan import Plan
    from ..symbol import Symbol

    if not isinstance(module, torch.nn.Module):
        raise Error(f"parallelize: module must be an nn.Module, got {type(module).__name__}")
    if not isinstance(plan, Plan):
        raise Error(f"parallelize: plan must be an autotile Plan (at.plan(sym, ...)), got {type(plan).__name__}")
    if model is not None and not isinstance(model, Symbol):
        raise Error(f"parallelize: model must be the Symbol the plan was made for (autotile.torch.export(module, "
                    f"*example_inputs)) or None, got {type(model).__name__}")
    already = [n for n, p in module.named_parameters() if isinstance(p, DTensor)]
    if already or isinstance(getattr(module, "autotile", None), Parallelized):
        raise Error(f"parallelize: {type(module).__name__} is already distributed ({', '.join(already[:3]) or 'module'}"
                    f"{' ...' if len(already) > 3 else ''} DTensor parameters); parallelize a fresh copy of the "
                    f"plain module")
    if model is None:  # autotile.torch.plan's planned model, else an export on zeros
        model = getattr(plan, "torch_model", None) or _export_for(module, plan)
    mesh, layout = device_mesh(plan, device_type, granularity)
    pmap, transposed, views = _match(module, plan, model)
    tmap = getattr(model, "torch_map", None)
    state = Parallelized(module, plan, mesh, layout, pmap, tmap, transposed, views)
    owners = {}
    for q, sub in module.named_modules():
        for pname, _ in sub.named_parameters(recurse=False):
            owners[f"{q}.{pname}" if q else pname] = (sub, pname)
    for full, (sub, pname) in owners.items():
        if full in pmap and isinstance(sub, torch.nn.modules.conv._ConvNd) and \
                any(r.startswith("Shard(") for r in state.param_placements(full)):
            raise Error(f"plan splits parameter '{full}' of {type(sub).__name__} module "
                        f"'{full.rsplit('.', 1)[0] if '.' in full else ''}' "
                        f"({' '.join(state.param_placements(full))}): DTensor's convolution lays its "
                        f"output out as its input and ignores the weight's placements, so only plans that "
                        f"replicate convolution parameters run (e.g. algorithm='data', or layout rules "
                        f"replicating '*conv*')")
    # a tensor several modules own (an LM head tied to the embedding) becomes one DTensor
    # parameter that every owner points at: its gradient is the sum over all its uses
    plan_of = {id(getattr(sub, pname)): full for full, (sub, pname) in owners.items() if full in pmap}
    made: Dict[int, object] = {}
    for full, (sub, pname) in owners.items():
        p = getattr(sub, pname)
        if id(p) not in made:
            placements = _placements(state.param_placements(plan_of.get(id(p), full)))
            dt = distribute_tensor(p.detach(), mesh, placements)
            made[id(p)] = torch.nn.Parameter(dt, requires_grad=p.requires_grad)
        sub.register_parameter(pname, made[id(p)])
        first = plan_of.get(id(p))
        if first is not None and full != first:  # another owner's name for the same plan tensor
            state.params[full] = state.params[first]
            if first in state.transposed:
                state.transposed.add(full)
    # buffers (a registered scale, BatchNorm's running statistics) are replicated: DTensor ops
    # refuse a plain tensor beside a DTensor; the plan does not train them (export's trainable=)
    for q, sub in module.named_modules():
        for bname, b in list(sub.named_buffers(recurse=False)):
            if b is None or isinstance(b, DTensor):
                continue
            if id(b) not in made:
                made[id(b)] = distribute_tensor(b, mesh, _placements(["Replicate()"] * mesh.ndim))
            sub.register_buffer(bname, made[id(b)], persistent=bname not in sub._non_persistent_buffers_set)

    inputs = dict(tmap.inputs) if tmap else {n: n for n in plan.input_shapes}
    arg_names = forward_arg_names(module)

    def to_dtensor(name, value):
        if not isinstance(value, torch.Tensor) or isinstance(value, DTensor):
            return value
        tensor = inputs.get(name)
        if tensor is None or tensor not in layout["placements"]:
            return distribute_tensor(value, mesh, _placements(["Replicate()"] * mesh.ndim), src_data_rank=None)
        return distribute_tensor(value, mesh, state.placements(tensor), src_data_rank=None)

    def root_pre(_mod, args, kwargs):
        state.calls = {}
        state.redistributed = []
        state.gathered = []
        state.stack = []
        args = tuple(to_dtensor(arg_names[i] if i < len(arg_names) else None, a) for i, a in enumerate(args))
        kwargs = {k: to_dtensor(k, v) for k, v in kwargs.items()}
        return args, kwargs

    state.handles.append(module.register_forward_pre_hook(root_pre, with_kwargs=True))

    def norm_pre(mod, args):
        # DTensor splits batch norm by channel or runs it replicated: a running statistic laid
        # out otherwise than the channels would be updated in a redistributed copy and the
        # update lost (a tofu plan splitting BatchNorm1d's features kept the old running mean)
        x = args[0] if args else None
        if not (mod.training and mod.track_running_stats and isinstance(x, DTensor)):
            return None
        want = tuple(Shard(0) if p.is_shard() and p.dim == 1 else Replicate() for p in x.placements)
        for bname in ("running_mean", "running_var"):
            b = getattr(mod, bname, None)
            if isinstance(b, DTensor) and tuple(b.placements) != want:
                mod.register_buffer(bname, b.redistribute(b.device_mesh, want))
        return None

    names_of = {id(m): q for q, m in module.named_modules()}
    for q in getattr(plan, "torch_whole", None) or []:  # module calls DTensor runs on whole inputs
        sub = module.get_submodule(q)
        plain = sub.__dict__.get("forward") or type(sub).forward.__get__(sub)
        state.handles.append(_patch_forward(sub, _whole_module, _autotile_plain=plain))
    for sub in module.modules():
        if isinstance(sub, torch.nn.modules.batchnorm._BatchNorm):
            state.handles.append(sub.register_forward_pre_hook(norm_pre))
        if isinstance(sub, torch.nn.GroupNorm) and "forward" not in sub.__dict__:  # not one replaced by its user
            state.handles.append(_patch_forward(sub, _whole_group_norm, _autotile_name=names_of.get(id(sub)),
                                                _autotile_state=state))

    # a forward that fails inside DTensor names the module call it failed in
    def push(mod, _args):
        state.stack.append(names_of.get(id(mod)))

    def pop(_mod, _args, _out):
        if state.stack:
            state.stack.pop()

    for sub in module.modules():
        if sub is not module:
            state.handles.append(sub.register_forward_pre_hook(push))
            state.handles.append(sub.register_forward_hook(pop))
    if "forward" not in module.__dict__:  # a forward its user replaced stays as it is
        state.handles.append(_patch_forward(module, _naming_dtensor_failures(type(module).forward)))
    if activations and tmap is not None:
        names = {id(m): q for q, m in module.named_modules()}

        def post(mod, _inputs, output):
            q = names.get(id(mod))
            k = state.calls.get(q, 0)
            state.calls[q] = k + 1
            targets = state.activations.get((q, k))
            if not targets:
                return None
            flat = flat_tensors(output)
            if len(flat) != len(targets):
                return None
            swap = {}
            for t, name in zip(flat, targets):
                if name is None or not isinstance(t, DTensor) or name not in layout["placements"]:
                    continue
                want = state.placements(name)
                if any(p.is_partial() for p in want) or tuple(t.placements) == want:
                    continue
                state.redistributed.append((q, k, name, tuple(t.placements), want))
                swap[id(t)] = t.redistribute(mesh, want)
            return _replace(output, swap) if swap else None

        for q, sub in module.named_modules():
            if sub is not module:
                state.handles.append(sub.register_forward_hook(post))
    module.autotile = state
    return module


class _Unpatch:
    """A handle that takes instance attributes (a replaced ``forward``, what it reads) off again."""

    def __init__(self, obj, *names):
        self.obj, self.names = obj, names

    def remove(self):
        for name in self.names:
            self.obj.__dict__.pop(name, None)


def _patch_forward(mod, fn, **attrs) -> _Unpatch:
    """``mod.forward = fn`` bound to `mod` (a bound method: ``copy.deepcopy`` rebinds it to
    the copy), and `attrs` set on `mod`; a handle that takes them all off."""
    for name, value in attrs.items():
        setattr(mod, name, value)
    mod.forward = types.MethodType(fn, mod)
    return _Unpatch(mod, "forward", *attrs)


def _whole_group_norm(self, x):
    """GroupNorm's forward on whole tensors, its output handed back laid out as its input was:
    DTensor's group-norm backward fails on a split input, gradient or weight ('Expected
    dY.numel() == N * C * HxW', torch 2.13)."""
    import torch
    from torch.distributed.tensor import DTensor, Replicate

    if not isinstance(x, DTensor):
        return type(self).forward(self, x)
    whole = tuple(Replicate() for _ in x.placements)
    w, b = (t.redistribute(t.device_mesh, whole) if isinstance(t, DTensor) else t for t in (self.weight, self.bias))
    if whole != tuple(x.placements) or w is not self.weight or b is not self.bias:
        state = getattr(self, "_autotile_state", None)
        if state is not None:
            state.gathered.append((getattr(self, "_autotile_name", None), tuple(x.placements)))
    y = torch.nn.functional.group_norm(x.redistribute(x.device_mesh, whole), self.num_groups, w, b, self.eps)
    y = _whole_gradient().apply(y)
    return y.redistribute(y.device_mesh, tuple(Replicate() if p.is_partial() else p for p in x.placements))


def _whole_module(self, *args, **kwargs):
    """A module's forward run whole on every rank: each DTensor argument, parameter and buffer
    gathered (replicated) and the forward run on the local tensors (plain torch: any op, the
    LSTM's fused kernel included), its outputs replicated DTensors whose gradient is
    replicated in the backward. The plan lays the module out whole (``plan.torch_whole``,
    :mod:`autotile.torch.runnable`) where DTensor cannot run its ops as split; the forward
    hooks hand its outputs to the plan's layout."""
    from torch.distributed.tensor import DTensor, Replicate
    from torch.nn.utils.stateless import _reparametrize_module

    meshes = []

    def local(t):
        if not isinstance(t, DTensor):
            return t
        meshes.append(t.device_mesh)
        return t.redistribute(t.device_mesh, tuple(Replicate() for _ in t.placements)).to_local()

    state = {n: local(t) for n, t in list(self.named_parameters(remove_duplicate=False)) +
             list(self.named_buffers(remove_duplicate=False))}
    args, kwargs = _map_tensors(args, local), _map_tensors(kwargs, local)
    with _reparametrize_module(self, state, tie_weights=True):
        out = self._autotile_plain(*args, **kwargs)
    if not meshes:
        return out
    mesh = meshes[0]

    def back(t):
        d = DTensor.from_local(t, mesh, tuple(Replicate() for _ in range(mesh.ndim)), run_check=False)
        return _whole_gradient().apply(d) if d.requires_grad else d

    return _map_tensors(out, back)


def _map_tensors(value, fn):
    """`value` with `fn` applied to every tensor in it (tuples, lists, dicts, HF ModelOutputs)."""
    import torch

    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, tuple):
        items = [_map_tensors(v, fn) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, list):
        return [_map_tensors(v, fn) for v in value]
    if isinstance(value, dict):
        return _same_dict(value, {k: _map_tensors(v, fn) for k, v in value.items()})
    return value


def _same_dict(value: dict, items: dict):
    """`items` in a dict of `value`'s own type: a Hugging Face ModelOutput stays one (its
    attributes read on: ``outputs.last_hidden_state``)."""
    if type(value) is dict:
        return items
    import copy

    out = copy.copy(value)
    for k, v in items.items():
        out[k] = v
    return out


def _sdpa_dtensor_runs(state):
    """On a CPU mesh, ``scaled_dot_product_attention`` by its math form (matmul, softmax:
    ops DTensor shards), not the fused CPU kernel, whose backward DTensor has no rule for
    ('aten._scaled_dot_product_flash_attention_for_cpu_backward ... does not have a sharding
    strategy registered', torch 2.13, after the whole forward had run)."""
    import contextlib

    mesh = getattr(state, "mesh", None)
    if mesh is None or mesh.device_type != "cpu":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.MATH])


def _implicit_replication():
    """Plain tensors a forward makes beside DTensors (position ids from ``torch.arange``,
    rotary tables, an LSTM's zero state) taken as replicated, as every rank computes them
    alike (DTensor refuses the mix otherwise: 'got mixed torch.Tensor and DTensor')."""
    from torch.distributed.tensor.experimental import implicit_replication

    return implicit_replication()


def _naming_dtensor_failures(plain):
    """`plain` (a module class's forward) raising an :class:`Error` that names the innermost
    module call in progress when an exception comes from inside DTensor (an op it cannot
    shard: 'does not have a sharding strategy registered'); other exceptions pass as they are."""

    @functools.wraps(plain)
    def forward(self, *args, **kwargs):
        try:
            with _sdpa_dtensor_runs(getattr(self, "autotile", None)), _implicit_replication():
                return plain(self, *args, **kwargs)
        except Exception as e:
            frames = [f.filename for f in traceback.extract_tb(e.__traceback__)]
            state = getattr(self, "autotile", None)
            where = list(getattr(state, "stack", []) or [])
            if not any("torch/distributed/tensor" in f.replace("\\", "/") for f in frames):
                raise
            q = where[-1] if where else ""
            sub = self.get_submodule(q) if q else self
            raise Error(f"{type(sub).__name__} module '{q or '(root)'}' of the parallelized {type(self).__name__} "
                        f"fails under DTensor: {type(e).__name__}: {str(e).strip()[:300]} (DTensor cannot run this "
                        f"op on the layouts it gets here; a plan that keeps its inputs whole, layout rules "
                        f"replicating them, may run it)") from e

    return forward


def _whole_gradient():
    """An identity whose backward replicates a DTensor gradient."""
    import torch
    from torch.distributed.tensor import DTensor, Replicate

    class WholeGradient(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.view_as(x)

        @staticmethod
        def backward(ctx, g):
            if isinstance(g, DTensor) and not all(p.is_replicate() for p in g.placements):
                g = g.redistribute(g.device_mesh, tuple(Replicate() for _ in g.placements))
            return g

    return WholeGradient


def _replace(value, swap):
    """`value` with the tensors in `swap` (by id) replaced, structure kept."""
    if id(value) in swap:
        return swap[id(value)]
    if isinstance(value, tuple):
        return type(value)(*[_replace(v, swap) for v in value]) if hasattr(value, "_fields") else \
            tuple(_replace(v, swap) for v in value)
    if isinstance(value, list):
        return [_replace(v, swap) for v in value]
    if isinstance(value, dict):
        return _same_dict(value, {k: _replace(v, swap) for k, v in value.items()})
    return value


def _export_for(module, plan):
    """The module's export (:func:`autotile.torch.export`) on zero inputs of the plan's input
    shapes, for forward's arguments the plan has as inputs."""
    torch, _ = _torch()
    from .names import export

    args = []
    for name in forward_arg_names(module):
        if name not in plan.input_shapes:
            break
        dtype = plan.tensor_dtypes.get(name, "float32")
        args.append(torch.zeros(plan.input_shapes[name], dtype=getattr(torch, dtype, torch.float32)))
    if not args:
        raise Error(f"no argument of {type(module).__name__}.forward ({forward_arg_names(module)}) is an input "
                    f"of the plan ({sorted(plan.input_shapes)}); pass the exported model: parallelize(module, plan, "
                    f"autotile.torch.export(module, *example_inputs))")
    return export(module, *args)
