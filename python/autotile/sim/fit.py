"""A host profile fitted to measurements, for out-of-sample prediction.

A calibration (:mod:`autotile.sim.calibrate`) holds measured times per (op kind, tile
shapes). Looked up shape by shape it tests only the scheduler: every duration of the graph
simulated was measured. :func:`fitted_profile` instead turns the measurements into the same
kind of profile the GPU profiles are -- a roofline with a per-kind efficiency that depends on
the tile (:func:`autotile.sim.cost_table.efficiency`) -- so that a graph whose ops were never
measured (more devices, smaller tiles; another model) is priced by the model alone.

Per op kind, the roofline's compute term on a tile of f FLOPs is ``(f + half) / (peak * eff)``,
affine in f. Fitting ``t = a + b f`` (non-negative least squares on relative errors, so small
kernels count as much as large ones) gives ``eff = 1 / (peak b)`` and ``half = (a - launch) / b``,
``launch`` the smallest fixed cost ``a`` of any kind (what every kernel dispatch pays). Kinds
not measured take the pooled fit of their class: BLAS products (``MATMUL_KINDS``) or the
rest (``default``). The memory roof is the fastest any measured op streamed its bytes after
its launch, so it never exceeds a measurement (the per-kind fits carry the element-wise
kernels' bandwidth: their FLOPs are their elements)."""
from __future__ import annotations

import copy
import statistics
from typing import Dict, List, Optional, Sequence, Tuple

from .cost_table import MATMUL_KINDS, Calibration, CostTable, _nnls, roofline_seconds
from .hardware import Hardware, load_profile


def fit_curve(samples: Sequence[Tuple[float, float]]) -> Tuple[float, float]:
    """(a, b) of ``seconds = a + b * flops`` fitted to (flops, seconds) samples by
    non-negative least squares on relative errors; one distinct size, or a fit with no slope,
    gives the proportional fit through the samples (a = 0, b = median seconds / flops)."""
    pts = [(float(f), float(t)) for f, t in samples if t > 0 and f > 0]
    if not pts:
        return 0.0, 0.0
    a, b = 0.0, 0.0
    if len({f for f, _ in pts}) > 1:
        a, b = (float(c) for c in _nnls([[1.0 / t, f / t] for f, t in pts], [1.0] * len(pts)))
    if b <= 0:
        a, b = 0.0, statistics.median(t / f for f, t in pts)
    return a, b


def fitted_profile(calibration: Calibration, base="host") -> Hardware:
    """`base` (a profile or its name) with its roofline fitted to `calibration`'s measured
    ops: per measured kind ``efficiency`` and ``efficiency_half_flops``, the class fits for
    the kinds never measured, ``launch_overhead_s`` and the memory roof (see the module)."""
    hw = copy.deepcopy(load_profile(base) if isinstance(base, str) else base)
    by_kind: Dict[str, List[Tuple[float, float]]] = {}
    for e in calibration.ops.values():
        by_kind.setdefault(e["kind"], []).append((float(e["flops"]), float(e["seconds"])))
    curves = {kind: fit_curve(pts) for kind, pts in by_kind.items()}
    for cls, members in (("matmul", [k for k in by_kind if k in MATMUL_KINDS]),
                         ("default", [k for k in by_kind if k not in MATMUL_KINDS])):
        if members:
            curves["@" + cls] = fit_curve([p for k in members for p in by_kind[k]])
    curves = {k: c for k, c in curves.items() if c[1] > 0}
    if not curves:
        return hw
    launch = max(0.0, min(a for a, _ in curves.values()))
    peak = hw.peak_flops
    efficiency, half = {}, {}
    for kind, (a, b) in curves.items():
        efficiency[kind], half[kind] = 1.0 / (peak * b), max(0.0, a - launch) / b
    matmul, default = curves.get("@matmul") and "@matmul", curves.get("@default") and "@default"
    for kind in MATMUL_KINDS:  # a BLAS kind never measured: the pooled BLAS fit
        src = kind if kind in efficiency else matmul or default
        if src:
            efficiency[kind], half[kind] = efficiency[src], half[src]
    src = default or matmul
    efficiency["default"], half["default"] = efficiency[src], half[src]
    hw.efficiency = {k: v for k, v in efficiency.items() if not k.startswith("@")}
    hw.half_flops = {k: v for k, v in half.items() if not k.startswith("@")}
    # the memory roof: the fastest any measured op streamed its bytes once the launch is paid
    mem_bw = max((float(e["bytes"]) / (float(e["seconds"]) - launch) for e in calibration.ops.values()
                  if float(e["seconds"]) > launch), default=0.0)
    if mem_bw > 0:
        hw.device["mem_bandwidth"] = mem_bw
        hw.efficiency["memory"] = 1.0
    hw.device["launch_overhead_s"] = launch
    hw.name = f"{hw.name} (fitted to {len(calibration.ops)} measured op shapes)"
    return hw


def fitted(calibration: Calibration, base="host") -> Tuple[Hardware, Calibration]:
    """(fitted profile, the calibration without per-shape entries): what a simulation that
    prices every op and fetch by the fitted models alone takes (``Simulator(*fitted(cal))``)."""
    return fitted_profile(calibration, base), calibration.model_only()


def fit_dispatch(samples: Sequence[dict]) -> Tuple[float, float]:
    """(step_overhead, op_overhead) of the host runtime from steps of graphs of tiny ops.

    Each sample is {"step": measured step seconds, "ops": the summed in-place seconds of its
    ops (each timed alone, Python dispatch included), "count": its number of ops}. On such
    graphs every op is Python holding the interpreter lock, so the step is serial whatever the
    device count: ``step = step_overhead + ops + count * op_overhead`` (what the runtime does
    around the ops: a fixed cost per step -- BLAS thread limits, worker threads, dependency
    counts -- and a cost per op -- the ready queue, the lock, the hand-off between workers).
    Fitted by non-negative least squares on relative errors, as the other terms."""
    rows = [(float(s["count"]), float(s["step"]) - float(s["ops"])) for s in samples]
    rows = [(n, y) for n, y in rows if y > 0]
    if not rows:
        return 0.0, 0.0
    c0, per_op = _nnls([[1.0 / y, n / y] for n, y in rows], [1.0] * len(rows))
    return float(c0), float(per_op)


def relative_errors(pairs: Sequence[Tuple[float, float]]) -> Optional[Dict[str, float]]:
    """{mean, median, max} of |predicted - measured| / measured over (predicted, measured)."""
    errs = [abs(p - m) / m for p, m in pairs if m > 0]
    if not errs:
        return None
    return {"mean": statistics.mean(errs), "median": statistics.median(errs), "max": max(errs), "n": len(errs)}


def entry_errors(simulator, measured: Calibration) -> Dict[str, float]:
    """How well `simulator`'s cost model (a fitted profile and model-only calibration,
    :func:`fitted`) prices the ops and fetches `measured` timed (alone, on one thread):
    {"ops": median |error| over the op shapes, "fetches": the same over the fetch shapes,
    "total": (sum of predicted - sum of measured) / sum of measured over every entry once}."""
    table: CostTable = simulator.cost
    pairs_ops = [(roofline_seconds(table.hw, e["kind"], float(e["flops"]), float(e["bytes"])), float(e["seconds"]))
                 for e in measured.ops.values()]
    pairs_fetch = [(table.fetch_model_time(float(e["bytes"]), float(e["rows"]), bool(e["accumulate"])),
                    float(e["seconds"])) for e in measured.fetches.values()]
    out = {}
    for name, pairs in (("ops", pairs_ops), ("fetches", pairs_fetch)):
        st = relative_errors(pairs)
        if st:
            out[name] = st["median"]
    both = pairs_ops + pairs_fetch
    if both and sum(m for _, m in both) > 0:
        out["total"] = sum(p for p, _ in both) / sum(m for _, m in both) - 1.0
    return out
