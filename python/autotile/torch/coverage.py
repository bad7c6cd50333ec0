"""One row of the PyTorch coverage table: a family of :mod:`autotile.torch.families` planned
for `devices` ranks (:func:`~autotile.torch.runnable.runnable_plan`) and one SGD step of it
parallelized on as many gloo ranks compared, per parameter name, with the plain module's
(:func:`~autotile.torch.step_check.compare_step`), or the plan-time refusal naming the module
and the op. ``bench/torch_coverage.py`` runs the table; tests/torch/test_coverage_*.py a row
per family."""
from __future__ import annotations

import time

from ..errors import Error

#: largest difference allowed, relative to the plain step's largest magnitude (float32 sums)
TOL = 1e-5


def _step(rank, module, plan, inputs):
    from .step_check import compare_step

    return compare_step(rank, module, plan, plan.torch_model, inputs)


def passes(result: dict, tol: float = TOL) -> bool:
    """Output, every gradient and every updated parameter within `tol` of the plain step's
    (relative to its largest magnitude, at least 1)."""
    return all(result["diff"][k] <= tol * max(1.0, result["scale"][k]) for k in ("output", "grad", "param"))


def check_family(family: str, devices: int, algorithm: str = "tofu", timeout: float = 1200, seed: int = 0) -> dict:
    """The coverage row of `family` on `devices` gloo ranks: ``status`` ("pass", "fail": the
    step differs from the plain one, "refused": an :class:`autotile.Error` at plan time,
    ``reason`` its message), ``plan_bytes`` (``plan.comm_bytes``), ``dtensor_bytes``
    (DTensor's collectives, :func:`autotile.torch.measure`), ``whole`` (the modules the plan
    runs whole), ``rounds`` (dry-run failures that led to them), the largest differences
    (``diff``, ``worst``: the parameter), and the seconds spent planning and stepping."""
    from .families import build
    from .launch import run_local
    from .runnable import runnable_plan

    module, inputs = build(family, seed)
    row = {"family": family, "devices": devices, "algorithm": algorithm}
    t0 = time.monotonic()
    try:
        plan = runnable_plan(module, inputs, devices=devices, algorithm=algorithm)
    except Error as e:
        row.update(status="refused", reason=str(e), plan_s=round(time.monotonic() - t0, 1))
        return row
    row.update(plan_s=round(time.monotonic() - t0, 1), plan_bytes=float(plan.comm_bytes), whole=list(plan.torch_whole),
               rounds=[{k: r[k] for k in ("phase", "modules", "op")} for r in plan.torch_rounds],
               params=len(plan.param_names))
    t1 = time.monotonic()
    try:
        results = run_local(_step, devices, module, plan, inputs, timeout=timeout)
    except Error as e:  # the dry run passed, the ranks did not: a miss of the dry run, listed as such
        row.update(status="fail", reason=f"on the ranks (the dry run passed): {str(e).splitlines()[0]}",
                   step_s=round(time.monotonic() - t1, 1))
        return row
    ok = all(passes(r) for r in results)
    r0 = max(results, key=lambda r: max(r["diff"][k] / max(1.0, r["scale"][k]) for k in r["diff"]))
    row.update(status="pass" if ok else "fail", step_s=round(time.monotonic() - t1, 1),
               dtensor_bytes=float(results[0]["report"]["total_bytes"]), diff=r0["diff"], scale=r0["scale"],
               worst=r0["worst"], counts=results[0]["report"]["counts"])
    if not ok:
        row["reason"] = f"step differs from the plain module's: {r0['diff']} (scale {r0['scale']}, worst {r0['worst']})"
    return row
