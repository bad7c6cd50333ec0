"""Search time of the zoo Transformers against depth and devices (issue 24, "Search at the
next scale"): GPT-2 small, BERT-base, LLaMA-7B and LLaMA-70B's shapes, each at several layer
counts, on 8, 64 and 1024 devices.

    python3 bench/transformer_search.py            # the table in docs/benchmarks.md (a few minutes)
    python3 bench/transformer_search.py --quick    # 2 and 8 layers, 8 and 64 devices (~1 minute)

Each row plans the model with `at.plan(sym, devices=...)` (algorithm "tofu"): `plan s` is the
wall time of that call (the training graph built and lowered in Python, then the search);
`search s` the core's `search_seconds` (strategies, coarsening, cost tables, the DP and
pricing of every cut), the best of that call and `--repeat` - 1 more searches of the same
lowered graph (the best is the run least disturbed by other work on a shared machine);
`cpu s` the least CPU time of those extra searches (time.process_time: what the search costs
when the machine is shared, where wall time also counts waiting for a core); `ms/layer` the
search's CPU time (its wall time with --repeat 1) per Transformer layer. Compare rows of one run only.

LLaMA-70B is the zoo's LLaMA with 70B's shapes (80 layers, d_model 8192, 64 heads, d_ff 28672;
the zoo keeps multi-head attention, 70B's grouped-query attention is not modelled) at seq 4096,
batch 8; LLaMA-7B is at seq 2048, GPT-2 small at 1024 and BERT-base at 512, batch 8.

Writes bench/out/transformer_search.json."""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import table, use_tree_package, write_json  # noqa: E402

use_tree_package()

#: label -> (zoo name, its depth, keyword sizes)
MODELS = {
    "gpt2-small": ("gpt2-small", 12, {"seq": 1024}),
    "bert-base": ("bert-base", 12, {"seq": 512}),
    "llama-7b": ("llama-7b", 32, {"seq": 2048}),
    "llama-70b": ("llama-7b", 80, {"d_model": 8192, "heads": 64, "d_ff": 28672, "seq": 4096}),
}


def one_row(label: str, layers: int, devices: int, repeat: int, batch: int = 8) -> dict:
    """Plans `label` with `layers` layers on `devices` devices; its times, groups and bytes."""
    import autotile as at
    from autotile import _core
    from autotile.planner import lowered_training_graph

    name, _, sizes = MODELS[label]
    sym = at.models.get(name, batch=batch, layers=layers, **sizes)
    t0 = time.perf_counter()
    plan = at.plan(sym, devices=devices)
    wall = time.perf_counter() - t0
    searches, cpu = [plan.search_seconds], []
    if repeat > 1:
        core = lowered_training_graph(sym)[3].core
        for _ in range(repeat - 1):
            c0 = time.process_time()
            again = _core.plan_graph(core, devices, "tofu")
            cpu.append(time.process_time() - c0)
            if abs(again["total_bytes"] - plan.comm_bytes) > 1e-9 * plan.comm_bytes:
                raise RuntimeError(f"{label} x{devices}: the search moved {again['total_bytes']} bytes, "
                                   f"at.plan {plan.comm_bytes}")
            searches.append(again["search_seconds"])
    return {"model": label, "layers": layers, "devices": devices, "search_seconds": min(searches),
            "search_runs": searches, "search_cpu_seconds": min(cpu) if cpu else None, "plan_seconds": wall,
            "groups": plan.num_groups, "bytes": plan.comm_bytes}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 and 8 layers on 8 and 64 devices")
    ap.add_argument("--repeat", type=int, default=3, help="searches per row; the table shows the best")
    args = ap.parse_args(argv)
    devices = (8, 64) if args.quick else (8, 64, 1024)
    rows, results = [], []
    for label, (_, depth, _) in MODELS.items():
        depths = (2, 8) if args.quick else sorted({2, 8, depth} | ({32} if depth > 32 else set()))
        for layers in depths:
            for k in devices:
                r = one_row(label, layers, k, args.repeat)
                results.append(r)
                cpu = "" if r["search_cpu_seconds"] is None else f"{r['search_cpu_seconds']:.2f}"
                rows.append([label, layers, k, r["groups"], f"{r['search_seconds']:.2f}", cpu, f"{r['plan_seconds']:.2f}",
                             f"{1e3 * (r['search_cpu_seconds'] or r['search_seconds']) / layers:.0f}", f"{r['bytes'] / 1e9:.4g}"])
                print(f"  {label} {layers} layers x{k}: search {r['search_seconds']:.2f} s", file=sys.stderr, flush=True)
    print(f"Search time of the zoo Transformers against layers and devices (batch 8; search: best of {args.repeat})")
    print(table(["model", "layers", "devices", "groups", "search s", "cpu s", "plan s", "ms/layer", "comm GB"], rows))
    path = write_json("transformer_search.json", {"rows": results})
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
