"""How close the recursive search is to the exact optimum of its cost model, and how much
faster it is (issue #14, "Exact optimum").

    python3 bench/optimality.py            # zoo models at 8 and 64 devices (a few minutes)
    python3 bench/optimality.py --quick    # two models at 8 devices (< 1 minute)

For every model and device count, every cut of tofu's recursive plan is also solved exactly
by the integer program (planner/ilp.py: HiGHS through scipy.optimize.milp) on the same cut
problem, i.e. with the same earlier cuts. The table shows tofu's cost over the ILP's per cut
(worst cut; 1.0000 = the DP found the exact optimum of every cut), the plan's total bytes,
tofu's search time and the ILP's solve time (summed over cuts), and their ratio.

The joint optimum over all cuts at once (one integer program over every tensor's whole
sequence of tilings) is not computed: its domains grow as (rank + 2)^cuts per tensor, which
an exact formulation of the zoo at 64 devices cannot hold; the per-cut optimum is the
comparison this bench can make exactly.

Writes bench/out/optimality.json."""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import table, use_tree_package, write_json  # noqa: E402

use_tree_package()

FULL = [("alexnet", 128), ("vgg16", 64), ("wresnet-50-4", 32), ("rnn-4-2k", 128), ("mlp", 256)]
QUICK = [("alexnet", 128), ("mlp", 256)]


def measure(model, batch, devices):
    from autotile import _core
    from autotile.planner import ilp, lowered_training_graph

    core = lowered_training_graph(model, batch=batch, replicate_fallback=True)[3].core
    plan = _core.plan_graph(core, devices, "tofu", None, True)
    log = []
    t0 = time.perf_counter()
    checks = _core._check_cuts_against_bruteforce(core, devices, replicate_fallback=True,
                                                  cut_solver=ilp.make_cut_solver(log=log))
    wall = time.perf_counter() - t0
    ilp_seconds = sum(s["seconds"] for s in log)
    worst = max((dp / exact if exact > 0 else (1.0 if dp == 0 else float("inf"))) for dp, exact in checks)
    return {"model": model, "batch": batch, "devices": devices, "cuts": len(checks),
            "worst_cut_ratio": worst, "total_bytes": plan["total_bytes"],
            "tofu_seconds": plan["search_seconds"], "ilp_seconds": ilp_seconds, "check_wall_seconds": wall,
            "ilp_columns_max": max(s["columns"] for s in log), "all_optimal": all(s["status"] == 0 for s in log)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="two models at 8 devices")
    args = ap.parse_args(argv)
    models = QUICK if args.quick else FULL
    device_counts = [8] if args.quick else [8, 64]
    rows = []
    for model, batch in models:
        for devices in device_counts:
            r = measure(model, batch, devices)
            rows.append(r)
            print(f"  {model} b{batch} on {devices}: tofu/ILP {r['worst_cut_ratio']:.4f}", file=sys.stderr)
    print(table(["model", "batch", "devices", "cuts", "tofu/ILP (worst cut)", "bytes/step", "tofu search",
                 "ILP solve", "ILP / tofu time", "ILP columns"],
                [[r["model"], r["batch"], r["devices"], r["cuts"], f"{r['worst_cut_ratio']:.4f}",
                  f"{r['total_bytes'] / 1e6:.1f} MB", f"{r['tofu_seconds'] * 1000:.0f} ms",
                  f"{r['ilp_seconds']:.2f} s", f"{r['ilp_seconds'] / max(r['tofu_seconds'], 1e-9):.0f}x",
                  r["ilp_columns_max"]] for r in rows]))
    write_json("optimality.json", {"rows": rows, "quick": args.quick})
    return 0


if __name__ == "__main__":
    sys.exit(main())
