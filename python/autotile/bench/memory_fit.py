"""The largest model that fits per device count under a per-device memory budget: WResNet
width and RNN hidden size, with the tofu plan (and data parallelism for comparison). The
memory of a plan is its busiest device's arena under the ExecGraph's static memory plan
(COMPUTED, no run); the budget defaults to the p2.8xlarge K80's 12 GB.

    autotile bench memory [--quick] [--profile p2.8xlarge] [--budget-gb 12]
"""
from __future__ import annotations

import os
import sys
import time

from . import common

ALGORITHMS = ("tofu", "data")


def peak_memory(name: str, batch: int, devices: int, algorithm: str):
    """Largest device arena (bytes) of `name`'s plan, or an error text."""
    import autotile as at

    try:
        _, eg = common.plan_and_transform(at.models.get(name, batch=batch), devices, algorithm)
    except (at.Error, MemoryError) as e:
        return None, common.error_text(e)
    return max(eg.stats()["peak_memory"]), None


def largest_fitting(family, sizes, batch, devices, algorithm, budget, log):
    """Binary search over increasing `sizes` (memory grows with size) for the largest whose
    plan fits `budget`; returns (size or None, {size: bytes or error})."""
    seen = {}

    def fits(i):
        size = sizes[i]
        if size not in seen:
            mem, err = peak_memory(family(size), batch, devices, algorithm)
            seen[size] = mem if err is None else err
            log(f"  {family(size)} batch {batch} on {devices} ({algorithm}): "
                f"{'%.2f GB' % (mem / 1e9) if err is None else err}")
        v = seen[size]
        return isinstance(v, int) and v <= budget

    lo, hi = 0, len(sizes) - 1
    if not fits(lo):
        return None, seen
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return sizes[lo], seen


def main(argv=None) -> int:
    p = common.arg_parser(__doc__.split("\n")[0])
    p.add_argument("--budget-gb", type=float, default=None, help="per-device memory (default: the profile's)")
    args = p.parse_args(argv)
    from autotile.sim import load_profile

    hw = load_profile((args.profile or ["p2.8xlarge"])[0])
    budget = args.budget_gb * 1e9 if args.budget_gb else hw.memory_bytes
    if args.quick:
        budget = args.budget_gb * 1e9 if args.budget_gb else 1e9  # small models, small budget
        families = [("WResNet-50 width", lambda w: f"wresnet-50-{w}", [1, 2, 3, 4], 4),
                    ("RNN-2 hidden", lambda h: f"rnn-2-{h}", [256, 512, 1024, 2048], 64)]
        device_counts = [1, 2, 4]
    else:
        families = [("WResNet-152 width", lambda w: f"wresnet-152-{w}", list(range(1, 11)), 8),
                    ("RNN-4 hidden", lambda h: f"rnn-4-{h}", [1024, 2048, 4096, 6144, 8192, 12288], 512)]
        device_counts = [1, 2, 4, 8]
    t0 = time.perf_counter()
    log = lambda s: print(s, file=sys.stderr)  # noqa: E731
    rows, raw = [], []
    for label, family, sizes, batch in families:
        for k in device_counts:
            row = [label, batch, k]
            for algo in ALGORITHMS:
                best, seen = largest_fitting(family, sizes, batch, k, algo, budget, log)
                errors = [v for v in seen.values() if isinstance(v, str)]
                row.append(best if best is not None else ("n/a" if errors and len(errors) == len(seen) else "none"))
                raw.append({"family": label, "batch": batch, "devices": k, "algorithm": algo, "largest": best,
                            "peak_memory": {str(s): v for s, v in seen.items()}})
            rows.append(row)
    text = (f"Largest model whose plan fits {budget / 1e9:.1f} GB per device (memory plan of the ExecGraph, "
            f"COMPUTED; sizes tried: {', '.join(f'{l} {s}' for l, _, s, _ in families)}; n/a = no plan)\n"
            + common.table(["model", "batch", "devices", *ALGORITHMS], rows))
    print(text)
    common.write_json("memory_fit.json", {"budget_bytes": budget, "results": raw, "table": text})
    _plot(raw, families, device_counts)
    print(f"\n{time.perf_counter() - t0:.0f}s; raw numbers in {common.out_path('memory_fit.json')}, "
          f"plot {common.out_path('memory_fit.png')}")
    return 0


def _plot(raw, families, device_counts):
    plt = common.pyplot()
    fig, axes = plt.subplots(1, len(families), figsize=(4.5 * len(families), 3.4), squeeze=False)
    for ax, (label, _, sizes, _) in zip(axes[0], families):
        for algo in ALGORITHMS:
            pts = [(r["devices"], r["largest"]) for r in raw
                   if r["family"] == label and r["algorithm"] == algo and r["largest"] is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=algo)
        ax.set_xscale("log", base=2)
        ax.set_xticks(device_counts)
        ax.set_xticklabels([str(k) for k in device_counts])
        ax.set_xlabel("devices")
        ax.set_ylabel(f"largest {label.split()[-1]} that fits")
        ax.set_title(label, fontsize=9)
        ax.legend(fontsize=7)
    common.save_figure(fig, "memory_fit.png")


if __name__ == "__main__":
    sys.exit(main())
