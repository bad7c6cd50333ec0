"""Partition algorithms compared on big models (Tofu Fig. 10): RNN-4-8K (batch 512) and
WResNet-152-10 (batch 8) on 8 devices; SIMULATED step time split into compute and
communication overhead, and each device's memory under the plan's static memory plan
(which algorithms exceed a 12 GB K80). Profile p2.8xlarge by default.

    autotile bench algorithms [--quick] [--profile p2.8xlarge]
"""
from __future__ import annotations

import os
import sys
import time

from . import common

DEVICES = 8
#: Tofu Fig. 10 compares AllRow-Greedy, Spartan, EqualChop, ICML18 and Tofu; we add the rest
ALGORITHMS = ("tofu", "soybean", "data", "model", "owt", "hypar", "spartan", "allrow", "equalchop", "icml18")


def main(argv=None) -> int:
    args = common.arg_parser(__doc__.split("\n")[0]).parse_args(argv)
    import autotile as at
    from autotile.sim import load_profile

    profiles = [load_profile(p) for p in (args.profile or ["p2.8xlarge"])]
    models = [("rnn-2-1k", 128), ("wresnet-50-2", 4)] if args.quick else [("rnn-4-8k", 512), ("wresnet-152-10", 8)]
    t0 = time.perf_counter()
    raw = []
    for name, batch in models:
        try:
            sym = at.models.get(name, batch=batch)
        except at.Error as e:
            raw.extend({"model": name, "batch": batch, "algorithm": a, "ok": False, "error": common.error_text(e)}
                       for a in ALGORITHMS)
            continue
        for algo in ALGORITHMS:
            r = common.simulate_config(sym, DEVICES, algo, profiles)
            if not r["ok"] and r.get("fallback"):
                # data parallelism cannot split every op on the batch (the RNN's Concat of
                # its timesteps, BatchNorm's batch statistics): those ops run replicated
                r = dict(common.simulate_config(sym, DEVICES, algo, profiles, replicate_fallback=True),
                         note=r["error"].split(":")[0].replace("node ", "") + " etc. replicated")
            raw.append({"model": name, "batch": batch, "algorithm": algo, **r})
            print(f"  {name} {algo}: {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    tables = []
    for hw in profiles:
        rows = []
        for r in raw:
            if not r["ok"]:
                rows.append((r["model"], r["batch"], r["algorithm"], "n/a", "n/a", "n/a", "n/a", "n/a", "n/a",
                             r["error"][:60]))
                continue
            s = r["sims"][hw.name]
            overhead = s["step_seconds"] - s["compute_seconds"]
            rows.append((r["model"], r["batch"], r["algorithm"], s["step_seconds"], s["compute_seconds"], overhead,
                         f"{100 * overhead / s['step_seconds']:.0f}%", r["comm_bytes"] / 1e9,
                         s["peak_memory"] / 1e9, ("yes" if s["fits"] else "NO") +
                         (f"; {r['note']}" if r.get("note") else "")))
        text = (f"Algorithms on {DEVICES} devices, SIMULATED on '{hw.name}' (Tofu Fig. 10); comm = step - compute "
                f"of the busiest device; memory = largest device arena, fits = within "
                f"{hw.memory_bytes / 1e9:.0f} GB\n" +
                common.table(("model", "batch", "algorithm", "step s", "compute s", "comm s", "comm %", "comm GB",
                              "memory GB", "fits/note"), rows))
        tables.append(text)
        print(text + "\n")
    common.write_json("algorithms.json", {"devices": DEVICES, "profiles": [hw.to_dict() for hw in profiles],
                                          "results": raw, "tables": tables})
    png = common.plot_or_note(_plot, raw, profiles[0], [m for m, _ in models])
    print(f"{time.perf_counter() - t0:.0f}s; raw numbers in {common.out_path('algorithms.json')}"
          + (f", plot {png}" if png else ""))
    return 0


def _plot(raw, hw, models):
    plt = common.pyplot()
    fig, axes = plt.subplots(1, len(models), figsize=(5.5 * len(models), 3.6), squeeze=False)
    for ax, model in zip(axes[0], models):
        rs = [r for r in raw if r["model"] == model and r["ok"]]
        xs = range(len(rs))
        comp = [r["sims"][hw.name]["compute_seconds"] for r in rs]
        step = [r["sims"][hw.name]["step_seconds"] for r in rs]
        ax.bar(xs, comp, color="C0", alpha=0.5, label="compute")
        ax.bar(xs, [s - c for s, c in zip(step, comp)], bottom=comp, color="C3", hatch="//", alpha=0.6,
               label="communication")
        for x, r, s in zip(xs, rs, step):
            if not r["sims"][hw.name]["fits"]:
                ax.text(x, s, "OOM", ha="center", va="bottom", fontsize=7)
        ax.set_xticks(list(xs))
        ax.set_xticklabels([r["algorithm"] for r in rs], rotation=45, fontsize=7)
        ax.set_ylabel("step seconds")
        ax.set_title(f"{model} on {DEVICES} x {hw.name} (simulated)", fontsize=9)
        ax.legend(fontsize=7)
    return common.save_figure(fig, "algorithms.png")


if __name__ == "__main__":
    sys.exit(common.run_main(main))
