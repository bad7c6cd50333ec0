"""How close the recursive search is to the exact optimum of its cost model, and how much
faster it is (issue #14, "Exact optimum").

    python3 bench/optimality.py            # zoo models at 8 and 64 devices (a few minutes)
    python3 bench/optimality.py --quick    # two models at 8 devices (< 1 minute)
    python3 bench/optimality.py --joint-seconds 600   # more time for the joint program

For every model and device count, every cut of tofu's recursive plan is also solved exactly
by the integer program (planner/ilp.py: HiGHS through scipy.optimize.milp) on the same cut
problem, i.e. with the same earlier cuts. The table shows tofu's cost over the ILP's per cut
(worst cut; 1.0000 = the DP found the exact optimum of every cut), the plan's total bytes,
tofu's search time and the ILP's solve time (summed over cuts), and their ratio.

The joint column solves all cuts at once (planner/ilp_joint.py: every tensor's whole sequence
of tilings and every op's sequence of strategies, the recursion's own cost model and ties):
tofu's total over the joint optimum (1.0000 = the recursion found the true k-cut optimum; the
goal is within 1%), with its solve time. Its domains grow as (rank + 2)^cuts per tensor, so it
is built only up to 4096 sequences per tensor or op and 2^24 edge-cost entries, and solved
within --joint-seconds; a time-limited answer is shown as tofu over HiGHS's lower bound with
"<=" (the true ratio is at most that), a program too large to build as "too large". Rows at
4 devices are added for the models small enough to show the joint comparison on more than one
cut.

    python3 bench/optimality.py --refine  # tofu's refinement against the joint optimum only

The --refine table (issue 24) puts the recursion's plan (``refine=False``: each cut exact given
the earlier ones) and tofu's plan (the recursion refined across its cuts,
csrc/search/cut_refine.h) beside the joint optimum, on the zoo MLP, AlexNet and VGG-16 at 4
devices and tiny GPT-2, BERT and LLaMA configurations (1 layer, d_model 64, 4 heads, seq 16,
batch 8, vocab 256) at 4 and 8 devices, with both search times (median of 3) and the joint
program's solve time; "no solution" when HiGHS found none within --joint-seconds.

    python3 bench/optimality.py --refine-time  # what the refinement costs in search time

The --refine-time table plans larger zoo models and the tiny Transformers at 8 devices with
``refine=False`` and ``True`` alternating in one process (median of --repeat runs each): the
search time of both and the refined plan's bytes over the recursion's.

Writes bench/out/optimality.json (bench/out/optimality_refine.json with --refine,
bench/out/optimality_refine_time.json with --refine-time)."""
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
#: (model, batch) also measured at 4 devices (two cuts), where the joint program is small
JOINT_4 = [("alexnet", 128), ("vgg16", 64), ("mlp", 256)]
#: the tiny Transformers of the --refine table (issue 24's configurations)
TINY = {"layers": 1, "d_model": 64, "heads": 4, "seq": 16, "vocab": 256}
REFINE = ([(m, {}, b, 4) for m, b in (("mlp", 256), ("alexnet", 128), ("vgg16", 64))]
          + [(m, kw, 8, d) for m, kw in (("gpt2", {**TINY, "positions": 16}), ("bert", {**TINY, "positions": 16}),
                                         ("llama", {**TINY, "d_ff": 128})) for d in (4, 8)])


#: (label, model, sizes, batch, devices) of the --refine-time table
REFINE_TIME = ([("llama-7b (8, seq 2048)", "llama-7b", {"seq": 2048}, 8, 64),
                ("wresnet-152-10 (8)", "wresnet-152-10", {}, 8, 8), ("wresnet-152-10 (8)", "wresnet-152-10", {}, 8, 64),
                ("gpt2-small (8, seq 1024)", "gpt2-small", {"seq": 1024}, 8, 64),
                ("rnn-10-8k (512)", "rnn-10-8k", {}, 512, 8), ("vgg16 (64)", "vgg16", {}, 64, 64),
                ("alexnet (128)", "alexnet", {}, 128, 8), ("mlp (256)", "mlp", {}, 256, 64)]
               + [(f"{m}-tiny (8)", m, {**TINY, **kw}, 8, 8) for m, kw in (("gpt2", {"positions": 16}),
                                                                            ("bert", {"positions": 16}),
                                                                            ("llama", {"d_ff": 128}))])


def refine_time_row(label, model, sizes, batch, devices, repeat):
    """Search time with and without the refinement (alternating, median of `repeat`) and bytes."""
    import statistics

    from autotile import _core, models
    from autotile.planner import lowered_training_graph

    graph = models.get(model, batch=batch, **sizes) if sizes else model
    core = lowered_training_graph(graph, batch=None if sizes else batch, replicate_fallback=True)[3].core
    runs = {False: [], True: []}
    for _ in range(repeat):
        for refine in (False, True):
            runs[refine].append(_core.plan_graph(core, devices, "tofu", None, True, refine=refine))
    plain, refined = (statistics.median(p["search_seconds"] for p in runs[r]) for r in (False, True))
    return {"model": label, "devices": devices, "recursion_seconds": plain, "refined_seconds": refined,
            "recursion_bytes": runs[False][0]["total_bytes"], "refined_bytes": runs[True][0]["total_bytes"]}


def joint_column(core, devices, tofu_bytes, seconds):
    """tofu / joint optimum (or / lower bound), the joint solve time, and whether it was proven."""
    from autotile.errors import Error
    from autotile.planner.ilp_joint import joint_optimum

    try:
        j = joint_optimum(core, devices, replicate_fallback=True, time_limit=seconds)
    except Error as e:
        if "too large a graph for the joint program" in str(e):
            return {"joint_ratio": None, "joint_seconds": None, "joint_optimal": False, "joint_note": "too large"}
        raise
    bound = j["total_bytes"] if j["optimal"] else j["lower_bound"]
    ratio = tofu_bytes / bound if bound > 0 else (1.0 if tofu_bytes == 0 else float("inf"))
    return {"joint_ratio": ratio, "joint_seconds": j["seconds"], "joint_optimal": j["optimal"],
            "joint_bytes": j["total_bytes"], "joint_lower_bound": j["lower_bound"], "joint_columns": j["columns"],
            "joint_note": "" if j["optimal"] else f"gap {j['gap']:.1%}"}


def refine_row(model, sizes, batch, devices, joint_seconds):
    """The recursion's plan, tofu's refined plan and the joint optimum of one graph."""
    from autotile import _core, models
    from autotile.errors import Error
    from autotile.planner import lowered_training_graph
    from autotile.planner.ilp_joint import joint_optimum

    # a built Symbol keeps its own input shapes (batch= would also give its rotary tables a batch dim)
    graph = models.get(model, batch=batch, **sizes) if sizes else model
    core = lowered_training_graph(graph, batch=None if sizes else batch, replicate_fallback=True)[3].core
    runs = {}
    for name, refine in (("recursion", False), ("tofu", True)):
        plans = sorted((_core.plan_graph(core, devices, "tofu", None, True, refine=refine) for _ in range(3)),
                       key=lambda p: p["search_seconds"])
        runs[name] = plans[1]
    row = {"model": model + ("-tiny" if sizes else ""), "batch": batch, "devices": devices,
           "cuts": len(runs["tofu"]["factors"]), "recursion_bytes": runs["recursion"]["total_bytes"],
           "tofu_bytes": runs["tofu"]["total_bytes"], "recursion_seconds": runs["recursion"]["search_seconds"],
           "tofu_seconds": runs["tofu"]["search_seconds"], "joint_bytes": None, "joint_optimal": False,
           "joint_seconds": None, "joint_note": ""}
    try:
        j = joint_optimum(core, devices, replicate_fallback=True, time_limit=joint_seconds)
    except Error as e:
        if "too large a graph for the joint program" in str(e):
            row["joint_note"] = "too large"
        elif "has no solution" in str(e):
            row["joint_note"] = f"no solution in {joint_seconds:.0f} s"
        else:
            raise
        return row
    bound = j["total_bytes"] if j["optimal"] else j["lower_bound"]
    row.update(joint_bytes=j["total_bytes"], joint_bound=bound, joint_optimal=j["optimal"],
               joint_seconds=j["seconds"], joint_note="" if j["optimal"] else f"gap {j['gap']:.1%}")
    return row


def refine_table(rows):
    """The --refine table's text."""
    def ratio(r, key):
        if r["joint_bytes"] is None:
            return r["joint_note"]
        if not r["joint_optimal"] and r["joint_bound"] < 0.5 * r["joint_bytes"]:
            return "bound too weak"  # HiGHS's dual bound under half its best plan: no ratio worth showing
        return ("" if r["joint_optimal"] else "<= ") + f"{r[key] / r['joint_bound']:.4f}"

    return table(["model", "batch", "devices", "cuts", "recursion", "tofu", "joint optimum", "recursion/joint",
                  "tofu/joint", "recursion search", "tofu search", "joint solve"],
                 [[r["model"], r["batch"], r["devices"], r["cuts"], f"{r['recursion_bytes'] / 1e6:.4f} MB",
                   f"{r['tofu_bytes'] / 1e6:.4f} MB",
                   "-" if r["joint_bytes"] is None else f"{r['joint_bytes'] / 1e6:.4f} MB"
                   + ("" if r["joint_optimal"] else " (" + r["joint_note"] + ")"),
                   ratio(r, "recursion_bytes"), ratio(r, "tofu_bytes"), f"{r['recursion_seconds'] * 1000:.0f} ms",
                   f"{r['tofu_seconds'] * 1000:.0f} ms",
                   "-" if r["joint_seconds"] is None else f"{r['joint_seconds']:.1f} s"] for r in rows])


def measure(model, batch, devices, joint_seconds=120.0):
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
    row = {"model": model, "batch": batch, "devices": devices, "cuts": len(checks),
           "worst_cut_ratio": worst, "total_bytes": plan["total_bytes"],
           "tofu_seconds": plan["search_seconds"], "ilp_seconds": ilp_seconds, "check_wall_seconds": wall,
           "ilp_columns_max": max(s["columns"] for s in log), "all_optimal": all(s["status"] == 0 for s in log)}
    row.update(joint_column(core, devices, plan["total_bytes"], joint_seconds))
    return row


def joint_text(r):
    if r["joint_ratio"] is None:
        return r["joint_note"]
    return ("" if r["joint_optimal"] else "<= ") + f"{r['joint_ratio']:.4f}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="two models at 8 devices")
    ap.add_argument("--joint-seconds", type=float, default=120.0, help="time limit of the joint program")
    ap.add_argument("--refine", action="store_true", help="only the table of tofu's refinement vs the joint optimum")
    ap.add_argument("--refine-time", action="store_true", help="only the refinement's search-time table")
    ap.add_argument("--repeat", type=int, default=5, help="runs of each search in --refine-time")
    args = ap.parse_args(argv)
    if args.refine_time:
        rows = []
        for label, model, sizes, batch, devices in REFINE_TIME:
            rows.append(refine_time_row(label, model, sizes, batch, devices, args.repeat))
            print(f"  {label} x{devices} done", file=sys.stderr)
        print(table(["model (batch)", "devices", "recursion", "refined", "ratio", "bytes refined / recursion"],
                    [[r["model"], r["devices"], f"{r['recursion_seconds'] * 1000:.0f} ms",
                      f"{r['refined_seconds'] * 1000:.0f} ms",
                      f"{r['refined_seconds'] / max(r['recursion_seconds'], 1e-9):.2f}x",
                      f"{r['refined_bytes'] / r['recursion_bytes']:.4f}"] for r in rows]))
        write_json("optimality_refine_time.json", {"rows": rows, "repeat": args.repeat})
        return 0
    if args.refine:
        rows = []
        for model, sizes, batch, devices in REFINE:
            rows.append(refine_row(model, sizes, batch, devices, args.joint_seconds))
            r = rows[-1]
            print(f"  {r['model']} b{batch} on {devices}: recursion {r['recursion_bytes']:.0f} B, tofu "
                  f"{r['tofu_bytes']:.0f} B, joint {r['joint_bytes'] or r['joint_note']}", file=sys.stderr)
        print(refine_table(rows))
        write_json("optimality_refine.json", {"rows": rows})
        return 0
    models = QUICK if args.quick else FULL
    device_counts = [8] if args.quick else [8, 64]
    runs = [(m, b, d) for m, b in models for d in device_counts]
    if not args.quick:
        runs = [(m, b, 4) for m, b in JOINT_4] + runs
    rows = []
    for model, batch, devices in runs:
        r = measure(model, batch, devices, args.joint_seconds)
        rows.append(r)
        print(f"  {model} b{batch} on {devices}: tofu/ILP {r['worst_cut_ratio']:.4f}, "
              f"tofu/joint {joint_text(r)}", file=sys.stderr)
    print(table(["model", "batch", "devices", "cuts", "tofu/ILP (worst cut)", "tofu/joint", "bytes/step",
                 "tofu search", "ILP solve", "ILP / tofu time", "joint solve", "ILP columns"],
                [[r["model"], r["batch"], r["devices"], r["cuts"], f"{r['worst_cut_ratio']:.4f}", joint_text(r),
                  f"{r['total_bytes'] / 1e6:.1f} MB", f"{r['tofu_seconds'] * 1000:.0f} ms",
                  f"{r['ilp_seconds']:.2f} s", f"{r['ilp_seconds'] / max(r['tofu_seconds'], 1e-9):.0f}x",
                  "-" if r["joint_seconds"] is None else f"{r['joint_seconds']:.1f} s",
                  r["ilp_columns_max"]] for r in rows]))
    write_json("optimality.json", {"rows": rows, "quick": args.quick})
    return 0


if __name__ == "__main__":
    sys.exit(main())
