"""The 4-layer MLP of Soybean Fig. 8: hidden 8192 (and 12288) at batch 512 and 2048 on 1..8
devices; simulated step time and its communication overhead (step time minus compute time
of the busiest device) per algorithm, SIMULATED on p2.8xlarge by default.

    autotile bench mlp [--quick] [--profile p2.8xlarge]
"""
from __future__ import annotations

import os
import sys
import time

from . import common

ALGORITHMS = ("tofu", "soybean", "data", "model", "owt", "hypar", "spartan")


def main(argv=None) -> int:
    args = common.arg_parser(__doc__.split("\n")[0]).parse_args(argv)
    from autotile.models import mlp
    from autotile.sim import load_profile

    profiles = [load_profile(p) for p in (args.profile or ["p2.8xlarge"])]
    if args.quick:
        configs, device_counts = [(2048, 512)], [1, 2, 8]
    else:
        configs, device_counts = [(8192, 512), (8192, 2048), (12288, 512), (12288, 2048)], [1, 2, 4, 8]
    t0 = time.perf_counter()
    raw = []
    for hidden, batch in configs:
        sym = mlp(batch, layers=4, hidden=hidden)
        for k in device_counts:
            for algo in (ALGORITHMS if k > 1 else ("data",)):
                r = common.simulate_config(sym, k, algo, profiles)
                raw.append({"hidden": hidden, "batch": batch, "devices": k, "algorithm": algo, **r})
        print(f"  mlp hidden {hidden} batch {batch}: {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    tables = []
    for hw in profiles:
        rows = []
        for r in raw:
            if not r["ok"]:
                rows.append((r["hidden"], r["batch"], r["devices"], r["algorithm"], "n/a", "n/a", "n/a", "n/a",
                             r["error"][:50]))
                continue
            s = r["sims"][hw.name]
            overhead = s["step_seconds"] - s["compute_seconds"]
            rows.append((r["hidden"], r["batch"], r["devices"], r["algorithm"], s["step_seconds"] * 1e3,
                         s["compute_seconds"] * 1e3, overhead * 1e3, r["comm_bytes"] / 1e6,
                         "" if s["fits"] else "exceeds memory"))
        text = (f"4-layer MLP step, SIMULATED on '{hw.name}' (Soybean Fig. 8); comm overhead = step - "
                f"compute of the busiest device\n" +
                common.table(("hidden", "batch", "devices", "algorithm", "step ms", "compute ms", "comm overhead ms",
                              "comm MB", "note"), rows))
        tables.append(text)
        print(text + "\n")
    common.write_json("mlp.json", {"profiles": [hw.to_dict() for hw in profiles], "results": raw,
                                   "tables": tables})
    png = common.plot_or_note(_plot, raw, profiles[0], configs, device_counts)
    print(f"{time.perf_counter() - t0:.0f}s; raw numbers in {common.out_path('mlp.json')}"
          + (f", plot {png}" if png else ""))
    return 0


def _plot(raw, hw, configs, device_counts):
    plt = common.pyplot()
    fig, axes = plt.subplots(1, len(configs), figsize=(4.5 * len(configs), 3.6), squeeze=False)
    for ax, (hidden, batch) in zip(axes[0], configs):
        algos = [a for a in ALGORITHMS if any(r["ok"] and r["algorithm"] == a and r["hidden"] == hidden
                                              and r["batch"] == batch for r in raw)]
        width = 0.8 / max(len(algos), 1)
        for i, algo in enumerate(algos):
            for j, k in enumerate(device_counts):
                pick = [r for r in raw if r["hidden"] == hidden and r["batch"] == batch and r["devices"] == k
                        and r["ok"] and r["algorithm"] == (algo if k > 1 else "data")]
                if not pick:
                    continue
                s = pick[0]["sims"][hw.name]
                x = j + (i - len(algos) / 2) * width
                ax.bar(x, s["compute_seconds"] * 1e3, width, color=f"C{i}", alpha=0.5)
                ax.bar(x, (s["step_seconds"] - s["compute_seconds"]) * 1e3, width,
                       bottom=s["compute_seconds"] * 1e3, color=f"C{i}", hatch="//",
                       label=algo if j == len(device_counts) - 1 else None)
        ax.set_xticks(range(len(device_counts)))
        ax.set_xticklabels([str(k) for k in device_counts])
        ax.set_xlabel("devices")
        ax.set_ylabel("step ms (hatched: comm overhead)")
        ax.set_title(f"MLP {hidden}x{hidden}, batch {batch} ({hw.name}, simulated)", fontsize=9)
        ax.legend(fontsize=7)
    return common.save_figure(fig, "mlp.png")


if __name__ == "__main__":
    sys.exit(common.run_main(main))
