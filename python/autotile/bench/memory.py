"""Per-device memory of the execution graph versus the ideal (serial peak / k).

For each model: the serial graph's peak (the 1-device execution graph under the same
static memory planner: in-place reuse, per-layer backward order), and on k devices the
per-device arena with Tofu's control dependencies (each device in serial order, fetches just
before their consumer) and without them (a dataflow order: ops as soon as their inputs exist,
and memory reused only between ops the graph's dependencies order, as a planner for an engine
without control dependencies must). Tofu Sec 6: without control dependencies per-device
memory far exceeds the ideal; with them it approaches it.

Tofu Sec 5 splits a device's memory into its 1/k share of the tensors (the same for every
plan) and buffers for communication (proportional to the plan's communication). The
`comm` columns are the second part at the device's peak: bytes held beyond the device's
share of each tensor (replicated tiles assembled by MultiFetch, fetched input regions,
partial sums awaiting reduction); `(ctrl-comm)/ideal` is the first part against the ideal.

    autotile bench memory-plan [--quick] [--models vgg16,wresnet-50-4] [--devices 8] [--batch 32]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from .common import out_path, plot_or_note, pyplot, run_main, table, write_json

import autotile as at  # noqa: E402


def beyond_share_bytes(eg, device):
    """At `device`'s live-memory peak: bytes held beyond the device's 1/k share of each tensor
    (replicated tiles, fetched input regions, partial sums awaiting their reduction). Tofu
    Sec 5 splits per-device memory into (1) the 1/k share, the same for every plan, and (2)
    buffers for communication, proportional to the plan's communication: this is (2).
    A buffer that takes another's memory in place counts once."""
    import numpy as np

    k = eg.devices
    share = [int(np.prod(s)) * np.dtype(t).itemsize / k
             for s, t in zip(eg.lowered.tensor_shapes, eg.lowered.tensor_dtypes)]
    events = []  # (time, 0 = start / 1 = end, buffer)
    by_offset = {}
    for i, b in sorted(((i, b) for i, b in enumerate(eg.buffers) if b["device"] == device),
                       key=lambda ib: ib[1]["live"][0]):
        prev = by_offset.get(b["offset"])
        if prev is not None and eg.buffers[prev]["live"][1] == b["live"][0]:
            events.append((b["live"][0], 0, -1 - prev))  # in place: the memory passes on
        by_offset[b["offset"]] = i
        events.append((b["live"][0], 0, i))
        events.append((b["live"][1], 1, -1 - i))
    held = {}  # tensor -> live bytes of its buffers
    live, best = 0, (0, 0.0)
    ended = set()
    for _, _, e in sorted(events):
        i = e if e >= 0 else -1 - e
        if e < 0:
            if i in ended:
                continue
            ended.add(i)
        b = eg.buffers[i]
        sign = 1 if e >= 0 else -1
        live += sign * b["bytes"]
        held[b["tensor"]] = held.get(b["tensor"], 0) + sign * b["bytes"]
        if live > best[0]:
            best = (live, sum(max(0.0, v - share[t]) for t, v in held.items() if v > 0))
    return best[1]


def measure(model, devices, batch, algorithm):
    t0 = time.perf_counter()
    serial_plan = at.plan(model, devices=1, batch=batch, replicate_fallback=True)
    serial = at.transform(model, serial_plan, replicate_fallback=True).peak_memory(0)
    plan = at.plan(model, devices=devices, batch=batch, algorithm=algorithm, replicate_fallback=True)
    rows = {}
    for ctrl in (True, False):
        eg = at.transform(model, plan, control_deps=ctrl, replicate_fallback=True)
        peaks = [eg.peak_memory(d) for d in range(devices)]
        worst = max(range(devices), key=lambda d: peaks[d])
        rows[ctrl] = {"peak": peaks[worst], "mean": sum(peaks) / devices, "beyond_share": beyond_share_bytes(eg, worst)}
    ideal = serial / devices
    return {"model": model, "devices": devices, "batch": batch, "algorithm": algorithm, "serial_peak": serial,
            "ideal": ideal, "with_control_deps": rows[True], "without_control_deps": rows[False],
            "seconds": time.perf_counter() - t0}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="vgg16,wresnet-50-4")
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--algorithm", default="tofu")
    ap.add_argument("--quick", action="store_true", help="small models only (vgg11, batch 16)")
    args = ap.parse_args(argv)
    models = ["vgg11"] if args.quick else args.models.split(",")
    batch = 16 if args.quick else args.batch
    results, rows = [], []
    for m in models:
        try:
            r = measure(m, args.devices, batch, args.algorithm)
        except at.Error as e:
            rows.append([m, "-", "-", "-", "-", "-", "-", "-", f"error: {str(e)[:60]}"])
            continue
        results.append(r)
        w, wo = r["with_control_deps"], r["without_control_deps"]
        mb = 1e6
        rows.append([m, round(r["serial_peak"] / mb, 1), round(r["ideal"] / mb, 1), round(w["peak"] / mb, 1),
                     round(w["peak"] / r["ideal"], 2), round(w["beyond_share"] / mb, 1),
                     round((w["peak"] - w["beyond_share"]) / r["ideal"], 2),
                     round(wo["peak"] / mb, 1), round(wo["peak"] / r["ideal"], 2)])
    print(f"per-device peak memory on {args.devices} devices ({args.algorithm} plan, batch {batch}); MB = 1e6 bytes")
    print(table(["model", "serial MB", "ideal MB", "ctrl MB", "ctrl/ideal", "comm MB", "(ctrl-comm)/ideal",
                 "no-ctrl MB", "no-ctrl/ideal"], rows))
    path = write_json("memory.json", results)
    png = plot_or_note(plot, results, out_path("memory.png")) if results else None
    print(f"\nwrote {path}" + (f" and {png}" if png else ""))


def plot(results, path):
    """Bar chart of the per-device peaks against the ideal share; returns its path."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    names = [r["model"] for r in results]
    xs = range(len(results))
    ax.bar([x - 0.25 for x in xs], [r["ideal"] / 1e6 for r in results], 0.25, label="ideal (serial / k)")
    ax.bar(list(xs), [r["with_control_deps"]["peak"] / 1e6 for r in results], 0.25, label="with control deps")
    ax.bar(list(xs), [r["with_control_deps"]["beyond_share"] / 1e6 for r in results], 0.25, fill=False,
           hatch="//", label="... of which communication buffers")
    ax.bar([x + 0.25 for x in xs], [r["without_control_deps"]["peak"] / 1e6 for r in results], 0.25,
           label="without control deps")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(names)
    ax.set_ylabel("per-device peak (MB)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


if __name__ == "__main__":
    sys.exit(run_main(main))
