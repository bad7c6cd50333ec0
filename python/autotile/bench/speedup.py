"""Throughput speedup on 8 devices over 1 device, per algorithm and batch size (Soybean
Fig. 10): AlexNet and VGG-16/19, batch 32..2048, SIMULATED on hardware profiles
(p2.8xlarge and dgx-a100 by default; a profile with more devices, 2x8-ib, uses all 16). Speedup = (batch / simulated 8-device step) /
(batch / simulated 1-device step of the same model and batch on the same profile).

    autotile bench speedup [--quick] [--profile p2.8xlarge --profile dgx-a100]
"""
from __future__ import annotations

import math
import os
import sys
import time

from . import common

DEVICES = 8


def main(argv=None) -> int:
    args = common.arg_parser(__doc__.split("\n")[0]).parse_args(argv)
    import autotile as at
    from autotile.sim import load_profile

    profiles = [load_profile(p) for p in (args.profile or ["p2.8xlarge", "dgx-a100"])]
    if args.quick:
        models, batches = ["alexnet"], [64, 512]
    else:
        models, batches = ["alexnet", "vgg16", "vgg19"], [32, 64, 128, 256, 512, 1024, 2048]
    algorithms = common.ALGORITHMS
    t0 = time.perf_counter()
    raw = []
    # every profile runs on DEVICES devices, except a bigger machine (2x8-ib: all 16 of them)
    counts = sorted({max(DEVICES, hw.devices or DEVICES) for hw in profiles})
    for model in models:
        for batch in batches:
            sym = at.models.get(model, batch=batch)
            base = common.simulate_config(sym, 1, "data", profiles)
            entry = {"model": model, "batch": batch, "single": base, "algorithms": {}}
            for algo in algorithms:
                merged = None
                for k in counts:
                    group = [hw for hw in profiles if max(DEVICES, hw.devices or DEVICES) == k]
                    r = common.simulate_config(sym, k, algo, group)
                    if merged is None or not merged["ok"]:
                        merged = r
                    elif r["ok"]:
                        merged["sims"].update(r["sims"])
                    for hw in group:
                        if r["ok"]:
                            merged["sims"][hw.name]["devices"] = k
                entry["algorithms"][algo] = merged
            raw.append(entry)
            print(f"  {model} batch {batch}: {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    tables = []
    for hw in profiles:
        rows = []
        for e in raw:
            row = [e["model"], e["batch"]]
            single = e["single"]["sims"][hw.name]["step_seconds"] if e["single"]["ok"] else None
            for algo in algorithms:
                r = e["algorithms"][algo]
                if not r["ok"] or single is None:
                    row.append("n/a")
                    continue
                s = r["sims"][hw.name]
                speed = single / s["step_seconds"]
                r["sims"][hw.name]["speedup"] = speed
                row.append(f"{speed:.2f}" + ("" if s["fits"] else "*"))
            rows.append(row)
        devices = max(DEVICES, hw.devices or DEVICES)
        title = (f"Speedup on {devices} devices over 1 device, SIMULATED on '{hw.name}' "
                 f"({hw.description.split(':')[0]}); * = a device's memory plan exceeds "
                 f"{hw.memory_bytes / 1e9:.0f} GB; n/a = algorithm or plan not available")
        text = title + "\n" + common.table(["model", "batch", *algorithms], rows)
        tables.append(text)
        print(text + "\n")
    errors = sorted({f"{a}: {e['algorithms'][a]['error']}" for e in raw for a in algorithms
                     if not e["algorithms"][a]["ok"]})
    if errors:
        print("not available:\n  " + "\n  ".join(errors[:12]))
    common.write_json("speedup.json", {"devices": DEVICES, "profiles": [hw.to_dict() for hw in profiles],
                                       "results": raw, "tables": tables})
    png = common.plot_or_note(_plot, raw, profiles, models, algorithms)
    print(f"\n{time.perf_counter() - t0:.0f}s; raw numbers in {common.out_path('speedup.json')}"
          + (f", plot {png}" if png else ""))
    return 0


def _plot(raw, profiles, models, algorithms):
    plt = common.pyplot()
    fig, axes = plt.subplots(len(profiles), len(models), figsize=(4.2 * len(models), 3.4 * len(profiles)),
                             squeeze=False)
    for i, hw in enumerate(profiles):
        for j, model in enumerate(models):
            ax = axes[i][j]
            entries = [e for e in raw if e["model"] == model]
            for algo in algorithms:
                pts = [(e["batch"], e["algorithms"][algo]["sims"][hw.name].get("speedup"))
                       for e in entries if e["algorithms"][algo]["ok"]]
                pts = [(b, s) for b, s in pts if s is not None and math.isfinite(s)]
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=algo)
            ax.axhline(max(DEVICES, hw.devices or DEVICES), color="k", lw=0.6, ls="--")
            ax.set_xscale("log", base=2)
            ax.set_title(f"{model} on {hw.name} (simulated)", fontsize=9)
            ax.set_xlabel("batch")
            ax.set_ylabel("speedup over 1 device")
            ax.legend(fontsize=7)
    return common.save_figure(fig, "speedup.png")


if __name__ == "__main__":
    sys.exit(common.run_main(main))
