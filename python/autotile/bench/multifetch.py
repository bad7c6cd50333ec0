"""Host MultiFetch bandwidth by region shape, against memcpy of the same bytes.

    autotile bench multifetch            # 64 MB tensors, 9 repeats
    autotile bench multifetch --quick    # 16 MB tensors, 5 repeats
    autotile bench multifetch --small-pages   # buffers on 4 KB pages

Each row copies one region of a C-contiguous float32 source into a C-contiguous destination
with `_core.multifetch` (csrc/runtime/multifetch.cc), the copy every MultiFetch op of the host
runtime makes, and compares it with a flat copy (`numpy.copyto`, glibc memcpy) of the same
number of bytes. Before every timed call a 64 MB scratch buffer (twice the L3 of the 2-core
dev machine) is read so neither side copies from a warm cache, and the two are timed in
turn, repeat by repeat, so load from other jobs falls on both alike. Regions: whole rows (a
batch half), the last dim split 2, 8, 32 and 128 ways (column tiles: runs of 1/k of a row),
NCHW tiles split along channels and along width. Every buffer is memory of the kind the host
runtime's arenas use (2 MB pages where the kernel offers them); `--small-pages` puts them all
on 4 KB pages instead, which short strided runs (one page per run) feel most. Medians of the
repeats; the ratio column is multifetch over memcpy (target >= 0.8 for split inner dims). The
CPU-time ratio is the same from the calling thread's CPU time, which leaves out time the
thread waited for a core on a loaded machine; it overstates a piece shared with MultiFetch's
helper thread (only used while the load average leaves a core free: printed below the table).
Writes bench/out/multifetch.json."""
from __future__ import annotations

import argparse
import mmap
import os
import sys
import time

import numpy as np

from .common import table, write_json



def _median(times):
    return sorted(times)[len(times) // 2]


_SCRATCH = []


def _evict():
    """Reads a buffer twice the size of a 32 MB L3, pushing earlier data (and the dirty lines of
    the last copy, written back now rather than inside the next timed call) out of the caches."""
    if not _SCRATCH:
        _SCRATCH.append(np.ones(64 << 20, np.uint8))
    _SCRATCH[0].max()


def timed_in_turn(fns, repeat):
    """Median (wall, calling thread's CPU) seconds of each of `fns`, timed one after another
    each repeat from cold caches."""
    times = [([], []) for _ in fns]
    for _ in range(repeat):
        for fn, (wall, cpu) in zip(fns, times):
            _evict()
            t0, c0 = time.perf_counter(), time.thread_time()
            fn()
            cpu.append(time.thread_time() - c0)
            wall.append(time.perf_counter() - t0)
    return [(_median(wall), _median(cpu)) for wall, cpu in times]


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
        ("last dim / 128", m, (0, 0), (m[0], m[1] // 128)),
        ("NCHW channel half", nchw, (0, c // 2, 0, 0), nchw),
        ("NCHW width half", nchw, (0, 0, 0, hw // 2), nchw),
    ]


def _run_bytes(shape, lo, hi):
    """Bytes of one contiguous run of the region in the source (trailing whole dims merge)."""
    run = 1
    for d in range(len(shape) - 1, -1, -1):
        run *= hi[d] - lo[d]
        if hi[d] - lo[d] != shape[d]:
            break
    return 4 * run


def _arena(shape, small_pages=False):
    """A float32 array in memory of the kind the host runtime's arenas are made of (its own
    `_zeroed_pages`: a private anonymous mapping asking for 2 MB pages), or with `small_pages`
    in a shared anonymous mapping, which stays on 4 KB pages (as the arenas were before). Every
    buffer of a row comes the same way, so both sides copy between the same kind of pages
    (with NumPy's allocator, whether a 2 MB buffer landed on huge pages depended on what
    earlier rows had freed, and moved memcpy's time by half)."""
    from autotile.backend.host_runtime import _zeroed_pages

    n = int(np.prod(shape))
    if small_pages:
        raw = np.frombuffer(mmap.mmap(-1, max(4 * n, 1)), np.uint8)
    else:
        _, raw = _zeroed_pages(4 * n)
    return raw[:4 * n].view(np.float32).reshape(shape)


def measure(name, shape, lo, hi, repeat, small_pages=False):
    from autotile import _core

    src = _arena(shape, small_pages)
    src[...] = np.random.default_rng(0).standard_normal(shape, np.float32)
    region = tuple(h - l for l, h in zip(lo, hi))
    dst = _arena(region, small_pages)
    dst[...] = 0.0  # pages faulted in before timing, as an arena's are after its first step
    pool = _arena((dst.size,), small_pages)
    pool[...] = 1.0
    flat = _arena((dst.size,), small_pages)
    flat[...] = 0.0
    (t_fetch, c_fetch), (t_copy, c_copy) = timed_in_turn([lambda: _core.multifetch(dst, lo, [(src, (0,) * len(shape), lo, hi)]),
                                     lambda: np.copyto(flat, pool)], repeat)
    assert np.array_equal(dst, src[tuple(slice(l, h) for l, h in zip(lo, hi))])
    return {"case": name, "bytes": dst.nbytes, "run_bytes": _run_bytes(shape, lo, hi), "multifetch_GBps": dst.nbytes / t_fetch / 1e9,
            "memcpy_GBps": dst.nbytes / t_copy / 1e9, "cpu_ratio": c_copy / c_fetch}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--small-pages", action="store_true", help="every buffer on 4 KB pages (shared mapping)")
    args = ap.parse_args(argv)
    mbytes, repeat = (16, 5) if args.quick else (64, 9)
    load = os.getloadavg()[0]
    rows = [measure(*c, repeat, args.small_pages) for c in cases(mbytes)]
    print(table(["region", "MB", "run bytes", "multifetch GB/s", "memcpy GB/s", "ratio", "CPU-time ratio"],
                [[r["case"], f"{r['bytes'] / 1e6:.1f}", str(r["run_bytes"]), f"{r['multifetch_GBps']:.2f}", f"{r['memcpy_GBps']:.2f}",
                  f"{r['multifetch_GBps'] / r['memcpy_GBps']:.2f}", f"{r['cpu_ratio']:.2f}"] for r in rows]))
    # wall-clock medians: on a shared machine they depend on what else runs
    print(f"load average {load:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    write_json("multifetch.json", {"rows": rows, "quick": args.quick, "small_pages": args.small_pages, "load_average": load})
    return 0


if __name__ == "__main__":
    sys.exit(main())
