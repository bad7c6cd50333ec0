"""Search time of the exact partition search (algorithm "tofu": recursive k-cuts, one-cut DP
by variable elimination), against Tofu Table 1, and its growth with depth and devices.

    autotile bench search            # full run (a few minutes on 2 cores)
    autotile bench search --quick    # < 1 minute

Prints three tables and writes bench/out/search_time.json and bench/out/search_time.png:

1. WResNet-152-10 (batch 8) and RNN-10-8K (batch 512) on 8 devices, next to the search times
   Tofu reports in Table 1 (8.3 s and 66.6 s; their machine, not this one);
2. time vs depth: wide ResNets of 50..1001 layers (the zoo's 50/101/152, deeper ones by
   repeating stage-3 bottleneck units) and MLPs of 50..1000 layers, on 8 devices;
3. time vs devices: both Table 1 models on 2..1024 devices.

Times are the core's `search_seconds` (graph validation, strategies, coarsening, cost
tables, DP and pricing of every cut; building the training graph in Python is not part of
it) over several runs of the same lowered graph: the headline shows the median and the
best, the sweeps the best (the least disturbed by other work on a shared machine)."""
from __future__ import annotations

import argparse
import os
import sys
import time

from .common import plot_or_note, pyplot, run_main, save_figure, table, write_json


#: Tofu Table 1: search time of their algorithm on 8 GPUs
TOFU_TABLE1 = {"wresnet-152-10": 8.3, "rnn-10-8k": 66.6}
HEADLINE = [("wresnet-152-10", 8), ("rnn-10-8k", 512)]


def lower_model(model, batch):
    """The core training graph at.plan() searches."""
    from autotile.planner import lowered_training_graph

    return lowered_training_graph(model, batch=batch, replicate_fallback=True)[3].core


def search(core, devices, repeat):
    """(best, median search_seconds, last plan dict) of `repeat` searches."""
    from autotile import _core

    times, plan = [], None
    for _ in range(repeat):
        plan = _core.plan_graph(core, devices, "tofu", None, True)
        times.append(plan["search_seconds"])
    times.sort()
    return times[0], times[len(times) // 2], plan


def deep_wresnet(depth, width, batch):
    """The zoo's wide ResNet at any depth 3k + 2 (the zoo names only 50, 101, 152)."""
    from autotile.models.wresnet import resnet_units, wresnet

    return wresnet(depth, width, batch, units=resnet_units(depth))


def headline(repeat):
    rows, out = [], []
    for model, batch in HEADLINE:
        core = lower_model(model, batch)
        best, sec, plan = search(core, 8, repeat)
        tofu = TOFU_TABLE1[model]
        rows.append([model, batch, core.num_nodes, plan["num_groups"], sec, best, tofu, tofu / sec,
                     plan["total_bytes"] / 1e9])
        out.append({"model": model, "batch": batch, "devices": 8, "nodes": core.num_nodes,
                    "groups": plan["num_groups"], "levels": plan["num_levels"], "search_seconds": sec,
                    "best_seconds": best, "tofu_table1_seconds": tofu, "comm_gb": plan["total_bytes"] / 1e9})
    print("Search time on 8 devices vs Tofu Table 1 (their machine and cost model; ours: this machine)")
    print(table(["model", "batch", "nodes", "groups", "median s", "best s", "Tofu s", "x faster", "comm GB"], rows))
    return out


def depth_sweep(resnet_depths, mlp_layers, repeat):
    import autotile as at

    series = {"wresnet-D-10 (batch 8)": [], "mlp-L-8192 (batch 512)": []}
    rows = []
    for depth in resnet_depths:
        core = lower_model(deep_wresnet(depth, 10, 8), 8)
        sec, _, _ = search(core, 8, repeat)
        series["wresnet-D-10 (batch 8)"].append({"layers": depth, "nodes": core.num_nodes, "search_seconds": sec})
        rows.append([f"wresnet-{depth}-10", depth, core.num_nodes, sec, 1e6 * sec / core.num_nodes])
    for layers in mlp_layers:
        core = lower_model(at.models.mlp(512, layers=layers, hidden=8192), 512)
        sec, _, _ = search(core, 8, repeat)
        series["mlp-L-8192 (batch 512)"].append({"layers": layers, "nodes": core.num_nodes, "search_seconds": sec})
        rows.append([f"mlp-{layers}-8192", layers, core.num_nodes, sec, 1e6 * sec / core.num_nodes])
    print("\nSearch time vs depth (8 devices, best of runs): linear means a flat last column")
    print(table(["model", "layers", "nodes", "search s", "us / node"], rows))
    return series


def device_sweep(devices, repeat):
    series, rows = {}, []
    for model, batch in HEADLINE:
        core = lower_model(model, batch)
        series[model] = []
        for k in devices:
            sec, _, plan = search(core, k, repeat)
            series[model].append({"devices": k, "search_seconds": sec, "comm_gb": plan["total_bytes"] / 1e9})
            rows.append([model, k, len(plan["factors"]), sec, plan["total_bytes"] / 1e9])
    print("\nSearch time vs devices (best of runs; one 2-way cut per doubling)")
    print(table(["model", "devices", "cuts", "search s", "comm GB"], rows))
    return series


def plot(result):
    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for name, pts in result["depth"].items():
        a.plot([p["layers"] for p in pts], [p["search_seconds"] for p in pts], "o-", label=name)
    a.set_xlabel("layers")
    a.set_ylabel("search time (s)")
    a.set_title("time vs depth, 8 devices")
    a.grid(alpha=0.3)
    a.legend()
    for model, pts in result["devices"].items():
        line, = b.plot([p["devices"] for p in pts], [p["search_seconds"] for p in pts], "o-", label=model)
        b.plot([8], [TOFU_TABLE1[model]], "x", ms=10, color=line.get_color(), label=f"Tofu Table 1: {model}")
    b.set_xscale("log", base=2)
    b.set_yscale("log")
    b.set_xlabel("devices")
    b.set_ylabel("search time (s)")
    b.set_title("time vs devices")
    b.grid(alpha=0.3, which="both")
    b.legend(fontsize=8)
    return save_figure(fig, "search_time.png")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="smaller sweeps, < 1 minute")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    if args.quick:
        repeat, depths, mlps, devices = 3, [50, 101, 152], [50, 200], [2, 4, 8, 16, 32, 64]
    else:
        repeat, depths, mlps = 5, [50, 101, 152, 302, 500, 1001], [50, 100, 200, 500, 1000]
        devices = [2 ** i for i in range(1, 11)]
    result = {"quick": args.quick, "headline": headline(repeat), "depth": depth_sweep(depths, mlps, repeat),
              "devices": device_sweep(devices, repeat)}
    result["bench_seconds"] = time.perf_counter() - t0
    png = plot_or_note(plot, result)
    print(f"\nwrote {write_json('search_time.json', result)}" + (f" and {png}" if png else "")
          + f" ({result['bench_seconds']:.0f} s)")


if __name__ == "__main__":
    sys.exit(run_main(main))
