"""Host MultiFetch bandwidth by region shape, against memcpy of the same bytes.

    autotile bench multifetch            # 64 MB tensors, 9 repeats
    autotile bench multifetch --quick    # 16 MB tensors, 5 repeats

Each row copies one region of a C-contiguous float32 source into a C-contiguous destination
with `_core.multifetch` (csrc/runtime/multifetch.cc), the copy every MultiFetch op of the host
runtime makes, and compares it with a flat copy (`numpy.copyto`) of the same number of bytes
from a buffer as large as the source, taken from a different place each repeat so neither side
copies from a warm cache. Regions: whole rows (a batch half), the last dim split 2, 8 and 32
ways (column tiles), NCHW tiles split along channels and along width. Medians of the repeats;
the ratio column is multifetch over memcpy (target >= 0.8 for split inner dims).
Writes bench/out/multifetch.json."""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from .common import table, write_json



def median_time(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def cases(mbytes):
    n = int(mbytes * 1e6 / 4)
    side = int(np.sqrt(n)) // 64 * 64
    m = (side, side)
    c = 64
    hw = int(np.sqrt(n / (32 * c))) // 4 * 4
    nchw = (32, c, hw, hw)
    return [
        ("whole rows (batch half)", m, (m[0] // 2, 0), (m[0], m[1])),
        ("last dim / 2", m, (0, 0), (m[0], m[1] // 2)),
        ("last dim / 8", m, (0, 0), (m[0], m[1] // 8)),
        ("last dim / 32", m, (0, 0), (m[0], m[1] // 32)),
        ("NCHW channel half", nchw, (0, c // 2, 0, 0), nchw),
        ("NCHW width half", nchw, (0, 0, 0, hw // 2), nchw),
    ]


def measure(name, shape, lo, hi, repeat):
    from autotile import _core

    src = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    region = tuple(h - l for l, h in zip(lo, hi))
    dst = np.empty(region, np.float32)
    t_fetch = median_time(lambda: _core.multifetch(dst, lo, [(src, (0,) * len(shape), lo, hi)]), repeat)
    assert np.array_equal(dst, src[tuple(slice(l, h) for l, h in zip(lo, hi))])
    # memcpy of the same bytes, from a fresh place of a source-sized pool each time
    pool = np.random.default_rng(1).standard_normal(max(src.size, 4 * dst.size)).astype(np.float32)
    flat = np.empty(dst.size, np.float32)
    spots = max(1, pool.size // dst.size)
    turn = [0]

    def cold_copy():
        off = (turn[0] % spots) * dst.size
        turn[0] += 1
        np.copyto(flat, pool[off:off + dst.size])

    t_copy = median_time(cold_copy, repeat)
    return {"case": name, "bytes": dst.nbytes, "multifetch_GBps": dst.nbytes / t_fetch / 1e9,
            "memcpy_GBps": dst.nbytes / t_copy / 1e9}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    mbytes, repeat = (16, 5) if args.quick else (64, 9)
    rows = [measure(*c, repeat) for c in cases(mbytes)]
    print(table(["region", "MB", "multifetch GB/s", "memcpy GB/s", "ratio"],
                [[r["case"], f"{r['bytes'] / 1e6:.1f}", f"{r['multifetch_GBps']:.2f}", f"{r['memcpy_GBps']:.2f}",
                  f"{r['multifetch_GBps'] / r['memcpy_GBps']:.2f}"] for r in rows]))
    write_json("multifetch.json", {"rows": rows, "quick": args.quick})
    return 0


if __name__ == "__main__":
    sys.exit(main())
