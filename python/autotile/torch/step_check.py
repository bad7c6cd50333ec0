"""One SGD step of a module parallelized by a plan against the same step of the plain module
in the same process: the check the tests and ``autotile bench engines-torch`` run on every
rank (``run_local(compare_step, 8, ...)``)."""
from __future__ import annotations

import copy
from typing import Sequence

from ..errors import Error


def sgd_step(module, inputs: Sequence, lr: float):
    """``module(*inputs)``, backward of the output's sum (head gradient one, as autotile's
    step for a model without a loss), one ``torch.optim.SGD`` step; returns the output."""
    import torch

    _check_inputs("sgd_step", inputs)
    out = module(*inputs)
    out.sum().backward()
    torch.optim.SGD(module.parameters(), lr=lr).step()
    return out


def _check_inputs(where: str, inputs) -> None:
    # a bare tensor would be unpacked along its first dimension, one row per forward argument
    if not isinstance(inputs, (tuple, list)):
        raise Error(f"{where}: inputs must be a tuple or list of forward's arguments (e.g. (x,)), got "
                    f"{type(inputs).__name__}")


def placement_text(p) -> str:
    """A DTensor placement as the layout exports write it: ``Shard(d)``, ``Replicate()``,
    ``Partial()``."""
    if p.is_shard():
        return f"Shard({p.dim})"
    return "Partial()" if p.is_partial() else "Replicate()"


def _full(t):
    from torch.distributed.tensor import DTensor

    return t.full_tensor() if isinstance(t, DTensor) else t


def compare_step(rank: int, module, plan, model, inputs: Sequence, lr: float = 0.1) -> dict:
    """Run one :func:`sgd_step` of `module` parallelized by `plan` (under DTensor's
    CommDebugMode, :func:`autotile.torch.comm.measure`) and of a plain copy; return the
    largest absolute differences of the output, every parameter's gradient and every updated
    parameter (``diff``; ``worst``: the parameter of the largest, each owner of a tied tensor
    by its own name) and the largest magnitudes of the plain step's (``scale``),
    DTensor's collective counts and bytes, what the hooks did, and how the parameters were
    laid out (``params``: module parameter -> plan tensor, ``transposed``, ``layout``:
    parameter -> (placements, this rank's local shape)). Call on every rank of a group of
    ``plan.devices``."""
    import torch
    from torch.distributed.tensor import DTensor

    from .comm import measure
    from .parallel import parallelize

    _check_inputs("compare_step", inputs)
    ref = copy.deepcopy(module)
    ref_out = sgd_step(ref, inputs, lr)
    # every owner of a tensor by its own name (remove_duplicate=False): a parallelizer that
    # unties a tied parameter shows as a difference under the second owner's name
    ref_params = dict(ref.named_parameters(remove_duplicate=False))
    mod = parallelize(copy.deepcopy(module), plan, model)
    out, report = measure(sgd_step, mod, inputs, lr)
    got = dict(mod.named_parameters(remove_duplicate=False))
    if sorted(got) != sorted(ref_params):
        raise Error(f"the parallelized {type(module).__name__} has parameters {sorted(set(got) - set(ref_params))} "
                    f"the module has not and lacks {sorted(set(ref_params) - set(got))}")
    with torch.no_grad():
        diff = {"output": float((_full(out) - ref_out).abs().max()), "grad": 0.0, "param": 0.0}
        scale = {"output": float(ref_out.abs().max()), "grad": 0.0, "param": 0.0}
        worst = {"grad": None, "param": None}
        for name, p in got.items():
            ref = ref_params[name]
            for kind, mine, theirs in (("grad", p.grad, ref.grad), ("param", p, ref)):
                if theirs is None:  # no gradient in the plain step (unused or frozen)
                    d = 0.0 if mine is None else float(_full(mine).abs().max())
                else:
                    d = float("inf") if mine is None else float((_full(mine) - theirs).abs().max())
                    scale[kind] = max(scale[kind], float(theirs.abs().max()))
                if worst[kind] is None or d > diff[kind]:
                    diff[kind], worst[kind] = max(diff[kind], d), name
    state = mod.autotile
    layout = {name: ([placement_text(x) for x in p.placements], list(p.to_local().shape))
              for name, p in got.items() if isinstance(p, DTensor)}
    return {"rank": rank, "diff": diff, "worst": worst, "scale": scale, "report": report, "mesh": state.layout["mesh"],
            "params": dict(state.params), "transposed": sorted(state.transposed), "layout": layout,
            "redistributed": [(q, k, name, str(a), str(b)) for q, k, name, a, b in state.redistributed],
            "unmapped": list(state.unmapped), "unexpressed": list(state.layout["unexpressed"])}
