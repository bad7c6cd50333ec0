"""A training (or inference) step on k devices: plan, transform, run on the host runtime,
and hand back outputs, gradients and updated params in the user's layout."""
from __future__ import annotations

import time
from typing import Dict, Optional

import numpy as np

from ..errors import Error


def run_multi_device(sym, devices: int, values: Dict[str, np.ndarray], train: bool = True, optimizer: str = "sgd",
                     optimizer_args: Optional[dict] = None, seed: int = 0, plan=None, algorithm: str = "tofu",
                     control_deps: bool = True, device_memory: Optional[int] = None, replicate_fallback: bool = False):
    from .. import planner
    from ..execgraph import transform
    from .host_runtime import HostRuntime
    from .tiles import step_inputs
    from .run import Result

    if not train:
        raise Error("devices > 1 runs training steps (train=True); run inference with devices=1")
    if optimizer_args:
        raise Error("optimizer_args are not supported on devices > 1 yet: the plan uses the optimizer's defaults")
    stats = {}
    t0 = time.perf_counter()
    data_shapes = {k: tuple(np.shape(v)) for k, v in values.items()}
    if plan is None:
        from ..autodiff.graph import default_data_names

        shapes = {n: data_shapes[n] for n in default_data_names(sym.list_arguments()) if n in data_shapes}
        plan = planner.plan(sym, devices=devices, shapes=shapes, algorithm=algorithm, optimizer=optimizer,
                            replicate_fallback=replicate_fallback)
    elif plan.devices != devices:
        raise Error(f"the plan was made for {plan.devices} devices, not {devices}")
    stats["plan_seconds"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    eg = transform(sym, plan, control_deps=control_deps, device_memory=device_memory,
                   replicate_fallback=replicate_fallback)
    stats["transform_seconds"] = time.perf_counter() - t1
    tg = eg.training
    inputs = step_inputs(eg, values)  # optimizer state starts at zero; heads at one
    rt = HostRuntime(eg)
    rt.load(inputs)
    stats.update(rt.run(is_train=True, seed=seed))
    outputs = [rt.gather(n) for n in tg.output_names]
    grads = {p: rt.gather(g) for p, g in zip(tg.param_names, tg.grad_names)}
    params = {p: rt.gather(u) for p, u in zip(tg.param_names, tg.updated_names)}
    stats["bytes"] = eg.stats()["bytes"]
    stats["bytes_per_device"] = eg.stats()["bytes_per_device"]
    stats["peak_memory"] = eg.stats()["peak_memory"]
    return Result(outputs=outputs, grads=grads, params=params, plan=plan, stats=stats)
