"""Steps at half the need, executed (issue 24): a small member of each family of the memory
table (WResNet, RNN, GPT-2) planned at half the memory its unconstrained plan needs, on 1 and 8
devices, and run on the host runtime for a few chained steps (params and momenta fed from each
step to the next; the swap plan keeps results in host memory between steps and loads weights
and states there). Each step is compared, by execution, with the same plan unswapped (bit for
bit: swapping only copies bytes) and with the unconstrained plan (bit for bit when the budget
search kept its partition, else to float32 accuracy). Used by ``autotile bench memory``
(:func:`executed_table`); the full-size rows of that table are planned and simulated only."""
from __future__ import annotations

import time
from typing import Callable, Dict, List, Optional

import numpy as np

from . import common

STEPS = 2
OPTIMIZER = "momentum"


def small_models() -> Dict[str, Callable]:
    """{family: builder of a small member of it} (kept small enough to run on 8 host devices)."""
    from autotile.models import gpt2, rnn, wresnet

    return {
        "wresnet": lambda: wresnet(50, 1, 8, classes=10, image=32, units=(1, 1, 1, 1)),
        "rnn": lambda: rnn(2, 128, steps=4, batch=16, vocab=64),
        "gpt2": lambda: gpt2(batch=8, seq=16, layers=2, d_model=64, heads=4, vocab=256, positions=16),
    }


def _split(sym, values):
    """(data, params, aux) of the synthetic values."""
    from autotile.autodiff.graph import default_data_names

    data_names, aux_names = set(default_data_names(sym)), set(sym.list_auxiliary_states())
    data = {k: v for k, v in values.items() if k in data_names}
    aux = {k: v for k, v in values.items() if k in aux_names}
    params = {k: v for k, v in values.items() if k not in data_names and k not in aux_names}
    return data, params, aux


def chained_steps(sym, plan, devices, values, steps=STEPS) -> list:
    """`steps` training steps of `plan` on the host runtime, each fed the last one's params,
    optimizer states and BatchNorm statistics."""
    import autotile as at

    data, params, aux = _split(sym, values)
    states, out = {}, []
    for step in range(steps):
        res = at.backend.run(sym, devices=devices, inputs=data, params=params, aux=aux, states=states, train=True,
                             optimizer=OPTIMIZER, optimizer_args={"lr": 0.01}, seed=step, plan=plan)
        params, states, aux = res.params, res.states, res.aux
        out.append(res)
    return out


def _arrays(res) -> Dict[str, np.ndarray]:
    got = {f"output {i}": o for i, o in enumerate(res.outputs)}
    for kind in ("grads", "params", "states", "aux"):
        got.update({f"{kind} {k}": v for k, v in getattr(res, kind).items()})
    return got


def differences(got: list, want: list) -> tuple:
    """(every array of every step bit for bit equal, the largest difference of any array over
    max(1, that array's largest magnitude): float32 sums in another order differ by a few ulps
    of the largest term, and some arrays are zero up to rounding, such as an attention key
    bias's gradient, where a difference relative to the array itself says nothing)."""
    same, worst = True, 0.0
    for a, b in zip(got, want):
        ga, wb = _arrays(a), _arrays(b)
        if sorted(ga) != sorted(wb):
            return False, float("inf")
        for k in wb:
            x, y = np.asarray(ga[k], np.float64), np.asarray(wb[k], np.float64)
            same = same and np.array_equal(ga[k], wb[k])
            scale = max(float(np.max(np.abs(y), initial=0.0)), 1.0)
            worst = max(worst, float(np.max(np.abs(x - y), initial=0.0)) / scale)
    return same, worst


def host_resident_bytes(eg) -> int:
    """Bytes of the step's results whose tiles are host buffers (all devices)."""
    from autotile.backend.multi_device import result_names

    total = 0
    for n in result_names(eg):
        for d in range(eg.devices):
            b = eg.buffers[eg.core.tile(eg.tensor_id[n], d)]
            total += b["bytes"] if b["host"] else 0
    return total


def executed_row(family: str, build: Callable, devices: int, log) -> List:
    """One row: `family`'s small member at half its need on `devices`, executed."""
    import autotile as at
    from autotile.cli import synthetic_inputs
    from autotile.execgraph import transform

    sym = build()
    t0 = time.perf_counter()
    free = at.plan(sym, devices=devices)
    need = max(transform(sym, free).peak_memory(d) for d in range(devices))
    budget = need // 2
    try:
        half = at.plan(sym, devices=devices, device_memory=budget)
    except at.Error as e:
        log(f"  {family} x{devices} at half its need: {e}")
        return [f"{family} x{devices}", f"{need / 1e6:.2f} MB", f"{budget / 1e6:.2f} MB", "does not fit", "-", "-",
                "-", "-"]
    eg = transform(sym, half)
    peak = max(eg.peak_memory(d) for d in range(devices))
    values = synthetic_inputs(sym, seed=0)
    swapped = chained_steps(sym, half, devices, values)
    unswapped_plan = at.Plan.from_json(half.to_json())
    unswapped_plan.swap_budget = None
    same_plan, _ = differences(swapped, chained_steps(sym, unswapped_plan, devices, values))
    same_free, rel = differences(swapped, chained_steps(sym, free, devices, values))
    kept = half.tensor_tilings == free.tensor_tilings
    log(f"  {family} x{devices} at half its need: {'swap' if half.swap_budget else 'search'}, "
        f"{time.perf_counter() - t0:.0f} s")
    return [f"{family} x{devices}", f"{need / 1e6:.2f} MB", f"{budget / 1e6:.2f} MB",
            ("swap" if half.swap_budget is not None else "search") + ("" if kept else " (other partition)"),
            f"{peak / 1e6:.2f} MB", f"{host_resident_bytes(eg) / 1e6:.2f} MB", "yes" if same_plan else "NO",
            ("bits" if same_free else f"{rel:.1e}")]


def executed_table(devices_list=(1, 8), log=print, families: Optional[List[str]] = None) -> str:
    """The table of :func:`executed_row` for every family on each device count."""
    rows = []
    for family, build in small_models().items():
        if families and family not in families:
            continue
        for k in devices_list:
            rows.append(executed_row(family, build, k, log))
    return (f"Executed at half the need ({STEPS} chained {OPTIMIZER} steps on the host runtime, small members of "
            f"each family; results may stay in host memory between steps)\n"
            + common.table(["model x devices", "need", "budget", "how", "peak/device", "results on host",
                            "= its plan unswapped (bits)", "vs unconstrained (bits, or max diff / max(1, |max|))"], rows))
