"""A training (or inference) step on k devices: plan, transform, run on the host runtime,
and hand back outputs, gradients, updated params, optimizer states and BatchNorm statistics
in the user's layout."""
from __future__ import annotations

import time
from typing import Callable, Dict, Iterable, Optional

import numpy as np

from ..errors import Error
from .tiles import box_index


def plan_and_transform(sym, devices: int, values: Dict[str, np.ndarray], plan=None, algorithm: str = "tofu",
                       optimizer: str = "sgd", control_deps: bool = True, device_memory: Optional[int] = None,
                       replicate_fallback: bool = False, train: bool = True, optimizer_args: Optional[dict] = None):
    """The execution graph of one training step (with ``train=False``: of the forward graph
    alone) on `devices` devices, planning it unless a plan is given (shapes from `values`),
    and the time each phase took. The graph keeps the dtypes of `values` (float64 stays
    float64). Shared by every runtime."""
    from .. import planner
    from ..autodiff.graph import default_data_names
    from ..execgraph import transform

    stats = {}
    t0 = time.perf_counter()
    if plan is None:
        data_shapes = {k: tuple(np.shape(v)) for k, v in values.items()}
        shapes = {n: data_shapes[n] for n in default_data_names(sym) if n in data_shapes}
        plan = planner.plan(sym, devices=devices, shapes=shapes, algorithm=algorithm, optimizer=optimizer,
                            replicate_fallback=replicate_fallback, train=train)
    elif plan.devices != devices:
        raise Error(f"the plan was made for {plan.devices} devices, not {devices}")
    elif getattr(plan, "train", True) != train:
        made = "training (train=True)" if getattr(plan, "train", True) else "inference (train=False)"
        raise Error(f"the plan was made for {made}: plan again with train={train}")
    stats["plan_seconds"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    # floating inputs keep their precision (integer ids and labels stay float32 tensors, as planned)
    dtypes = {k: np.asarray(v).dtype.name for k, v in values.items() if np.asarray(v).dtype.kind == "f"}
    eg = transform(sym, plan, control_deps=control_deps, device_memory=device_memory,
                   replicate_fallback=replicate_fallback, optimizer_args=optimizer_args, dtypes=dtypes)
    stats["transform_seconds"] = time.perf_counter() - t1
    return plan, eg, stats


def result_names(eg) -> list:
    """The tensors a step hands back: outputs, gradients, updated params, new optimizer states."""
    tg = eg.training
    return list(tg.output_names) + list(tg.grad_names) + list(tg.updated_names) + list(tg.new_state_names)


def assemble_aux(eg, updates: Iterable[tuple], values: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """The auxiliary states (BatchNorm moving statistics) after a step, in full: each starts
    from its value in `values` and takes every box a device rewrote (`updates`: (name, lo, hi,
    value) from :attr:`SubOpRunner.aux_updates`; replicas of a box hold equal values)."""
    by_name: Dict[str, list] = {}
    for name, lo, hi, value in updates:
        by_name.setdefault(name, []).append((lo, hi, value))
    out = {}
    for name in eg.training.aux_names:
        if name not in eg.tensor_id or name not in values:
            continue
        tid = eg.tensor_id[name]
        full = np.array(values[name], dtype=np.dtype(eg.lowered.tensor_dtypes[tid]), copy=True)
        for lo, hi, value in by_name.get(name, ()):
            full[box_index(lo, hi)] = value
        out[name] = full
    return out


def exec_stats(eg, stats: dict) -> dict:
    """`stats` with the execution graph's bytes moved (total and per device) and arena sizes."""
    es = eg.stats()
    stats.update(bytes=es["bytes"], bytes_per_device=es["bytes_per_device"], peak_memory=es["peak_memory"])
    return stats


def step_result(eg, full: Dict[str, np.ndarray], aux: Dict[str, np.ndarray], plan, stats: dict):
    """A :class:`Result` from the full values of :func:`result_names` and the assembled aux."""
    from .result import Result

    tg = eg.training
    exec_stats(eg, stats)
    return Result(outputs=[full[n] for n in tg.output_names],
                  grads={p: full[g] for p, g in zip(tg.param_names, tg.grad_names)},
                  params={p: full[u] for p, u in zip(tg.param_names, tg.updated_names)},
                  states={s: full[n] for s, n in zip(tg.state_names, tg.new_state_names)},
                  aux=aux, plan=plan, stats=stats)


def run_partitioned(rt_factory: Callable, sym, devices: int, values: Dict[str, np.ndarray], train: bool,
                    optimizer: str, optimizer_args: Optional[dict], seed: int, plan, algorithm: str,
                    control_deps: bool, device_memory: Optional[int], replicate_fallback: bool):
    """Plan, transform and run one step on the runtime `rt_factory(eg)` builds (it has load,
    run, gather and its runner's aux_updates), and assemble the Result."""
    from .tiles import step_inputs

    plan, eg, stats = plan_and_transform(sym, devices, values, plan, algorithm, optimizer, control_deps,
                                         device_memory, replicate_fallback, train, optimizer_args)
    rt = rt_factory(eg)
    inputs = step_inputs(eg, values)  # optimizer states zero and heads one unless given
    rt.load(inputs)
    stats.update(rt.run(is_train=train, seed=seed))
    if hasattr(rt, "gather_results"):  # assembled results take the memory their tiles free
        full = rt.gather_results(result_names(eg))
    else:
        full = {n: rt.gather(n) for n in result_names(eg)}
    aux = assemble_aux(eg, rt.runner.updated_aux(), inputs)
    del rt, inputs  # the arenas go before the Result is built
    return step_result(eg, full, aux, plan, stats)


def run_multi_device(sym, devices: int, values: Dict[str, np.ndarray], train: bool = True, optimizer: str = "sgd",
                     optimizer_args: Optional[dict] = None, seed: int = 0, plan=None, algorithm: str = "tofu",
                     control_deps: bool = True, device_memory: Optional[int] = None, replicate_fallback: bool = False):
    """One step on `devices` virtual devices of the host runtime: a training step, or with
    ``train=False`` partitioned inference (the forward graph planned and run alone)."""
    from .host_runtime import HostRuntime

    return run_partitioned(HostRuntime, sym, devices, values, train, optimizer, optimizer_args, seed, plan,
                           algorithm, control_deps, device_memory, replicate_fallback)
