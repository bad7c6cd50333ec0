"""Compute time of one sub-operator (one op of the ExecGraph on one device).

Analytic (any profile): a roofline, ``launch + max(FLOPs / (peak * eff(kind, FLOPs)),
bytes / (mem_bandwidth * eff["memory"]))``. FLOPs come from the op type and its tile shapes
(formulas below); bytes are the tiles it reads and writes. A kernel's efficiency depends on
its tile: ``eff(kind, f) = eff[kind] * f / (f + half[kind])`` (:func:`efficiency`), with
``half`` the profile's ``efficiency_half_flops`` (0: no size dependence). A kernel on a small
tile leaves the device partly idle (too few thread blocks to fill the SMs, the last wave
half empty, a GEMM too thin to block well): on a tile of ``half`` FLOPs it runs at half its
large-tile efficiency, on an 8x smaller one at 1/9 of it (``f = half / 8``). Equivalently the
compute term is affine in FLOPs, ``(f + half) / (peak * eff[kind])``: a fixed cost worth
``half`` FLOPs per kernel, which is how :mod:`autotile.sim.fit` fits it to measurements.

Measured (``autotile bench calibrate``): times of the kernels on this machine, stored in a
JSON keyed by op and tile shape. A shape that was measured uses its time; another shape of a
measured op kind is interpolated by FLOPs between the measured ones (linear between the two
neighbours, proportional beyond the largest, the smallest time below the smallest: small
kernels are dominated by fixed overhead). Op kinds never measured fall back to the roofline.

Host fetches. On a host whose device threads copy regions themselves (``fetch_on_cores``), a
MultiFetch is CPU work like a kernel: its measured time is looked up by its pieces' shapes
(:func:`fetch_key`); a fetch never measured costs ``overhead + rows * row_seconds + bytes /
bandwidth`` (accumulating fetches: ``bytes / accumulate_bandwidth``), the four figures fitted
to the measured fetches (:func:`fit_fetch`). ``rows`` counts the contiguous runs the C++
MultiFetch copies one memcpy at a time (the innermost dim, merged with outer dims while the
dims inside are whole in the source and the destination): a piece that splits the last dim
of a tile copies many short runs, several times slower per byte than one long run.

Co-runner slowdown. A kernel (or copy) running while the other cores are busy runs slower
than alone: they share the memory bandwidth and the last-level cache, and the cores' clocks
drop when all are active. Calibration measures each op twice, alone and with every core
running the same replay (``contended``); :meth:`CostTable.slowdown` is the ratio, and the
simulator applies it in proportion to how busy the other cores are.
"""
from __future__ import annotations

import bisect
import json
import math
import os
from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import Error
from .hardware import Hardware

Shape = Tuple[int, ...]

#: op kinds that run a BLAS matrix product (they use every core of a host when alone)
MATMUL_KINDS = {"FullyConnected", "_backward_FullyConnected_data", "_backward_FullyConnected_weight",
                "Convolution", "_backward_Convolution_data", "_backward_Convolution_weight",
                "dot", "_backward_dot_lhs", "_backward_dot_rhs", "batch_dot"}


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def flops(kind: str, ins: List[Optional[Shape]], outs: List[Shape]) -> float:
    """Floating-point operations of op `kind` on these tiles (a multiply-add counts 2).

    `ins` are the input tiles the op reads (None for an input it only takes the shape of),
    `outs` its output tiles. Products: out elements x the reduced extent, read off the
    weight-shaped tile, which carries the split of the reduction dims:

    - FullyConnected: out (N, H), weight (H, D):      2 * |out| * D
    - _backward_FullyConnected_data: out (N, D), weight (H, D): 2 * |out| * H
    - _backward_FullyConnected_weight: out (H, D), og (N, H):   2 * |out| * N
    - Convolution: out (N, F, OH, OW), weight (F, C/g, kh, kw): 2 * |out| * C/g*kh*kw
    - _backward_Convolution_data: og (N, F, OH, OW), weight:    2 * |og| * C/g*kh*kw
    - _backward_Convolution_weight: out = weight grad, og:      2 * |og| * C/g*kh*kw
    - dot and its backward ops (any transposes): A(M,K) B(K,N) C(M,N): 2*sqrt(|A||B||C|) = 2MNK
    - batch_dot: as dot with the batch b factored out: 2*sqrt(|A||B||C| / b)
    - anything else (element-wise, pooling, reductions, updates): max elements in or out.
    """
    out = outs[0] if outs else ()
    present = [s for s in ins if s is not None]
    if kind == "FullyConnected" and len(present) >= 2:
        return 2.0 * _numel(out) * _numel(present[1][1:]) + (_numel(out) if len(present) > 2 else 0)
    if kind == "_backward_FullyConnected_data" and len(present) >= 2:
        return 2.0 * _numel(out) * present[1][0]
    if kind == "_backward_FullyConnected_weight" and present:
        og = present[0]
        return 2.0 * _numel(out) * _numel(og[:-1])
    if kind == "Convolution" and len(present) >= 2:
        return 2.0 * _numel(out) * _numel(present[1][1:])
    if kind == "_backward_Convolution_data" and len(present) >= 2:
        return 2.0 * _numel(present[0]) * _numel(present[1][1:])
    if kind == "_backward_Convolution_weight" and present:
        return 2.0 * _numel(present[0]) * _numel(out[1:])
    if kind in ("dot", "_backward_dot_lhs", "_backward_dot_rhs") and len(present) >= 2:
        return 2.0 * math.sqrt(float(_numel(present[0])) * _numel(present[1]) * _numel(out))
    if kind == "batch_dot" and len(present) >= 2 and out:
        return 2.0 * math.sqrt(float(_numel(present[0])) * _numel(present[1]) * _numel(out) / max(out[0], 1))
    sizes = [_numel(s) for s in present] + [_numel(s) for s in outs]
    return float(max(sizes) if sizes else 0)


def bytes_touched(ins: List[Optional[Shape]], outs: List[Shape], itemsize: int = 4) -> float:
    """Bytes read and written (inputs read once, outputs written once)."""
    return float(itemsize * (sum(_numel(s) for s in ins if s is not None) + sum(_numel(s) for s in outs)))


def im2col_bytes(kind: str, ins: List[Optional[Shape]], outs: List[Shape], itemsize: int = 4) -> float:
    """Bytes of the column buffer a convolution kernel of the host runtime materialises
    (ops/conv.py: im2col windows copied into one GEMM operand forward and for the weight
    gradient; the columns the data gradient scatters back): batch x output pixels x C x kernel
    pixels, read off the tiles (weight (F, C/g, *K); g from the data tile's channels); 0 for
    other kinds."""
    present = [s for s in ins if s is not None]
    if kind == "Convolution" and len(present) >= 2 and outs and len(outs[0]) >= 2:
        x, w, out = present[0], present[1], outs[0]
        return float(itemsize * out[0] * _numel(out[2:]) * x[1] * _numel(w[2:]))
    if kind == "_backward_Convolution_data" and len(present) >= 2 and outs and len(outs[0]) >= 2:
        og, w, dx = present[0], present[1], outs[0]
        return float(itemsize * og[0] * _numel(og[2:]) * dx[1] * _numel(w[2:]))
    if kind == "_backward_Convolution_weight" and len(present) >= 2 and outs:
        og, x, dw = present[0], present[1], outs[0]
        return float(itemsize * og[0] * _numel(og[2:]) * x[1] * _numel(dw[2:]))
    return 0.0


def parse_shape_key(key: str) -> Tuple[str, List[Optional[Shape]], List[Shape]]:
    """(kind, input tiles, output tiles) of a :func:`shape_key`."""
    kind, ins, outs = key.split("|")

    def shape(text):
        if text == "-":
            return None
        return () if text == "scalar" else tuple(int(d) for d in text.split("x"))

    return kind, [shape(t) for t in ins.split(",")] if ins else [], [shape(t) for t in outs.split(",")] if outs else []


def shape_key(kind: str, ins: List[Optional[Shape]], outs: List[Shape]) -> str:
    """The calibration key of an op on tiles: ``kind|4x3x224x224,-,96|4x96x54x54``."""
    return f"{kind}|{','.join(_fmt(s) for s in ins)}|{','.join(_fmt(s) for s in outs)}"


def _fmt(shape) -> str:
    return "-" if shape is None else "x".join(str(int(d)) for d in shape) or "scalar"


def op_tiles(eg, op: dict) -> Tuple[str, List[Optional[Shape]], List[Shape]]:
    """(op kind, input tiles or None for shape-only inputs, output tiles) of a compute op."""
    kind = eg.lowered.node_ops[op["node"]]
    ins = []
    for b, (lo, hi) in zip(op["inputs"], op["input_boxes"]):
        ins.append(None if b < 0 else tuple(int(h) - int(l) for l, h in zip(lo, hi)))
    outs = []
    for b in op["outputs"]:
        buf = eg.buffers[b]
        outs.append(tuple(int(h) - int(l) for l, h in zip(buf["lo"], buf["hi"])))
    return kind, ins, outs


def fetch_pieces(eg, op: dict) -> List[Tuple[int, int, int, Shape]]:
    """(source device, bytes, rows, shape) of each piece of fetch op `op`; rows are the
    contiguous runs MultiFetch copies one memcpy at a time (csrc/runtime/multifetch.cc: the
    innermost dim, times each outer dim while the dims inside it are whole in both buffers)."""
    dst = eg.buffers[op["outputs"][0]]
    dst_shape = [int(h) - int(l) for l, h in zip(dst["lo"], dst["hi"])]
    pieces = []
    for src_b, lo, hi in op["pieces"]:
        buf = eg.buffers[src_b]
        shape = tuple(int(h) - int(l) for l, h in zip(lo, hi))
        src_shape = [int(h) - int(l) for l, h in zip(buf["lo"], buf["hi"])]
        n = _numel(shape)
        full = _numel(src_shape)
        itemsize = max(1, int(buf["bytes"]) // full) if full else 4
        run = shape[-1] if shape else 1
        for d in range(len(shape) - 1, 0, -1):
            if shape[d] != src_shape[d] or shape[d] != dst_shape[d]:
                break
            run *= shape[d - 1]
        rows = n // run if run else (1 if n else 0)
        pieces.append((int(buf["device"]), n * itemsize, rows, shape))
    return pieces


def fetch_key(eg, op: dict, pieces=None) -> str:
    """The calibration key of a fetch: ``fetch+|512x2048|4x512x2048,...`` (``+``: it sums).
    `pieces`: the op's :func:`fetch_pieces`, where the caller has them."""
    dst = eg.buffers[op["outputs"][0]]
    pieces = ",".join(_fmt(p[3]) for p in (fetch_pieces(eg, op) if pieces is None else pieces))
    return f"fetch{'+' if op['accumulate'] else ''}|{_fmt(int(h) - int(l) for l, h in zip(dst['lo'], dst['hi']))}|{pieces}"


def _nnls(a, y, iterations: int = 0):
    """Least squares with non-negative coefficients: argmin |a x - y| over x >= 0, by
    Lawson and Hanson's active-set method (exact: the problem is convex; any number of columns)."""
    import numpy as np

    a, y = np.asarray(a, float), np.asarray(y, float)
    n = a.shape[1]
    x = np.zeros(n)
    free = np.zeros(n, bool)  # the passive set: coefficients allowed to be positive
    tol = 1e-12 * max(1.0, float(np.abs(a).max(initial=0.0)) * float(np.abs(y).max(initial=0.0))) * n
    for _ in range(iterations or 3 * n + 30):
        w = a.T @ (y - a @ x)
        cand = np.where(~free & (w > tol))[0]
        if not len(cand):
            break
        free[cand[np.argmax(w[cand])]] = True
        while True:
            z = np.zeros(n)
            z[free] = np.linalg.lstsq(a[:, free], y, rcond=None)[0]
            if np.all(z[free] > 0):
                x = z
                break
            neg = free & (z <= 0)
            alpha = np.min(x[neg] / (x[neg] - z[neg]))
            x = x + alpha * (z - x)
            free &= x > 1e-15
            x[~free] = 0.0
    return x


def fit_fetch(samples: List[dict], previous: Optional[dict] = None) -> dict:
    """Fits ``t = overhead + rows * row_seconds + bytes / bandwidth`` (``bytes /
    accumulate_bandwidth`` for fetches that sum) to measured fetches ({"seconds", "bytes",
    "rows", "accumulate"}), by non-negative least squares on relative errors (small fetches
    count as much as large ones). A figure the samples cannot tell keeps its previous value."""
    previous = previous or {}
    rows = [[1.0, s["rows"], 0.0 if s["accumulate"] else s["bytes"], s["bytes"] if s["accumulate"] else 0.0]
            for s in samples]
    y = [1.0] * len(samples)
    weighted = [[v / s["seconds"] for v in r] for r, s in zip(rows, samples) if s["seconds"] > 0]
    coef = _nnls(weighted, y[:len(weighted)]) if weighted else [0.0] * 4
    # a zero slope (no fetch of that kind, or too few bytes to tell) keeps the bandwidth known before
    bw = {key: 1.0 / c if c > 0 else float(previous.get(key, 5e9))
          for key, c in (("bandwidth", coef[2]), ("accumulate_bandwidth", coef[3]))}
    return {"overhead": float(coef[0]), "row_seconds": float(coef[1]), **bw, "latency": 0.0, "samples": len(samples)}


class Calibration:
    """Measured kernel and fetch times by (op kind, tile shapes) -- alone, and with every core
    busy (``contended``) -- plus the host's copy figures and cores."""

    def __init__(self, doc: Optional[dict] = None):
        doc = doc or {}
        self.ops: Dict[str, dict] = dict(doc.get("ops", {}))
        self.fetches: Dict[str, dict] = dict(doc.get("fetches", {}))
        self.fetch: Dict[str, float] = dict(doc.get("fetch", {}))
        self.machine: Dict[str, object] = dict(doc.get("machine", {}))
        #: co-runner slowdown per op kind kept without the entries it came from (:meth:`model_only`)
        self.kind_slowdowns: Dict[str, float] = dict(doc.get("slowdowns", {}))
        self._by_kind: Optional[Dict[str, Tuple[List[float], List[float]]]] = None
        self._slowdowns: Optional[Dict[str, float]] = None

    @staticmethod
    def load(path: str) -> "Calibration":
        if not os.path.exists(path):
            raise Error(f"no calibration at {path}: run `autotile bench calibrate` first")
        with open(path) as f:
            return Calibration(json.load(f))

    def save(self, path: str) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            json.dump({"machine": self.machine, "fetch": self.fetch, "ops": self.ops, "fetches": self.fetches,
                       "slowdowns": self.slowdowns_by_kind()}, f, indent=1, sort_keys=True)

    @staticmethod
    def merged(calibrations: Sequence["Calibration"]) -> "Calibration":
        """One calibration holding every entry of `calibrations` (later ones win on a shape
        measured twice), the fetch model refitted over all their fetches, the last one's
        machine figures."""
        cal = Calibration()
        for c in calibrations:
            cal.ops.update(c.ops)
            cal.fetches.update(c.fetches)
            cal.machine.update(c.machine)
            cal.fetch.update(c.fetch)
        if cal.fetches:
            cal.fetch.update(fit_fetch(list(cal.fetches.values()), cal.fetch))
        return cal

    def model_only(self) -> "Calibration":
        """This calibration without its per-shape measurements: the fetch model, the machine
        figures and the median co-runner slowdown per op kind only. A simulation with it
        prices every op by the profile's roofline and every fetch by the fitted model."""
        return Calibration({"fetch": self.fetch, "machine": self.machine, "slowdowns": self.slowdowns_by_kind()})

    def add(self, kind: str, ins, outs, seconds: float, contended: Optional[float] = None) -> None:
        e = {"kind": kind, "seconds": float(seconds), "flops": flops(kind, ins, outs), "bytes": bytes_touched(ins, outs)}
        if contended is not None:
            e["contended"] = float(contended)
        self.ops[shape_key(kind, ins, outs)] = e
        self._by_kind = self._slowdowns = None

    def add_fetch(self, eg, op: dict, seconds: float, contended: Optional[float] = None) -> None:
        pieces = fetch_pieces(eg, op)
        e = {"kind": "fetch", "seconds": float(seconds), "bytes": sum(p[1] for p in pieces),
             "rows": sum(p[2] for p in pieces), "accumulate": bool(op["accumulate"])}
        if contended is not None:
            e["contended"] = float(contended)
        self.fetches[fetch_key(eg, op)] = e
        self._slowdowns = None

    def slowdown(self, key: str, kind: str) -> float:
        """Co-runner slowdown (contended / alone, at least 1) of the op measured under `key`,
        else the median over the measured ops of its `kind` ("fetch" for fetches), else 1."""
        e = self.fetches.get(key) if kind == "fetch" else self.ops.get(key)
        if e is not None and "contended" in e and e["seconds"] > 0:
            return max(1.0, e["contended"] / e["seconds"])
        return self.slowdowns_by_kind().get(kind, 1.0)

    def slowdowns_by_kind(self) -> Dict[str, float]:
        """{op kind or "fetch": median co-runner slowdown of its measured entries}, over the
        kinds stored without entries (``slowdowns``)."""
        if self._slowdowns is None:
            import statistics

            ratios: Dict[str, List[float]] = {}
            for x in list(self.ops.values()) + list(self.fetches.values()):
                if "contended" in x and x["seconds"] > 0:
                    ratios.setdefault(x["kind"], []).append(max(1.0, x["contended"] / x["seconds"]))
            self._slowdowns = {**self.kind_slowdowns, **{k: statistics.median(v) for k, v in ratios.items()}}
        return self._slowdowns

    def _index(self):
        if self._by_kind is None:
            groups: Dict[str, List[Tuple[float, float]]] = {}
            for e in self.ops.values():
                groups.setdefault(e["kind"], []).append((float(e["flops"]), float(e["seconds"])))
            self._by_kind = {}
            for kind, pts in groups.items():
                pts.sort()
                self._by_kind[kind] = ([p[0] for p in pts], [p[1] for p in pts])
        return self._by_kind

    def lookup(self, kind: str, ins, outs) -> Optional[float]:
        """Measured or interpolated seconds, or None when `kind` was never measured."""
        hit = self.ops.get(shape_key(kind, ins, outs))
        if hit is not None:
            return float(hit["seconds"])
        pts = self._index().get(kind)
        if not pts:
            return None
        xs, ys = pts
        f = flops(kind, ins, outs)
        if f <= xs[0]:
            return ys[0]
        if f >= xs[-1]:
            return ys[-1] * f / xs[-1] if xs[-1] > 0 else ys[-1]
        i = bisect.bisect_left(xs, f)
        x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
        return y0 + (y1 - y0) * (f - x0) / (x1 - x0) if x1 > x0 else y1


#: a profile's device figure holding the co-runner slowdown of an op kind (or "fetch")
SLOWDOWN_PREFIX = "co_runner_slowdown:"


def profile_slowdown(hw: Hardware, kind: str) -> float:
    """The co-runner slowdown profile `hw` gives op `kind` (``device["co_runner_slowdown:KIND"]``,
    else ``co_runner_slowdown:default``, else 1)."""
    dev = hw.device
    return max(1.0, float(dev.get(SLOWDOWN_PREFIX + kind, dev.get(SLOWDOWN_PREFIX + "default", 1.0))))


def efficiency(hw: Hardware, kind: str, f: float) -> float:
    """Fraction of `hw`'s peak FLOP/s op `kind` reaches on a tile of `f` FLOPs:
    ``eff[kind] * f / (f + half[kind])`` (``eff``: the profile's ``efficiency``, falling back
    to its ``default``, else 0.5; ``half``: ``efficiency_half_flops``, same fallback, else 0)."""
    eff = float(hw.efficiency.get(kind, hw.efficiency.get("default", 0.5)))
    half = float(hw.half_flops.get(kind, hw.half_flops.get("default", 0.0)))
    return eff * f / (f + half) if half > 0 else eff


def roofline(hw: Hardware, kind: str, ins, outs) -> float:
    """Seconds op `kind` takes on these tiles by the roofline of profile `hw`:
    ``launch + max(FLOPs / (peak * efficiency(kind, FLOPs)), bytes / (mem_bw * eff["memory"]))``
    (a profile with ``serial_roofline``: the sum of the two, plus a convolution's column
    buffer over ``im2col_bandwidth``; see :func:`roofline_seconds`)."""
    extra = im2col_bytes(kind, ins, outs) if hw.device.get("serial_roofline") else 0.0
    return roofline_seconds(hw, kind, flops(kind, ins, outs), bytes_touched(ins, outs), extra)


def roofline_seconds(hw: Hardware, kind: str, f: float, nbytes: float, im2col: float = 0.0) -> float:
    """:func:`roofline` of an op of `kind` doing `f` FLOPs over `nbytes` bytes.

    On a GPU the arithmetic and the memory traffic of a kernel overlap: the slower one is the
    time. A CPU thread running NumPy kernels (the host runtime) does them one after another:
    an op is several passes (a GEMM packs its operands, then multiplies; an element-wise op
    with temporaries streams each), so a profile with ``serial_roofline`` adds the two, and
    a convolution's `im2col` column-buffer bytes at ``device.im2col_bandwidth``."""
    t_flops = f / (hw.peak_flops * efficiency(hw, kind, f)) if f > 0 else 0.0
    t_mem = nbytes / (hw.mem_bandwidth * float(hw.efficiency.get("memory", 0.7)))
    if hw.device.get("serial_roofline"):
        cols = im2col / float(hw.device.get("im2col_bandwidth", hw.mem_bandwidth)) if im2col > 0 else 0.0
        return hw.launch_overhead + t_flops + t_mem + cols
    return hw.launch_overhead + max(t_flops, t_mem)


class CostTable:
    """Seconds per compute op on a hardware profile (roofline, or measured where calibrated)."""

    def __init__(self, hardware: Hardware, calibration: Optional[Calibration] = None):
        self.hw = hardware
        self.calibration = calibration
        self._cache: Dict[str, float] = {}

    def roofline(self, kind: str, ins, outs) -> float:
        """:func:`roofline` on this table's profile."""
        return roofline(self.hw, kind, ins, outs)

    def time(self, kind: str, ins, outs) -> float:
        """Seconds op `kind` takes on these tiles on one device running alone."""
        key = shape_key(kind, ins, outs)
        t = self._cache.get(key)
        if t is None:
            t = self.calibration.lookup(kind, ins, outs) if self.calibration is not None else None
            if t is None:
                t = self.roofline(kind, ins, outs)
            self._cache[key] = t
        return t

    def op_time(self, eg, op: dict) -> float:
        return self.time(*op_tiles(eg, op))

    def fetch_time(self, eg, op: dict) -> float:
        """Seconds a device thread takes to run fetch op `op` alone (``fetch_on_cores``
        hosts): measured for its piece shapes, else the fitted fetch model, else the
        profile's ``fetch_overhead_s`` + bytes / ``local_copy_bandwidth``."""
        pieces = fetch_pieces(eg, op)
        return self._fetch_time(op, pieces, fetch_key(eg, op, pieces))

    def fetch_costs(self, eg, op: dict) -> Tuple[float, float]:
        """(:meth:`fetch_time`, :meth:`slowdown`) of fetch op `op`, its pieces read once."""
        pieces = fetch_pieces(eg, op)
        key = fetch_key(eg, op, pieces)
        return self._fetch_time(op, pieces, key), self._slowdown("fetch", lambda: key)

    def _fetch_time(self, op: dict, pieces, key: str) -> float:
        hit = self.calibration.fetches.get(key) if self.calibration is not None else None
        if hit is not None:
            return float(hit["seconds"])
        return self.fetch_model_time(sum(p[1] for p in pieces), sum(p[2] for p in pieces), op["accumulate"])

    def fetch_model_time(self, nbytes: float, rows: float, accumulate: bool) -> float:
        """The fitted fetch model's seconds (see :meth:`fetch_time`) for a fetch of `nbytes`
        bytes in `rows` contiguous runs."""
        f = self.calibration.fetch if self.calibration is not None else {}
        dev = self.hw.device
        copy_bw = float(f.get("bandwidth", self.hw.local_copy_bandwidth))
        bw = float(f.get("accumulate_bandwidth", dev.get("accumulate_bandwidth", copy_bw))) if accumulate else copy_bw
        return (float(f.get("overhead", dev.get("fetch_overhead_s", 0.0)))
                + rows * float(f.get("row_seconds", dev.get("fetch_row_seconds", 0.0))) + nbytes / bw)

    def slowdown(self, eg, op: dict) -> float:
        """How many times longer `op` takes when the other cores are busy than alone
        (measured, see :class:`Calibration`; else the profile's ``co_runner_slowdown:KIND``
        figure, as a fitted profile carries it; else 1)."""
        if op["kind"] == "fetch":
            return self._slowdown("fetch", lambda: fetch_key(eg, op))
        kind, ins, outs = op_tiles(eg, op)
        return self._slowdown(kind, lambda: shape_key(kind, ins, outs))

    def tile_costs(self, kind: str, ins, outs) -> Tuple[float, float]:
        """(:meth:`time`, co-runner slowdown) of a compute op `kind` on these tiles: what
        :meth:`op_time` and :meth:`slowdown` give an op whose :func:`op_tiles` they are."""
        return self.time(kind, ins, outs), self._slowdown(kind, lambda: shape_key(kind, ins, outs))

    def _slowdown(self, kind: str, key) -> float:
        """:meth:`slowdown` of an op of `kind` ("fetch" for fetches) whose calibration key
        `key()` gives (called only with a calibration)."""
        if self.calibration is not None:
            s = self.calibration.slowdown(key(), kind)
            if s != 1.0 or kind in self.calibration.slowdowns_by_kind():
                return s
        return profile_slowdown(self.hw, kind)

    def threads(self, kind: str) -> float:
        """Cores an op keeps busy when it runs alone on a shared-core host: BLAS kernels use
        the profile's ``blas_threads`` (default: every core), the other NumPy kernels one."""
        if not self.hw.cores:
            return 1.0
        blas = float(self.hw.device.get("blas_threads", self.hw.cores))
        return min(blas, float(self.hw.cores)) if kind in MATMUL_KINDS else 1.0
