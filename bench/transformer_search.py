"""Search time of the zoo Transformers against depth and devices (issue 24, "Search at the
next scale"): GPT-2 small, BERT-base, LLaMA-7B and LLaMA-70B's shapes, each at 8, 32 and 80
layers, on 64, 256 and 1024 devices.

    python3 bench/transformer_search.py            # the table in docs/benchmarks.md (several minutes)
    python3 bench/transformer_search.py --quick    # 2 and 8 layers, 8 and 64 devices (~1 minute)
    python3 bench/transformer_search.py --models llama-70b --layers 80 --devices 1024

Each row plans the model once with `at.plan(sym, devices=...)` (algorithm "tofu"): `plan s` is
the wall time of that call and `plan cpu` its CPU time (the training graph built and lowered in
Python, the search, the Plan object); then it searches the same lowered graph `--repeat` more
times: `search s` is the median of the core's `search_seconds` (strategies, coarsening, cost
tables, the DP and pricing of every cut, and the refinement across cuts), `cpu s` the median
CPU time of those searches (time.process_time: what the search costs when the machine is
shared, where wall time also counts waiting for a core; the search is single-threaded, so on
a quiet machine its wall time is about this), `ms/layer` that CPU time per Transformer layer.
Every repeated search must move the bytes at.plan's did. Compare rows of one run only.

LLaMA-70B is the zoo's LLaMA with 70B's shapes (d_model 8192, 64 heads, d_ff 28672; the zoo
keeps multi-head attention, 70B's grouped-query attention is not modelled) at seq 4096, batch
8; LLaMA-7B is at seq 2048, GPT-2 small at 1024 and BERT-base at 512, batch 8, all at the
layer counts of the table (the models' own depths are 12, 12, 32 and 80).

Writes bench/out/transformer_search.json."""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import table, use_tree_package, write_json  # noqa: E402

use_tree_package()

#: label -> (zoo name, keyword sizes)
MODELS = {
    "gpt2-small": ("gpt2-small", {"seq": 1024}),
    "bert-base": ("bert-base", {"seq": 512}),
    "llama-7b": ("llama-7b", {"seq": 2048}),
    "llama-70b": ("llama-7b", {"d_model": 8192, "heads": 64, "d_ff": 28672, "seq": 4096}),
}
LAYERS, DEVICES = (8, 32, 80), (64, 256, 1024)
QUICK_LAYERS, QUICK_DEVICES = (2, 8), (8, 64)


def one_row(label: str, layers: int, devices: int, repeat: int, batch: int = 8) -> dict:
    """Plans `label` with `layers` layers on `devices` devices; its times, groups and bytes."""
    import autotile as at
    from autotile import _core
    from autotile.planner import lowered_training_graph

    name, sizes = MODELS[label]
    sym = at.models.get(name, batch=batch, layers=layers, **sizes)
    t0, c0 = time.perf_counter(), time.process_time()
    plan = at.plan(sym, devices=devices)
    wall, plan_cpu = time.perf_counter() - t0, time.process_time() - c0
    core = lowered_training_graph(sym)[3].core
    searches, cpu = [], []
    for _ in range(repeat):
        c0 = time.process_time()
        again = _core.plan_graph(core, devices, "tofu")
        cpu.append(time.process_time() - c0)
        if abs(again["total_bytes"] - plan.comm_bytes) > 1e-9 * plan.comm_bytes:
            raise RuntimeError(f"{label} x{devices}: the search moved {again['total_bytes']} bytes, "
                               f"at.plan {plan.comm_bytes}")
        searches.append(again["search_seconds"])
    return {"model": label, "layers": layers, "devices": devices, "search_seconds": statistics.median(searches),
            "search_runs": searches, "search_cpu_seconds": statistics.median(cpu), "search_cpu_runs": cpu,
            "plan_seconds": wall, "plan_cpu_seconds": plan_cpu, "groups": plan.num_groups, "bytes": plan.comm_bytes}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 and 8 layers on 8 and 64 devices")
    ap.add_argument("--repeat", type=int, default=3, help="searches per row; the table shows their median")
    ap.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS), help="models to time")
    ap.add_argument("--layers", nargs="+", type=int, help="layer counts (default 8 32 80)")
    ap.add_argument("--devices", nargs="+", type=int, help="device counts (default 64 256 1024)")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    layer_counts = args.layers or (QUICK_LAYERS if args.quick else LAYERS)
    device_counts = args.devices or (QUICK_DEVICES if args.quick else DEVICES)
    rows, results = [], []
    for label in args.models:
        for layers in layer_counts:
            for k in device_counts:
                r = one_row(label, layers, k, args.repeat)
                results.append(r)
                rows.append([label, layers, k, r["groups"], f"{r['search_seconds']:.2f}", f"{r['search_cpu_seconds']:.2f}",
                             f"{r['plan_seconds']:.2f}", f"{r['plan_cpu_seconds']:.2f}",
                             f"{1e3 * r['search_cpu_seconds'] / layers:.0f}", f"{r['bytes'] / 1e9:.4g}"])
                print(f"  {label} {layers} layers x{k}: search {r['search_seconds']:.2f} s "
                      f"(cpu {r['search_cpu_seconds']:.2f} s), at.plan {r['plan_seconds']:.2f} s", file=sys.stderr,
                      flush=True)
    print(f"Search time of the zoo Transformers against layers and devices (batch 8; median of {args.repeat} searches)")
    print(table(["model", "layers", "devices", "groups", "search s", "cpu s", "plan s", "plan cpu", "ms/layer",
                 "comm GB"], rows))
    path = write_json("transformer_search.json", {"rows": results})
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
