"""Which autotile tensor each part of an ``nn.Module`` is: parameters, forward inputs and the
outputs of module calls, read off the module's TorchScript ONNX export.

The TorchScript exporter keeps ``named_parameters()`` names as initializer names (with
``do_constant_folding=False``: folding would replace a transposed weight by a new, anonymous
initializer) and names every node after the module call stack it ran in: a node of
``self.blocks[0].attn`` called from ``self.forward`` is ``/blocks.0/attn/MatMul``, each module
by its qualified name from its last non-numeric atom (``seq.2`` under ``seq``, ``a`` under
``seq.2``), a module called again in the same scope gets ``_1``, ``_2`` (``/shared_1/Gemm``).
A module call's output is the tensor a node inside that scope produces and a node outside it
(or the graph's output) consumes. The import (``at.onnx.load``) maps each ONNX tensor name to
its autotile name (``sym.onnx_names``).

Limits: a module whose output no node in its own scope computes (``nn.Identity``, dropout in
eval mode, a module returning its input or a view the exporter elides) has no tensor; a module
returning several tensors is mapped only where their shapes tell its boundary tensors apart;
modules called in a data-dependent order differ from the traced call sequence. Such calls are
left as DTensor lays them out (``Parallelized.unmapped`` lists them)."""
from __future__ import annotations

import glob
import inspect
import io
import warnings
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import Error, install_hint
from .exportable import exportable


def _unqualified(qualified: str) -> str:
    """The exporter's scope component of a module: its qualified name from the last
    non-numeric atom (``blocks.0`` for ``blocks.0``, ``attn`` for ``blocks.0.attn``)."""
    atoms = qualified.split(".")
    for i in range(len(atoms) - 1, -1, -1):
        if not atoms[i].isnumeric():
            return ".".join(atoms[i:])
    return qualified


@dataclass
class ModuleMap:
    """Module parts to autotile tensor names (built by :func:`export`).

    - ``inputs``: forward argument name -> autotile input name
    - ``params``: autotile parameter name -> ONNX initializer name
    - ``calls``: the module calls of one forward, in order: ``(qualified name, exporter
      scope, [shape of each output tensor], [autotile names of the scope's boundary tensors]``)
    """

    inputs: Dict[str, str] = field(default_factory=dict)
    params: Dict[str, str] = field(default_factory=dict)
    calls: List[Tuple[str, str, List[tuple], List[str]]] = field(default_factory=list)

    def resolve(self, shapes: Dict[str, tuple]):
        """``(outputs, unmapped)`` given the planned tensors' shapes: ``outputs[(qualified
        name, k)]`` the plan tensor (or None) of each output tensor of the k-th call of that
        module in one forward, matched to the scope's boundary tensors one to one by shape;
        ``unmapped``: ``(qualified name, k, reason)`` of the calls with no tensor."""
        seen: Dict[str, int] = {}
        outputs, unmapped = {}, []
        for q, scope, out_shapes, found in self.calls:
            k = seen.get(q, 0)
            seen[q] = k + 1
            found = [t for t in found if t in shapes]
            names: List[Optional[str]] = []
            for shape in out_shapes:
                match = [t for t in found if tuple(shapes[t]) == tuple(shape)]
                names.append(match[0] if len(match) == 1 else None)
            outputs[(q, k)] = names
            if not out_shapes:
                unmapped.append((q, k, "returns no tensor"))
            elif not found:
                unmapped.append((q, k, f"no planned tensor is computed in scope '{scope}' and used outside it"))
            elif None in names:
                unmapped.append((q, k, f"its output shapes {out_shapes} do not match the scope's boundary "
                                       f"tensors {found} one to one"))
        return outputs, unmapped


def flat_tensors(value) -> list:
    """The tensors of a module's output, in order (tuples, lists and dicts flattened)."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in flat_tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in flat_tensors(v)]
    return []


def record_calls(module, args: Sequence) -> List[Tuple[str, str, List[tuple]]]:
    """Run `module` once on `args` (no gradient) and record every submodule call in order:
    ``(qualified name, exporter scope, [shape of each output tensor])``."""
    import torch

    names = {id(m): q for q, m in module.named_modules()}
    stack: List[str] = []
    counts: Dict[str, int] = {}
    calls: List[list] = []
    order: List[int] = []

    def pre(mod, _inputs):
        q = names.get(id(mod))
        if mod is module or q is None:
            return
        parent = "/".join(stack)
        comp = _unqualified(q)
        key = parent + "/" + comp
        k = counts.get(key, 0)
        counts[key] = k + 1
        stack.append(comp if k == 0 else f"{comp}_{k}")
        order.append(len(calls))
        calls.append([q, "/" + "/".join(stack) + "/", None])

    def post(mod, _inputs, output):
        if mod is module or id(mod) not in names:
            return
        stack.pop()
        calls[order.pop()][2] = [tuple(t.shape) for t in flat_tensors(output)]

    handles = []
    for m in module.modules():
        handles.append(m.register_forward_pre_hook(pre))
        handles.append(m.register_forward_hook(post))
    try:
        with torch.no_grad():
            module(*args)
    finally:
        for h in handles:
            h.remove()
    return [tuple(c) for c in calls]


def boundary_tensors(graph, scope: str) -> List[str]:
    """ONNX tensors a node named inside `scope` produces and a node outside it (or the
    graph's output list) consumes, in node order."""
    nodes = list(graph.node)
    inside = [node.name.startswith(scope) for node in nodes]
    produced = [o for node, ins in zip(nodes, inside) if ins for o in node.output if o]
    made = set(produced)
    used_outside = {o.name for o in graph.output}
    for node, ins in zip(nodes, inside):
        if not ins:
            used_outside.update(i for i in node.input if i in made)
    return [t for t in produced if t in used_outside]


def forward_arg_names(module, count: Optional[int] = None) -> List[str]:
    """The names of ``module.forward``'s positional parameters (the first `count`)."""
    params = [p.name for p in inspect.signature(module.forward).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if count is None:
        return params
    if len(params) < count:
        raise Error(f"{type(module).__name__}.forward takes {len(params)} positional arguments, "
                    f"{count} example inputs given")
    return params[:count]


def export(module, *args, opset: int = 17, **load_kwargs):
    """Export `module` on the example inputs `args` with the TorchScript ONNX exporter (the
    parameter names kept, one initializer per parameter, no constant folding, the inputs
    named after ``forward``'s arguments, outputs ``output`` / ``output_0``, ...), import it with ``at.onnx.load`` and
    return the Symbol with ``sym.torch_map`` (a :class:`ModuleMap`) attached: plan it with
    ``at.plan(sym, ...)`` and run the plan with ``autotile.torch.parallelize(module, plan,
    sym)``. ``load_kwargs`` go to ``at.onnx.load`` (``trainable=`` etc.)."""
    import torch

    try:
        import onnx  # noqa: F401  (before the module runs)
    except ImportError:
        raise Error(f"autotile.torch.export needs the onnx package: {install_hint('onnx')}") from None

    if not isinstance(module, torch.nn.Module):
        raise Error(f"autotile.torch.export takes an nn.Module and its example inputs, got module of type "
                    f"{type(module).__name__}")
    args = tuple(args)
    if not args:
        raise Error(f"autotile.torch.export({type(module).__name__}) needs example inputs, one per argument of "
                    f"forward{tuple(forward_arg_names(module))}: export(module, x, ...)")
    input_names = forward_arg_names(module, len(args))
    calls = record_calls_restoring(module, args)
    model = onnx_export(module, args, input_names, opset=opset)
    return import_export(module, model, calls, input_names, **load_kwargs)


def import_export(module, model, calls, input_names: Sequence[str], **load_kwargs):
    """Import the ONNX export `model` of `module` (``at.onnx.load``, trainable: the module's
    parameters that want a gradient unless ``load_kwargs`` say) with ``sym.torch_map``."""
    from .. import onnx as at_onnx

    if "trainable" not in load_kwargs:
        # what the module trains: its parameters that want a gradient, not its buffers (BatchNorm's
        # running statistics, a registered scale), which the import's own rule would train
        inits = {t.name for t in model.graph.initializer}
        want = {n for n, p in module.named_parameters(remove_duplicate=False) if p.requires_grad}
        load_kwargs["trainable"] = [glob.escape(n) for n in sorted(want & inits)]  # names, not patterns
    sym = at_onnx.load(model, **load_kwargs)
    sym.torch_map = module_map(model, sym.onnx_names, calls, input_names)
    return sym


def in_eval_mode(module, fn):
    """``fn()`` with `module` in eval mode (as the exporter traces it), each module's mode
    and every buffer (BatchNorm's running statistics) restored after."""
    import torch

    modes = [(m, m.training) for m in module.modules()]
    buffers = [(b, b.detach().clone()) for b in module.buffers()]
    module.eval()
    try:
        return fn()
    finally:
        for m, mode in modes:
            m.training = mode
        with torch.no_grad():
            for b, kept in buffers:
                b.copy_(kept)


def record_calls_restoring(module, args):
    """:func:`record_calls` in eval mode, the module's modes and buffers restored."""
    return in_eval_mode(module, lambda: record_calls(module, args))


def onnx_export(module, args, input_names: Sequence[str], opset: int = 17):
    """The TorchScript ONNX export of `module` on `args` as an ``onnx.ModelProto``: parameter
    names kept, one initializer per parameter, no constant folding, inputs `input_names`,
    outputs ``output`` / ``output_0``, ..., traced in eval mode (modes and buffers restored)."""
    import torch

    try:
        import onnx
    except ImportError:
        raise Error(f"autotile.torch needs the onnx package: {install_hint('torch')}") from None

    def run():
        with torch.no_grad():
            out = module(*args)
        n_out = len(flat_tensors(out))
        output_names = ["output"] if n_out == 1 else [f"output_{i}" for i in range(n_out)]
        buf = io.BytesIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
            # keep_initializers_as_inputs: in eval mode the exporter otherwise merges parameters of
            # equal values (two fresh LayerNorms' weights) into one initializer and an Identity
            with exportable(module):  # defaulted forward arguments, SDPA with enable_gqa
                torch.onnx.export(module, tuple(args), buf, dynamo=False, do_constant_folding=False,
                                  opset_version=opset, input_names=list(input_names), output_names=output_names,
                                  keep_initializers_as_inputs=True)
        return onnx.load_from_string(buf.getvalue())

    return in_eval_mode(module, run)


def module_map(model, onnx_names: Dict[str, str], calls, input_names: Sequence[str]) -> ModuleMap:
    """The :class:`ModuleMap` of an exported ONNX model: `calls` from :func:`record_calls`,
    `onnx_names` the import's ONNX -> autotile names."""
    graph = model.graph
    initializers = {t.name for t in graph.initializer}
    out = ModuleMap(inputs={n: onnx_names[n] for n in input_names if n in onnx_names},
                    params={onnx_names[n]: n for n in initializers if n in onnx_names})
    for q, scope, out_shapes in calls:
        found = [onnx_names[t] for t in boundary_tensors(graph, scope) if t in onnx_names]
        out.calls.append((q, scope, list(out_shapes or []), found))
    return out
