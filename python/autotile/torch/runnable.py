"""Plans DTensor can run: a plan's training step tried at plan time on one process, and the
module calls DTensor cannot run as planned given a layout it can run, as a constraint of the
search.

DTensor runs each op on the placements its inputs arrive in, and some ops it cannot run on
some placements (``nn.MultiheadAttention``'s packed projection split by a tofu plan:
"Cannot unflatten unevenly sharded tensor"; attention's backward on a split batch:
``NotImplementedError``; convolution with split weights); on gloo ranks such a failure came
minutes into the first step. :func:`dry_run` runs one SGD step of the parallelized module in
a forked process on a fake process group of ``plan.devices`` ranks (DTensor's sharding
propagation, no data moved: seconds) and names the module call that failed and the op.
:func:`runnable_plan` then plans again with that module *whole*: layout rules replicating its
parameters and the tensors of its scope (the search lays out the rest around it, the bytes
of gathering its inputs counted), and ``plan.torch_whole`` listing it, which
:func:`~autotile.torch.parallelize` runs on replicated inputs (the module's output handed to
the plan's layout after it). A failure in the root module's own forward, or one a whole
module does not cure, is an :class:`autotile.Error` naming the module and the op."""
from __future__ import annotations

import glob
import re
from typing import Dict, List, Optional, Sequence

from ..errors import Error

#: failures a whole module cannot cure stop the search after this many re-plans
MAX_ROUNDS = 12


def _op_of(message: str) -> Optional[str]:
    found = re.search(r"aten\.(\w+)", message)
    return found.group(1) if found else None


def _dry_step(module, plan, inputs, conn) -> None:
    """In the forked child: a fake process group of ``plan.devices`` ranks, this one rank 0;
    one SGD step of the parallelized module; what failed sent back on `conn`."""
    import copy
    import traceback

    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore
    from torch.utils._python_dispatch import TorchDispatchMode

    from .parallel import parallelize

    ran: Dict[str, List[str]] = {}  # aten op -> the modules that ran it (innermost first seen)

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            stack = getattr(getattr(mod, "autotile", None), "stack", None)
            if stack:
                ran.setdefault(func._overloadpacket.__name__, [])
                if stack[-1] not in ran[func._overloadpacket.__name__]:
                    ran[func._overloadpacket.__name__].append(stack[-1])
            return func(*args, **(kwargs or {}))

    phase, mod = "parallelize", None
    try:
        torch.set_num_threads(1)
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=plan.devices)
        mod = parallelize(copy.deepcopy(module), plan, device_type="cpu")
        phase = "forward"
        with Record():
            out = mod(*inputs)
        phase = "backward"
        sgd_step_backward(out)
        conn.send(None)
    except BaseException as e:  # noqa: BLE001 - everything goes back to the parent
        cause = e.__cause__ if isinstance(e, Error) and e.__cause__ is not None else e
        message = f"{type(cause).__name__}: {str(cause).strip()}"
        op = _op_of(message)
        where: List[str] = []
        if phase == "forward":
            stack = list(getattr(getattr(mod, "autotile", None), "stack", []) or [])
            where = stack[-1:]
        elif phase == "backward" and op is not None:
            # the forward op: the longest recorded name the backward's starts with
            # (embedding for embedding_dense_backward, hardswish for hardswish_backward)
            forward_ops = sorted((f for f in ran if op.startswith(f)), key=len)
            where = ran[forward_ops[-1]] if forward_ops else []
        frames = [f.filename.replace("\\", "/") for f in traceback.extract_tb(cause.__traceback__)]
        conn.send({"phase": phase, "modules": where, "op": op, "message": message[:600],
                   "dtensor": any("torch/distributed/tensor" in f for f in frames) or "DTensor" in message})
    finally:
        conn.close()


def sgd_step_backward(out) -> None:
    """The backward of :func:`~autotile.torch.step_check.sgd_step` (head gradient one)."""
    out.sum().backward()


def dry_run(module, plan, inputs: Sequence, timeout: float = 600) -> Optional[dict]:
    """None when the forward and backward of `module` parallelized by `plan` (with
    ``plan.torch_model``) run under DTensor on a fake process group of ``plan.devices``
    ranks, in a forked process (nothing moves between ranks; values are not checked, layouts
    are); else what failed: ``phase`` (parallelize, forward, backward), ``modules`` (the
    module calls: the innermost in progress for the forward, those that ran the failing op's
    forward for the backward), ``op`` (the aten op its message names), ``message``."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    reader, writer = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_dry_step, args=(module, plan, tuple(inputs), writer), daemon=True)
    p.start()
    writer.close()
    try:
        if not reader.poll(timeout):
            raise Error(f"the dry run of {type(module).__name__}'s parallelized step did not end in {timeout:.0f} s")
        try:
            got = reader.recv()
        except EOFError:
            p.join()
            raise Error(f"the dry run of {type(module).__name__}'s parallelized step died (exit code "
                        f"{p.exitcode})") from None
    finally:
        reader.close()
        if p.is_alive():
            p.kill()
        p.join()
    return got


def whole_rules(plan, modules: Sequence[str]) -> Dict[str, dict]:
    """Layout rules replicating, on every mesh axis, the parameters of each module in
    `modules` (qualified names) and the plan tensors its calls compute (the ONNX scopes of
    ``plan.torch_model.torch_map``): the layout :func:`parallelize` runs a whole module on."""
    sym = plan.torch_model
    tmap = sym.torch_map
    known = set(plan.tensor_tilings)
    scopes = [scope for q, scope, _, _ in tmap.calls if q in modules and scope]
    names = set()
    for onnx_name, name in sym.onnx_names.items():
        if any(onnx_name.startswith(s) for s in scopes):
            names.add(name)
    for name, pname in tmap.params.items():
        if any(q == "" or pname.startswith(q + ".") for q in modules):
            names.add(name)
    return {glob.escape(n): {} for n in sorted(names & known)}


def _outermost(modules) -> List[str]:
    """`modules` without those inside another of them."""
    mods = sorted(set(modules), key=len)
    return [q for i, q in enumerate(mods) if not any(q.startswith(p + ".") for p in mods[:i])]


def _parent(q: str) -> str:
    return q.rsplit(".", 1)[0] if "." in q else ""


def runnable_plan(module, example_inputs, *, devices: Optional[int] = None, mesh=None, layout=None,
                  algorithm: str = "tofu", timeout: float = 600, **plan_kwargs):
    """``autotile.torch.plan(module, example_inputs, ...)`` (loss: the sum of the outputs, as
    :func:`~autotile.torch.step_check.sgd_step` trains), made runnable under DTensor: while
    :func:`dry_run` fails in a module call, that module (its parent, when it is already
    whole) is planned whole (:func:`whole_rules` added to `layout`) and the search runs
    again. Returns the plan with ``plan.torch_whole`` (the modules run whole) and
    ``plan.torch_rounds`` (each dry run's failure). Raises :class:`autotile.Error` naming
    the module and the op when the failure is in the root module's own forward, when it is
    not DTensor's, or after :data:`MAX_ROUNDS` re-plans."""
    from .plan import plan as torch_plan

    inputs = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    first = torch_plan(module, inputs, devices=devices, mesh=mesh, layout=layout, algorithm=algorithm,
                       dtensor_check=False, **plan_kwargs)
    return make_runnable(module, inputs, first, devices=devices, mesh=mesh, layout=layout, algorithm=algorithm,
                         timeout=timeout, plan_kwargs=plan_kwargs)


def make_runnable(module, inputs: Sequence, first, *, devices=None, mesh=None, layout=None,
                  algorithm: str = "tofu", timeout: float = 600, plan_kwargs=None):
    """`first` (a plan of ``autotile.torch.plan``) made runnable under DTensor, as
    :func:`runnable_plan` describes: convolution parameters replicated, then while
    :func:`dry_run` fails in a module call that module is planned whole and the search runs
    again. `devices`, `mesh`, `layout`, `algorithm` and `plan_kwargs` are those `first` was
    planned with."""
    import torch

    plan_kwargs = dict(plan_kwargs or {})
    inputs = tuple(inputs)
    p, whole, rounds = first, [], []
    p.torch_whole = []
    # DTensor's convolution lays its output out as its input and ignores the weight's
    # placements: convolution parameters are replicated (the search lays out the rest)
    convs = [q for q, sub in module.named_modules() if isinstance(sub, torch.nn.modules.conv._ConvNd)]
    pins = _param_rules(first, convs)
    if pins:
        p = _replan(first, dict(layout or {}), pins, devices, mesh, algorithm, plan_kwargs)
    while True:
        failure = dry_run(module, p, inputs, timeout)
        if failure is None:
            p.torch_rounds = rounds
            return p
        rounds.append(failure)
        name = type(module).__name__
        where = failure["modules"]
        op = failure["op"] or "?"
        if not failure["dtensor"] and failure["phase"] != "backward":
            raise Error(f"{name}: the parallelized step fails in {failure['phase']} "
                        f"(module '{where[0] if where else '(root)'}', op {op}), not in DTensor: {failure['message']}")
        if not where or "" in where or len(rounds) > MAX_ROUNDS:
            q = where[0] if where else "(root)"
            raise Error(f"{name}: DTensor cannot run op {op} of module '{q or '(root)'}' on any layout "
                        f"autotile planned ({len(rounds)} plan(s); whole modules tried: {', '.join(whole) or 'none'}): "
                        f"{failure['message']}")
        grow = [_parent(q) if q in whole else q for q in where]
        if "" in grow:
            raise Error(f"{name}: DTensor cannot run op {op} of module '{where[0]}' even on whole (replicated) "
                        f"inputs: {failure['message']}")
        whole = _outermost(whole + grow)
        p = _replan(first, dict(layout or {}), {**pins, **whole_rules(first, whole)}, devices, mesh, algorithm,
                    plan_kwargs)
        p.torch_whole = list(whole)


def _replan(first, rules, extra, devices, mesh, algorithm, plan_kwargs):
    """`first`'s model planned again with layout `rules` plus `extra` (where the user's
    rules do not decide), carrying `first`'s torch attributes."""
    from .. import planner

    rules.update({k: v for k, v in extra.items() if k not in rules})
    p = planner.plan(first.torch_model, devices=devices, mesh=mesh, layout=rules, algorithm=algorithm, **plan_kwargs)
    for attr in ("torch_model", "torch_params", "torch_loss"):
        setattr(p, attr, getattr(first, attr))
    p.torch_whole = []
    return p


def _param_rules(plan, modules: Sequence[str]) -> Dict[str, dict]:
    """Layout rules replicating the parameters of `modules` (qualified names)."""
    known = set(plan.tensor_tilings)
    return {glob.escape(n): {} for n, pname in plan.torch_model.torch_map.params.items()
            if n in known and any(pname.startswith(q + ".") for q in modules)}
