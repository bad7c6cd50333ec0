"""One SGD step of a module parallelized by a plan against the same step of the plain module
in the same process: the check the tests and ``autotile bench engines-torch`` run on every
rank (``run_local(compare_step, 8, ...)``)."""
from __future__ import annotations

import copy
from typing import Sequence


def sgd_step(module, inputs: Sequence, lr: float):
    """``module(*inputs)``, backward of the output's sum (head gradient one, as autotile's
    step for a model without a loss), one ``torch.optim.SGD`` step; returns the output."""
    import torch

    out = module(*inputs)
    out.sum().backward()
    torch.optim.SGD(module.parameters(), lr=lr).step()
    return out


def _full(t):
    from torch.distributed.tensor import DTensor

    return t.full_tensor() if isinstance(t, DTensor) else t


def compare_step(rank: int, module, plan, model, inputs: Sequence, lr: float = 0.1) -> dict:
    """Run one :func:`sgd_step` of `module` parallelized by `plan` (under DTensor's
    CommDebugMode, :func:`autotile.torch.comm.measure`) and of a plain copy; return the
    largest absolute differences of the output, every parameter's gradient and every updated
    parameter (``diff``) and the largest magnitudes of the plain step's (``scale``),
    DTensor's collective counts and bytes, and what the hooks did. Call on every rank of a
    group of ``plan.devices``."""
    import torch

    from .comm import measure
    from .parallel import parallelize

    ref = copy.deepcopy(module)
    ref_out = sgd_step(ref, inputs, lr)
    ref_params = dict(ref.named_parameters())
    mod = parallelize(copy.deepcopy(module), plan, model)
    out, report = measure(sgd_step, mod, inputs, lr)
    with torch.no_grad():
        diff = {"output": float((_full(out) - ref_out).abs().max()), "grad": 0.0, "param": 0.0}
        scale = {"output": float(ref_out.abs().max()), "grad": 0.0, "param": 0.0}
        for name, p in mod.named_parameters():
            ref = ref_params[name]
            diff["grad"] = max(diff["grad"], float((_full(p.grad) - ref.grad).abs().max()))
            diff["param"] = max(diff["param"], float((_full(p) - ref).abs().max()))
            scale["grad"] = max(scale["grad"], float(ref.grad.abs().max()))
            scale["param"] = max(scale["param"], float(ref.abs().max()))
    state = mod.autotile
    return {"rank": rank, "diff": diff, "scale": scale, "report": report, "mesh": state.layout["mesh"],
            "redistributed": [(q, k, name, str(a), str(b)) for q, k, name, a, b in state.redistributed],
            "unmapped": list(state.unmapped), "unexpressed": list(state.layout["unexpressed"])}
