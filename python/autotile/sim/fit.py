"""A host profile fitted to measurements, for out-of-sample prediction.

A calibration (:mod:`autotile.sim.calibrate`) holds measured times per (op kind, tile
shapes). Looked up shape by shape it tests only the scheduler: every duration of the graph
simulated was measured. :func:`fitted_profile` instead turns the measurements into a profile
whose cost model prices any tile -- a graph whose ops were never measured (more devices,
smaller tiles; another model) is priced by the model alone.

The op model (:func:`fit_op_model`) is a *serial* roofline: a NumPy kernel on one CPU thread
does its arithmetic and its memory passes one after the other, so ``t = launch + extra[kind]
+ FLOPs x c[kind] + bytes / mem_bw + im2col bytes / im2col_bw``, fitted to every measured op
at once by non-negative least squares on relative errors. What is physical is shared by all
kinds (streaming bytes, copying a convolution's columns), what depends on the kernel is per
kind (its fixed cost, its rate); kinds never measured take their class's rate (BLAS products
or the rest). In the profile: ``peak_flops`` the fastest kind's rate, ``efficiency[kind]``
each kind's share of it, ``efficiency_half_flops[kind]`` its fixed cost beyond the launch in
FLOPs, ``serial_roofline``, ``mem_bandwidth``, ``im2col_bandwidth``.

The runtime's serial per-op terms (:func:`with_serial_terms`) are fitted to measured *steps*
of the training graphs: the time each op holds the interpreter lock beyond the dispatch the
tiny-op graphs measure, as a constant per op and a fraction of its time."""
from __future__ import annotations

import copy
import statistics
from typing import Dict, List, Optional, Sequence, Tuple

from .cost_table import (MATMUL_KINDS, Calibration, CostTable, _nnls, bytes_touched, im2col_bytes, parse_shape_key,
                         roofline)
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


def op_features(key: str, entry: dict) -> Tuple[str, float, float, float, float]:
    """(kind, BLAS FLOPs, other kinds' work (elements), bytes touched, im2col column bytes) of
    a calibration entry (its key's tiles; the entry's own figures where the key does not parse)."""
    kind = entry["kind"]
    try:
        _, ins, outs = parse_shape_key(key)
        nbytes, cols = bytes_touched(ins, outs), im2col_bytes(kind, ins, outs)
    except (ValueError, IndexError):
        nbytes, cols = float(entry["bytes"]), 0.0
    f = float(entry["flops"])
    return kind, (f if kind in MATMUL_KINDS else 0.0), (0.0 if kind in MATMUL_KINDS else f), nbytes, cols


def _relative_scale(us: Sequence[float], vs: Sequence[float]) -> float:
    """c >= 0 minimising sum (c u - v)^2 (one coefficient by least squares on relative errors)."""
    den = sum(u * u for u in us)
    return max(0.0, sum(u * v for u, v in zip(us, vs)) / den) if den > 0 else 0.0


def fit_op_model(calibration: Calibration) -> Optional[dict]:
    """The host op-cost model fitted to `calibration`'s measured ops, or None without any:
    ``t = launch + FLOPs x c[kind] + bytes / mem_bw + im2col bytes / im2col_bw``.

    Fitted over every op together by non-negative least squares on relative errors (small
    kernels count as much as large ones): what is physical is shared by every kind -- a
    kernel's fixed cost ``launch``, streaming bytes at ``mem_bw``, copying a convolution's
    columns at ``im2col_bw`` -- and each kind measured has its own cost per FLOP (``c[kind]``:
    a GEMM's rate depends on the shapes a kind gives it; an element-wise op, a pooling window,
    a softmax differ in the work per element). Kinds never measured take one cost per FLOP
    fitted over the measured kinds of their class (``@matmul``: BLAS products, ``@default``:
    the rest), the shared terms fixed. Returns
    {"launch", "mem_bw", "im2col_bw", "per_flop": {kind or "@matmul"/"@default": c}}."""
    rows = [(op_features(key, e), float(e["seconds"])) for key, e in calibration.ops.items()
            if float(e["seconds"]) > 0]
    if not rows:
        return None
    kinds = sorted({kind for (kind, *_), _ in rows})
    n = len(kinds)
    column = {kind: i for i, kind in enumerate(kinds)}  # per kind: a fixed cost, a cost per FLOP
    cols = []
    for (kind, fg, fe, b, x), _ in rows:
        col = [0.0] * (2 * n) + [b, x]  # shared: bytes, columns
        col[column[kind]] = 1.0
        col[n + column[kind]] = fg + fe
        cols.append(col)
    width = len(cols[0])
    scale = [max((abs(col[j]) / t for col, (_, t) in zip(cols, rows)), default=0.0) or 1.0 for j in range(width)]
    coef = _nnls([[c / t / sc for c, sc in zip(col, scale)] for col, (_, t) in zip(cols, rows)], [1.0] * len(rows))
    coef = [float(c) / sc for c, sc in zip(coef, scale)]
    per_byte, per_col = coef[2 * n:]
    fixed = {kind: coef[column[kind]] for kind in kinds}
    launch = min(fixed.values())
    per_flop = {kind: coef[n + column[kind]] for kind in kinds if coef[n + column[kind]] > 0}
    extra = {kind: fixed[kind] - launch for kind in per_flop}
    # a kind measured at one size only says nothing of how its time grows: proportional to
    # its work (no fixed cost of its own), rather than a constant that any size would pay
    sizes: Dict[str, List[float]] = {}
    for (kind, fg, fe, b, x), t in rows:
        sizes.setdefault(kind, []).append(fg + fe)
    for kind, fs in sizes.items():
        if max(fs) < 1.5 * min(fs):
            pts = [(fg + fe, t, launch + b * per_byte + x * per_col) for (k, fg, fe, b, x), t in rows if k == kind]
            c = _relative_scale([f / t for f, t, _ in pts], [1.0 - base / t for _, t, base in pts])
            if c > 0:
                per_flop[kind], extra[kind] = c, 0.0
    # kinds never measured: one cost per FLOP (BLAS) or per element (the rest) for the class,
    # fitted over the measured kinds of the class with the shared terms fixed
    for cls, blas in (("@matmul", True), ("@default", False)):
        pts = [(fg + fe, t, launch + b * per_byte + x * per_col) for (kind, fg, fe, b, x), t in rows
               if (kind in MATMUL_KINDS) == blas]
        per_flop[cls] = _relative_scale([f / t for f, t, _ in pts], [1.0 - base / t for _, t, base in pts])
    return {"launch": launch, "extra": extra, "mem_bw": 1.0 / per_byte if per_byte > 0 else 0.0,
            "im2col_bw": 1.0 / per_col if per_col > 0 else 0.0, "per_flop": per_flop}


def fitted_profile(calibration: Calibration, base="host") -> Hardware:
    """`base` (a profile or its name) fitted to `calibration`: the op-cost model
    (:func:`fit_op_model`) as a ``serial_roofline`` profile -- ``peak_flops`` the fastest
    kind's rate, ``efficiency[kind]`` each kind's share of it (``default``: the non-BLAS class,
    BLAS kinds never measured the BLAS class), ``launch_overhead_s``, ``mem_bandwidth``,
    ``im2col_bandwidth`` -- and everything else the simulator takes from a host calibration
    folded in: the fetch model, the cores the runtime's threads got, its dispatch figures and
    wake-up latency (:func:`autotile.sim.simulator.with_calibration`) and the co-runner slowdown
    per kind (``co_runner_slowdown:KIND``). A simulation on it alone prices every op and fetch
    by these models: no measured shape is looked up."""
    from .cost_table import SLOWDOWN_PREFIX
    from .simulator import with_calibration

    hw = copy.deepcopy(load_profile(base) if isinstance(base, str) else base)
    hw = copy.deepcopy(with_calibration(hw, calibration))
    for kind, s in calibration.slowdowns_by_kind().items():
        hw.device[SLOWDOWN_PREFIX + kind] = float(s)
    model = fit_op_model(calibration)
    if model is None:
        return hw
    per_flop = model["per_flop"]
    matmul, default = per_flop.get("@matmul", 0.0), per_flop.get("@default", 0.0)
    rates = {k: 1.0 / c for k, c in per_flop.items() if c > 0}
    if not rates:
        return hw
    peak = max(rates.values())
    efficiency = {k: r / peak for k, r in rates.items() if not k.startswith("@")}
    for kind in MATMUL_KINDS:  # a BLAS kind never measured: the BLAS class
        if kind not in efficiency and matmul > 0:
            efficiency[kind] = rates["@matmul"] / peak
    efficiency["default"] = (rates["@default"] if default > 0 else rates.get("@matmul", peak)) / peak
    hw.device["peak_flops"] = peak
    hw.device["serial_roofline"] = True
    hw.device["launch_overhead_s"] = model["launch"]
    hw.device["mem_bandwidth"] = model["mem_bw"] if model["mem_bw"] > 0 else 1e18  # no byte term
    if model["im2col_bw"] > 0:
        hw.device["im2col_bandwidth"] = model["im2col_bw"]
    else:
        hw.device.pop("im2col_bandwidth", None)
    hw.efficiency = {**efficiency, "memory": 1.0}
    # a kind's fixed cost beyond the launch, as the FLOPs its rate does in that time
    hw.half_flops = {k: e / per_flop[k] for k, e in model["extra"].items() if e > 0 and per_flop.get(k, 0) > 0}
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


def fit_handoff(samples: Sequence[Sequence[float]], probes: Sequence[float]) -> List[float]:
    """Non-negative coefficients of the serial per-op terms (``handoff_s``, ``gil_fraction``)
    that best fit measured steps, from (simulated step without them, simulated step with only
    the first at ``probes[0]``, ..., measured step) per graph: the simulated step grows about
    linearly in each, ``step = s0 + sum_j c_j (s_j - s0) / probe_j``; least squares on
    relative errors."""
    rows, ys = [], []
    for sample in samples:
        s0, m = sample[0], sample[-1]
        if m > 0:
            rows.append([(sj - s0) / p / m for sj, p in zip(sample[1:-1], probes)])
            ys.append(1.0 - s0 / m)
    if not rows:
        return [0.0] * len(probes)
    return [float(c) for c in _nnls(rows, ys)]


#: the host runtime's serial per-op terms (device figures) and the values their fit probes:
#: ``handoff_s`` seconds per op and ``gil_fraction`` of each op's time, both run under the
#: interpreter lock (serialised across devices) before the op's kernel
SERIAL_TERMS = (("handoff_s", 2e-4), ("gil_fraction", 0.05))


def with_serial_terms(hw: Hardware, measured: Sequence[Tuple[object, float]]) -> Hardware:
    """`hw` with its serial per-op terms (:data:`SERIAL_TERMS`) fitted to measured steps:
    ``measured`` holds (ExecGraph, measured step seconds) pairs; each graph is simulated on
    `hw` without the terms and with each at its probe value (:func:`fit_handoff`)."""
    from .simulator import Simulator

    hw = copy.deepcopy(hw)
    for name, _ in SERIAL_TERMS:
        hw.device[name] = 0.0
    probes = []
    for name, value in SERIAL_TERMS:
        probes.append(copy.deepcopy(hw))
        probes[-1].device[name] = value
    samples = [[Simulator(h).run(eg).step_seconds for h in [hw] + probes] + [float(m)] for eg, m in measured]
    for (name, _), c in zip(SERIAL_TERMS, fit_handoff(samples, [v for _, v in SERIAL_TERMS])):
        hw.device[name] = c
    return hw


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
    pairs_ops = [(roofline(table.hw, *parse_shape_key(key)), float(e["seconds"])) for key, e in measured.ops.items()]
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
