"""What DTensor moves, beside what the plan says: DTensor's ``CommDebugMode`` collective
counts, and the bytes of those collectives in ``plan.comm_bytes``' accounting (ring
collectives, bytes received summed over ranks: an all-reduce of S bytes over n ranks is
2 (n - 1) S, an all-gather to S, a reduce-scatter from S and an all-to-all of S are
(n - 1) S, a broadcast of S is (n - 1) S)."""
from __future__ import annotations

import math
import numbers
from collections import defaultdict
from typing import Callable, Dict

from ..errors import Error

#: collective kinds by the functional-collective op name
KINDS = {"all_reduce": "all-reduce", "all_reduce_coalesced": "all-reduce",
         "all_gather_into_tensor": "all-gather", "all_gather_into_tensor_coalesced": "all-gather",
         "reduce_scatter_tensor": "reduce-scatter", "reduce_scatter_tensor_coalesced": "reduce-scatter",
         "all_to_all_single": "all-to-all", "broadcast": "broadcast"}


def _group_size(group_name) -> int:
    from torch.distributed.distributed_c10d import _resolve_process_group

    return _resolve_process_group(group_name).size()


def received_bytes(op: str, args) -> float:
    """Bytes this rank receives in one functional collective `op` (``all_reduce``, ...) called
    with `args`: its share of the ring accounting above."""
    import torch

    tensors = args[0] if isinstance(args[0], (list, tuple)) else [args[0]]
    local = sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))
    n = _group_size(args[-1])
    kind = KINDS[op]
    if kind == "all-reduce":
        return 2 * (n - 1) / n * local
    if kind == "all-gather":
        return (n - 1) * local
    if kind == "broadcast":
        return (n - 1) / n * local
    return (n - 1) / n * local  # reduce-scatter (input: the whole tensor), all-to-all


def comm_mode():
    """A ``CommDebugMode`` that also adds up each collective's received bytes by kind
    (``mode.bytes``), for this rank."""
    import torch
    from torch.distributed.tensor.debug import CommDebugMode

    class CommBytesMode(CommDebugMode):
        def __init__(self):
            super().__init__()
            self.bytes: Dict[str, float] = defaultdict(float)
            # no per-module tracking: CommDebugMode's module tracker fails inside some models
            # (T5: 'list index out of range' in its forward hook); counts and bytes are global
            self.advanced_module_tracker = _NoModuleTracker()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = super().__torch_dispatch__(func, types, args, kwargs)
            if out is NotImplemented or isinstance(func, torch._ops.HigherOrderOperator):
                return out
            name = func._overloadpacket.__name__
            if name in KINDS and func._overloadpacket in (getattr(torch.ops._c10d_functional, name, None),
                                                          getattr(torch.ops.c10d_functional, name, None)):
                self.bytes[KINDS[name]] += received_bytes(name, args)
            return out

    return CommBytesMode()


class _NoModuleTracker:
    """What CommDebugMode reads of its module tracker, for one global scope."""
    name, is_bw, activation_checkpointing = "Global", False, False
    module_parents_dict = {"Global": {"Global"}}

    def __enter__(self):
        return self

    def __exit__(self, *args):
        return None


def measure(fn: Callable, *args, **kwargs):
    """``(result, report)``: ``fn(*args, **kwargs)`` run on every rank under :func:`comm_mode`;
    `report` holds DTensor's collective counts (``counts``: {op name: n}, from this rank's
    ``CommDebugMode``) and the bytes received summed over all ranks (``bytes``: {kind: B},
    ``total_bytes``). Call it on every rank (it all-reduces the byte counts)."""
    import torch
    import torch.distributed as dist

    if not callable(fn):
        raise Error(f"measure(fn, ...): fn must be callable, got {type(fn).__name__}")
    if not (dist.is_available() and dist.is_initialized()):
        raise Error("measure() runs on every rank of a torch.distributed process group and sums the bytes over "
                    "them: no process group is initialised (torch.distributed.init_process_group, torchrun, "
                    "or autotile.torch.run_local)")
    with comm_mode() as mode:
        result = fn(*args, **kwargs)
    kinds = sorted(set(KINDS.values()))
    mine = torch.tensor([mode.bytes.get(k, 0.0) for k in kinds], dtype=torch.float64)
    dist.all_reduce(mine)
    by_kind = {k: float(v) for k, v in zip(kinds, mine.tolist()) if v}
    counts = {str(getattr(op, "__name__", op)): int(c) for op, c in mode.get_comm_counts().items()}
    return result, {"counts": counts, "bytes": by_kind, "total_bytes": sum(by_kind.values())}


def _check_report(report) -> None:
    """`report` is what :func:`measure` returns, or an Error naming the part that is not."""
    if not isinstance(report, dict):
        raise Error(f"beside_plan: report must be measure()'s dict (counts, bytes, total_bytes), got "
                    f"{type(report).__name__}")
    for key, kind in (("counts", dict), ("bytes", dict), ("total_bytes", numbers.Real)):
        if key not in report:
            raise Error(f"beside_plan: report has no '{key}' (measure() returns counts, bytes and total_bytes)")
        v = report[key]
        if not isinstance(v, kind) or isinstance(v, bool):
            raise Error(f"beside_plan: report['{key}'] must be a {'dict' if kind is dict else 'number'}, got "
                        f"{type(v).__name__}")
    values = [("report['total_bytes']", report["total_bytes"])]
    values += [(f"report['bytes']['{n}']", b) for n, b in report["bytes"].items()]
    for k, v in values:
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or v < 0:
            raise Error(f"beside_plan: {k} must be a finite number of bytes >= 0, got {v!r}")


def beside_plan(plan, report: dict, model=None) -> dict:
    """DTensor's `report` (from :func:`measure`) next to the plan's own figures:
    ``plan.comm_bytes`` and, when `model` (the planned Symbol) is given, what autotile's
    execution graph of the plan moves (``plan_graph``: bytes, fetches, reductions)."""
    from ..planner.plan import Plan
    from ..symbol import Symbol

    if not isinstance(plan, Plan):
        raise Error(f"beside_plan: plan must be an autotile Plan (at.plan(...)), got {type(plan).__name__}")
    if model is not None and not isinstance(model, Symbol):
        raise Error(f"beside_plan: model must be the planned Symbol (or None), got {type(model).__name__}")
    _check_report(report)
    out = {"plan_bytes": float(plan.comm_bytes), "dtensor_bytes": report["total_bytes"],
           "dtensor_counts": dict(report["counts"]), "dtensor_bytes_by_kind": dict(report["bytes"])}
    if model is not None:
        import autotile as at

        stats = at.transform(model, plan).stats()
        out["plan_graph"] = {"bytes": stats["bytes"], "fetches": stats["fetch_ops"],
                             "reductions": stats["reductions"]}
    return out
