"""Times TDL analysis (autotile._core.analyze_tdl) from Python on every registered op's sample
descriptions and on a synthetic 10k-node workload (same texts, many shapes), and prints a
table. The C++-only timing is tests/cpp/bench/tdl_bench.cc (autotile_tdl_bench).

Usage: python3 bench/tdl_analyze.py [--nodes 10000] [--k 2]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "python"), os.path.join(HERE, "..", "tests", "tdl")]

from autotile import _core  # noqa: E402
from autotile.ops import registry  # noqa: E402
import op_samples  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=10000)
    ap.add_argument("--k", type=int, default=2)
    args = ap.parse_args()

    samples = [(n, registry.get(n).tdl(a, i, o), i, o) for n, a, i, o in op_samples.samples()]
    _core.clear_tdl_cache()
    t0 = time.perf_counter()
    for _, text, ins, outs in samples:
        _core.parse_tdl(text)
    parse_us = (time.perf_counter() - t0) / len(samples) * 1e6

    t0 = time.perf_counter()
    reps = max(1, args.nodes // len(samples))
    for _ in range(reps):
        for _, text, ins, outs in samples:
            _core.analyze_tdl(text, ins, outs, args.k)
    calls = reps * len(samples)
    total = time.perf_counter() - t0
    print(f"{len(samples)} op samples, {len({t for _, t, _, _ in samples})} distinct texts")
    print(f"{'first parse':<32}{parse_us:10.2f} us/text")
    print(f"{'analyze_tdl (cached, k=%d)' % args.k:<32}{total / calls * 1e6:10.2f} us/call  ({calls} calls, {total:.3f} s)")
    # batch sizes vary per node: same texts, fresh shapes
    fc = "data, weight, bias -> out: out[n, o] = sum(k) { data[n, k] * weight[o, k] } + bias[o]"
    t0 = time.perf_counter()
    for n in range(args.nodes):
        b = 2 * (1 + n % 512)
        _core.analyze_tdl(fc, [(b, 1024), (1024, 1024), (1024,)], [(b, 1024)], args.k)
    total = time.perf_counter() - t0
    print(f"{'FC with %d batch sizes' % args.nodes:<32}{total / args.nodes * 1e6:10.2f} us/call  ({total:.3f} s)")


if __name__ == "__main__":
    main()
