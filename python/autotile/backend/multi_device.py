"""A training (or inference) step on k devices: plan, transform, run on the host runtime,
and hand back outputs, gradients and updated params in the user's layout."""
from __future__ import annotations

import time
from typing import Dict, Optional

import numpy as np

from ..errors import Error


def plan_and_transform(sym, devices: int, values: Dict[str, np.ndarray], plan=None, algorithm: str = "tofu",
                       optimizer: str = "sgd", control_deps: bool = True, device_memory: Optional[int] = None,
                       replicate_fallback: bool = False):
    """The execution graph of one training step on `devices` devices, planning it unless a plan
    is given (shapes from `values`), and the time each phase took. Shared by every runtime."""
    from .. import planner
    from ..autodiff.graph import default_data_names
    from ..execgraph import transform

    stats = {}
    t0 = time.perf_counter()
    if plan is None:
        data_shapes = {k: tuple(np.shape(v)) for k, v in values.items()}
        shapes = {n: data_shapes[n] for n in default_data_names(sym) if n in data_shapes}
        plan = planner.plan(sym, devices=devices, shapes=shapes, algorithm=algorithm, optimizer=optimizer,
                            replicate_fallback=replicate_fallback)
    elif plan.devices != devices:
        raise Error(f"the plan was made for {plan.devices} devices, not {devices}")
    stats["plan_seconds"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    eg = transform(sym, plan, control_deps=control_deps, device_memory=device_memory,
                   replicate_fallback=replicate_fallback)
    stats["transform_seconds"] = time.perf_counter() - t1
    return plan, eg, stats


def run_multi_device(sym, devices: int, values: Dict[str, np.ndarray], train: bool = True, optimizer: str = "sgd",
                     optimizer_args: Optional[dict] = None, seed: int = 0, plan=None, algorithm: str = "tofu",
                     control_deps: bool = True, device_memory: Optional[int] = None, replicate_fallback: bool = False):
    from .host_runtime import HostRuntime
    from .run import Result
    from .tiles import step_inputs

    if not train:
        raise Error("devices > 1 runs training steps (train=True); run inference with devices=1")
    if optimizer_args:
        raise Error("optimizer_args are not supported on devices > 1 yet: the plan uses the optimizer's defaults")
    plan, eg, stats = plan_and_transform(sym, devices, values, plan, algorithm, optimizer, control_deps,
                                         device_memory, replicate_fallback)
    tg = eg.training
    rt = HostRuntime(eg)
    rt.load(step_inputs(eg, values))  # optimizer state starts at zero; heads at one
    stats.update(rt.run(is_train=True, seed=seed))
    outputs = [rt.gather(n) for n in tg.output_names]
    grads = {p: rt.gather(g) for p, g in zip(tg.param_names, tg.grad_names)}
    params = {p: rt.gather(u) for p, u in zip(tg.param_names, tg.updated_names)}
    eg_stats = eg.stats()
    stats.update(bytes=eg_stats["bytes"], bytes_per_device=eg_stats["bytes_per_device"],
                 peak_memory=eg_stats["peak_memory"])
    return Result(outputs=outputs, grads=grads, params=params, plan=plan, stats=stats)
