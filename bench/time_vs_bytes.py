"""Where planning by step time beats planning by bytes: AlexNet, VGG-16, WResNet-50-2,
GPT-2 medium and LLaMA-7B on the dgx-a100 and dgx-h100 profiles at 8, 16 and 64 devices
(1, 2 and 8 nodes of 8; dgx-a100 past 8 devices is dgx-a100-multinode, the same nodes joined
by InfiniBand HDR).

    python3 bench/time_vs_bytes.py                # the table in docs/time-objective.md
    python3 bench/time_vs_bytes.py --quick        # AlexNet and a 2-layer GPT-2 medium, 8 and 16 devices
    python3 bench/time_vs_bytes.py --speed        # search time, LLaMA-70B shapes, 80 layers, 1024 devices
                                                  # (bytes; time; time as at.plan runs it)

Each row plans the model with ``at.plan(..., objective="time", hardware=PROFILE,
candidates=...)``, which searches by the time objective and then simulates (autotile.sim,
roofline cost table, the profile's links) the time plan and every candidate: the bytes plan
(objective="bytes"), data parallelism, one-weird-trick (CNNs), Megatron-style rules
(Transformers: heads and d_ff over a model axis inside a node, the batch across) and the other
baselines (hypar, spartan, equalchop, soybean). Columns: each plan's simulated step (ms), the
best of the other baselines, the plan returned (the fastest; ties go to the time plan), and
whether the time search's own plan is strictly faster than the bytes plan ("time won"). The
search seconds of both objectives are the core's own search_seconds.

Sizes: CNNs at batch 256 (32 per device at 8), Transformers at batch 64 (GPT-2 medium seq 1024,
LLaMA-7B seq 2048); `--layers N` cuts the Transformers to N layers where the full model does
not fit the time the machine has (the simulator is Python: its time grows with ops x devices),
and a row says how many layers it has. --speed plans LLaMA-70B's shapes (the zoo LLaMA at
d_model 8192, 64 heads, d_ff 28672, seq 4096, batch 8; bench/transformer_search.py) with the
core alone under both objectives on dgx-h100.

Writes bench/out/time_vs_bytes.json."""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import table, use_tree_package, write_json  # noqa: E402

use_tree_package()

#: label -> (zoo name, batch, sizes, kind)
MODELS = {
    "alexnet": ("alexnet", 256, {}, "cnn"),
    "vgg16": ("vgg16", 256, {}, "cnn"),
    "wresnet-50": ("wresnet-50-2", 256, {}, "cnn"),
    "gpt2-medium": ("gpt2-medium", 64, {"seq": 1024}, "transformer"),
    "llama-7b": ("llama-7b", 64, {"seq": 2048}, "transformer"),
}
PROFILES = {"dgx-a100": {8: "dgx-a100", 16: "dgx-a100-multinode", 64: "dgx-a100-multinode"},
            "dgx-h100": {8: "dgx-h100", 16: "dgx-h100", 64: "dgx-h100"}}
DEVICES = (8, 16, 64)
OTHER = ("hypar", "spartan", "equalchop", "soybean")


def one_row(label: str, profile: str, devices: int, layers=None) -> dict:
    """The time plan and its candidates for one model, profile and device count."""
    import autotile as at

    name, batch, sizes, kind = MODELS[label]
    if layers is not None and kind == "transformer":
        sizes = dict(sizes, layers=layers)
    sym = at.models.get(name, batch=batch, **sizes)
    hw = PROFILES[profile][devices]
    own = ["bytes", "data", "owt" if kind == "cnn" else "megatron"]
    t0 = time.perf_counter()
    plan = at.plan(sym, devices=devices, objective="time", hardware=hw, candidates=own + list(OTHER))
    wall = time.perf_counter() - t0
    steps = plan.candidates
    others = {k: v for k, v in steps.items() if k in OTHER and v is not None}
    best_other = min(others, key=others.get) if others else None
    baselines = [v for k, v in steps.items() if k not in ("time", "bytes") and v is not None]
    return {"model": label, "layers": layers if kind == "transformer" else None, "profile": profile,
            "hardware": hw, "devices": devices, "batch": batch, "steps": steps, "skipped": plan.skipped,
            "best_other": best_other, "chosen": plan.chosen,
            "time_won": steps["bytes"] is not None and steps["time"] < steps["bytes"] * (1 - 1e-9),
            "time_search_ok": all(steps["time"] <= v * (1 + 1e-9) for v in baselines + [steps["bytes"] or 1e30]),
            "returned_never_worse": all(steps[plan.chosen] <= v * (1 + 1e-9) for v in steps.values() if v is not None),
            "search_seconds": plan.candidate_search_seconds, "model_seconds": plan.model_seconds,
            "cut_levels": plan.cut_levels, "wall_seconds": wall}


def speed(repeat: int = 3) -> dict:
    """Core search seconds of LLaMA-70B's shapes on 1024 devices, bytes and time objectives."""
    import statistics

    import autotile as at
    from autotile import _core
    from autotile.planner import lowered_training_graph
    from autotile.planner.time_objective import time_model
    from autotile.sim import load_profile

    sym = at.models.get("llama-7b", batch=8, layers=80, d_model=8192, heads=64, d_ff=28672, seq=4096)
    lowered = lowered_training_graph(sym)[3]
    tm = time_model(load_profile("dgx-h100"), lowered, _core.factorize(1024))
    out = {}
    for objective, kw in (("bytes", {}), ("time", {"time_model": tm})):
        runs, cpu = [], []
        for _ in range(repeat):
            c0 = time.process_time()
            runs.append(_core.plan_graph(lowered.core, 1024, "tofu", **kw)["search_seconds"])
            cpu.append(time.process_time() - c0)
        out[objective] = {"search_seconds": statistics.median(runs), "runs": runs,
                          "cpu_seconds": statistics.median(cpu)}
        print(f"  llama-70b shapes x1024, {objective}: search {out[objective]['search_seconds']:.2f} s "
              f"(cpu {out[objective]['cpu_seconds']:.2f} s)", file=sys.stderr, flush=True)
    # what at.plan(objective="time") runs: the time search, and its refinement from the bytes plan
    # where the graph is small enough (time_objective.BYTES_START_LIMIT)
    from autotile.planner.time_objective import start_from_bytes

    runs, cpu = [], []
    for _ in range(repeat):
        c0 = time.process_time()
        raw = _core.plan_graph(lowered.core, 1024, "tofu", time_model=tm)
        both = start_from_bytes(lowered.core, 1024, raw, tm)
        runs.append(both["search_seconds"])
        cpu.append(time.process_time() - c0)
    out["time, as at.plan runs it"] = {"search_seconds": statistics.median(runs), "runs": runs,
                                       "cpu_seconds": statistics.median(cpu), "start": both["start"]}
    print(f"  llama-70b shapes x1024, time as at.plan runs it ({both['start']}): search "
          f"{statistics.median(runs):.2f} s (cpu {statistics.median(cpu):.2f} s)", file=sys.stderr, flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="AlexNet and a 2-layer GPT-2 medium on 8 and 16 devices")
    ap.add_argument("--models", nargs="+", choices=list(MODELS), help="models (default: all)")
    ap.add_argument("--profiles", nargs="+", choices=list(PROFILES), default=list(PROFILES))
    ap.add_argument("--devices", nargs="+", type=int, choices=DEVICES, help="device counts (default 8 16 64)")
    ap.add_argument("--layers", type=int, help="Transformer layers (default: the model's own)")
    ap.add_argument("--speed", action="store_true", help="only the LLaMA-70B search-time comparison")
    ap.add_argument("--out", default="time_vs_bytes.json", help="file name under bench/out")
    args = ap.parse_args(argv)
    if args.speed:
        path = write_json("time_vs_bytes_speed.json", speed())
        print(f"wrote {path}")
        return 0
    models = args.models or (["alexnet", "gpt2-medium"] if args.quick else list(MODELS))
    devices = args.devices or ((8, 16) if args.quick else DEVICES)
    layers = args.layers if args.layers is not None else (2 if args.quick else None)
    rows, results = [], []

    def ms(v):
        return "n/a" if v is None else f"{v * 1e3:.2f}"

    for label in models:
        for profile in args.profiles:
            for k in devices:
                r = one_row(label, profile, k, layers)
                results.append(r)
                s = r["steps"]
                baseline = s.get("owt", s.get("megatron"))
                rows.append([label + (f" ({r['layers']}L)" if r["layers"] else ""), profile, k, ms(s["time"]),
                             ms(s["bytes"]), ms(s["data"]), ms(baseline),
                             f"{r['best_other']} {ms(s[r['best_other']])}" if r["best_other"] else "n/a",
                             r["chosen"], "yes" if r["time_won"] else "no",
                             f"{r['search_seconds']['time']:.2f}", f"{r['search_seconds'].get('bytes', float('nan')):.2f}"])
                write_json(args.out, {"rows": results})  # what is done so far, should the run be cut short
                print(f"  {label} {profile} x{k}: time {ms(s['time'])} ms, bytes {ms(s['bytes'])} ms, chose "
                      f"{r['chosen']} ({r['wall_seconds']:.0f} s)", file=sys.stderr, flush=True)
    print("Simulated step (ms) of each plan; returned = the fastest; time won = the time search's own plan "
          "beats the bytes plan")
    print(table(["model", "profile", "devices", "time", "bytes", "data", "owt/megatron", "best other", "returned",
                 "time won", "search s (time)", "search s (bytes)"], rows))
    path = write_json(args.out, {"rows": results})
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
