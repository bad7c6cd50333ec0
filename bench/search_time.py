"""Search time of the exact partition search (algorithm "tofu": recursive k-cuts, one-cut DP
by variable elimination), against Tofu Table 1, and its growth with depth and devices.

    python3 bench/search_time.py            # full run (a few minutes on 2 cores)
    python3 bench/search_time.py --quick    # < 1 minute

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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import pyplot, save_figure, table, use_tree_package, write_json  # noqa: E402

use_tree_package()

#: Tofu Table 1: search time of their algorithm on 8 GPUs
TOFU_TABLE1 = {"wresnet-152-10": 8.3, "rnn-10-8k": 66.6}
HEADLINE = [("wresnet-152-10", 8), ("rnn-10-8k", 512)]


def lower_model(model, batch):
    """The core training graph at.plan() searches (same steps as autotile.planner.plan)."""
    from autotile.autodiff import training_graph
    from autotile.model_input import as_symbol
    from autotile.planner import data_shapes, with_head_grads
    from autotile.planner.lower import lower

    sym = as_symbol(model, batch=batch)
    tg = training_graph(sym, optimizer="sgd")
    shapes = with_head_grads(tg, data_shapes(sym, None, batch, tg.data_names,
                                             override_batch=not isinstance(model, str)))
    return lower(tg.symbol, shapes, tg.param_names, tg.backward_of, tg.update_nodes,
                 {g: f for f, g in tg.gradient_entry.items()}, replicate_fallback=True).core


def search(core, devices, repeat):
    """(best, median search_seconds, last plan dict) of `repeat` searches."""
    from autotile import _core

    times, plan = [], None
    for _ in range(repeat):
        plan = _core.plan_graph(core, devices, "tofu", None, True)
        times.append(plan["search_seconds"])
    times.sort()
    return times[0], times[len(times) // 2], plan


def deep_wresnet(units, width, batch, classes=1000, image=224):
    """The zoo's wide ResNet (models/wresnet.py) with `units` bottleneck units per stage, so
    depth = 3 * sum(units) + 2 is free (the zoo takes 50, 101, 152)."""
    from autotile.models._layers import conv, data_input, op, softmax_head
    from autotile.models.wresnet import _BN, RESNET_FILTERS, bottleneck

    filters = [f * width for f in RESNET_FILTERS]
    x = data_input((batch, 3, image, image))
    x = op("BatchNorm", x, fix_gamma=True, name="bn_data", **_BN)
    x = conv(x, "conv0", filters[0], (7, 7), stride=(2, 2), pad=(3, 3), no_bias=True)
    x = op("BatchNorm", x, fix_gamma=False, name="bn0", **_BN)
    x = op("Activation", x, act_type="relu", name="relu0")
    x = op("Pooling", x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max", name="pool0")
    for stage, n in enumerate(units):
        x = bottleneck(x, filters[stage + 1], 1 if stage == 0 else 2, False, f"stage{stage + 1}_unit1")
        for unit in range(2, n + 1):
            x = bottleneck(x, filters[stage + 1], 1, True, f"stage{stage + 1}_unit{unit}")
    x = op("BatchNorm", x, fix_gamma=False, name="bn1", **_BN)
    x = op("Activation", x, act_type="relu", name="relu1")
    x = op("Pooling", x, kernel=(7, 7), global_pool=True, pool_type="avg", name="pool1")
    x = op("Flatten", x, name="flatten")
    x = op("FullyConnected", x, num_hidden=classes, name="fc1")
    return softmax_head(x, (batch,))


def resnet_units(depth):
    """Units per stage for a ResNet of `depth` layers: the zoo's for 50/101/152, else stage 3
    grows (stages 1, 2, 4 as in ResNet-152)."""
    zoo = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}
    if depth in zoo:
        return zoo[depth]
    units = (depth - 2) // 3
    return (3, 8, units - 14, 3)


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
        core = lower_model(deep_wresnet(resnet_units(depth), 10, 8), 8)
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
    print(f"\nwrote {write_json('search_time.json', result)} and {plot(result)} "
          f"({result['bench_seconds']:.0f} s)")


if __name__ == "__main__":
    main()
