"""Overhead of the multi-device host runtime, and MultiFetch bandwidth.

1. The same training step on 1 device and on k virtual devices on this machine: the total
   work is equal (the plan splits it), so the wall-time ratio is the runtime's overhead
   (threads, events, fetches, reductions). Target: at most 1.2x where kernels dominate.
2. MultiFetch (one C++ call assembling a region from several pieces, GIL released) against
   a plain memcpy (numpy.copyto) of the same bytes. Target: at least 80%.

    autotile bench runtime [--quick] [--devices 8]
"""
from __future__ import annotations

import argparse
import os
import sys

from .common import median_seconds, random_step_values, table, write_json

import numpy as np  # noqa: E402

import autotile as at  # noqa: E402
from autotile import _core  # noqa: E402
from autotile.backend.multi_device import run_multi_device  # noqa: E402


def step_ratio(model, batch, devices, algorithm, repeat):
    sym = at.models.get(model, batch=batch)
    vals, shapes = random_step_values(sym)
    times = {}
    for k in (1, devices):
        plan = at.plan(sym, devices=k, shapes=shapes, algorithm=algorithm)
        secs = []

        def step():
            res = run_multi_device(sym, k, vals, plan=plan)
            secs.append(res.stats["step_seconds"])
        median_seconds(step, repeat=repeat, warmup=1)
        times[k] = float(np.median(secs[1:]))
    return times[1], times[devices]


def multifetch_bandwidth(mbytes, pieces, repeat):
    n = int(mbytes * 1e6 / 4)
    rows = 1024
    cols = n // rows
    dst = np.empty((rows, cols), np.float32)
    step = rows // pieces
    srcs = [np.random.default_rng(i).standard_normal((step, cols)).astype(np.float32) for i in range(pieces)]
    plist = [(s, (i * step, 0), (i * step, 0), ((i + 1) * step, cols)) for i, s in enumerate(srcs)]
    t_fetch = median_seconds(lambda: _core.multifetch(dst, (0, 0), plist), repeat=repeat)
    for i, s in enumerate(srcs):
        assert np.array_equal(dst[i * step:(i + 1) * step], s)
    flat_src = np.concatenate(srcs)
    flat_dst = np.empty_like(flat_src)
    t_copy = median_seconds(lambda: np.copyto(flat_dst, flat_src), repeat=repeat)
    nbytes = dst.nbytes
    # a strided region: the right half of every row from one source
    half = np.random.default_rng(9).standard_normal((rows, cols)).astype(np.float32)
    out = np.empty((rows, cols // 2), np.float32)
    t_strided = median_seconds(lambda: _core.multifetch(out, (0, cols // 2), [(half, (0, 0), (0, cols // 2), (rows, cols))]),
                               repeat=repeat)
    t_strided_np = median_seconds(lambda: np.copyto(out, half[:, cols // 2:]), repeat=repeat)
    return {"bytes": nbytes, "multifetch_GBps": nbytes / t_fetch / 1e9, "memcpy_GBps": nbytes / t_copy / 1e9,
            "strided_multifetch_GBps": out.nbytes / t_strided / 1e9, "strided_numpy_GBps": out.nbytes / t_strided_np / 1e9}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    repeat = 3 if args.quick else 5
    cases = [("mlp-4-1024", 256, "tofu"), ("mlp-4-1024", 256, "data")] if args.quick else \
        [("mlp-4-2048", 1024, "tofu"), ("mlp-4-2048", 1024, "data"), ("mlp-4-4096", 2048, "tofu")]
    rows, results = [], []
    for model, batch, algo in cases:
        one, many = step_ratio(model, batch, args.devices, algo, repeat)
        rows.append([model, batch, algo, round(one, 3), round(many, 3), round(many / one, 2)])
        results.append({"model": model, "batch": batch, "algorithm": algo, "one_device_s": one,
                        f"{args.devices}_devices_s": many, "ratio": many / one})
    print(f"training step: 1 device vs {args.devices} virtual devices on this machine (median step seconds)")
    print(table(["model", "batch", "plan", "1 dev s", f"{args.devices} dev s", "ratio"], rows))
    bw = multifetch_bandwidth(32 if args.quick else 128, 4, repeat)
    print("\nMultiFetch vs memcpy of the same bytes")
    print(table(["bytes", "multifetch GB/s", "memcpy GB/s", "ratio", "strided mf GB/s", "strided numpy GB/s"],
                [[bw["bytes"], round(bw["multifetch_GBps"], 2), round(bw["memcpy_GBps"], 2),
                  round(bw["multifetch_GBps"] / bw["memcpy_GBps"], 2), round(bw["strided_multifetch_GBps"], 2),
                  round(bw["strided_numpy_GBps"], 2)]]))
    path = write_json("runtime.json", {"steps": results, "multifetch": bw})
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
