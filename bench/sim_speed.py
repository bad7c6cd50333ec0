"""How fast the step simulator (autotile.sim.simulate) runs: seconds per call on the execution
graphs of bench/time_vs_bytes.py's models (bytes plans, dgx-h100 profile).

    python3 bench/sim_speed.py              # the table
    python3 bench/sim_speed.py --quick      # 2-layer GPT-2 medium on 8 and 64 devices
    python3 bench/sim_speed.py --full       # and full-depth GPT-2 medium and LLaMA-7B on 64 devices

Each row plans the model (objective "bytes"), builds its ExecGraph, then calls simulate(eg,
"dgx-h100") 1 + --repeat times: "first" is the first call (it also turns the core's ops and
buffers into the dicts the simulator reads), "median" the median of the others (the graph's
dicts then exist). ops/s is exec ops per second at the median. The load average is recorded
with each row: the machine may be shared, and the figures are only comparable at like loads.

Writes bench/out/sim_speed.json."""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import table, use_tree_package, write_json  # noqa: E402

use_tree_package()

#: label -> (zoo name, batch, sizes)
GRAPHS = {
    "gpt2-medium (2L)": ("gpt2-medium", 64, {"seq": 1024, "layers": 2}),
    "llama-7b (2L)": ("llama-7b", 64, {"seq": 2048, "layers": 2}),
    "vgg16": ("vgg16", 256, {}),
    "wresnet-50-2": ("wresnet-50-2", 256, {}),
    "gpt2-medium": ("gpt2-medium", 64, {"seq": 1024}),
    "llama-7b": ("llama-7b", 64, {"seq": 2048}),
}
QUICK = [("gpt2-medium (2L)", 8), ("gpt2-medium (2L)", 64)]
DEFAULT = [("gpt2-medium (2L)", 8), ("gpt2-medium (2L)", 16), ("gpt2-medium (2L)", 64), ("llama-7b (2L)", 64),
           ("vgg16", 64), ("wresnet-50-2", 16)]
FULL = DEFAULT + [("gpt2-medium", 64), ("llama-7b", 64)]


def one_row(label: str, devices: int, profile: str, repeat: int) -> dict:
    """Times of simulate() on `label`'s bytes plan for `devices` devices."""
    import autotile as at
    from autotile.execgraph.graph import transform
    from autotile.sim import simulate

    name, batch, sizes = GRAPHS[label]
    sym = at.models.get(name, batch=batch, **sizes)
    eg = transform(sym, at.plan(sym, devices=devices))
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    first = simulate(eg, profile)
    first_s = time.perf_counter() - t0
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        again = simulate(eg, profile)
        runs.append(time.perf_counter() - t0)
        if again.op_end != first.op_end:  # the simulator is deterministic: a difference is a bug
            raise AssertionError(f"{label} x{devices}: two simulate() calls on one graph differ")
    median = statistics.median(runs)
    return {"model": label, "devices": devices, "profile": profile, "exec_ops": len(eg.ops),
            "first_seconds": first_s, "median_seconds": median, "runs": runs,
            "ops_per_second": len(eg.ops) / median, "step_seconds": first.step_seconds,
            "load_average": [load, os.getloadavg()[0]]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--quick", action="store_true", help="2-layer GPT-2 medium on 8 and 64 devices")
    group.add_argument("--full", action="store_true", help="also full-depth GPT-2 medium and LLaMA-7B, 64 devices")
    ap.add_argument("--profile", default="dgx-h100", help="hardware profile (default dgx-h100)")
    ap.add_argument("--repeat", type=int, default=3, help="timed calls after the first (default 3)")
    ap.add_argument("--out", default="sim_speed.json", help="file name under bench/out")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    rows, results = [], []
    for label, k in QUICK if args.quick else FULL if args.full else DEFAULT:
        r = one_row(label, k, args.profile, args.repeat)
        results.append(r)
        rows.append([label, k, r["exec_ops"], f"{r['first_seconds']:.3f}", f"{r['median_seconds']:.3f}",
                     f"{r['ops_per_second']:.0f}", f"{r['load_average'][0]:.1f}"])
        print(f"  {label} x{k}: {r['median_seconds']:.3f} s", file=sys.stderr, flush=True)
    print(table(["model", "devices", "exec ops", "first (s)", "median (s)", "ops/s", "load"], rows))
    path = write_json(args.out, {"profile": args.profile, "repeat": args.repeat, "python": sys.version.split()[0],
                                 "rows": results})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
