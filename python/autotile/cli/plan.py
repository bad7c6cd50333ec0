"""``autotile plan MODEL``: the partition plan of a model's training step, a table of the
baselines, and the plan written as JSON, a picture, DTensor/JAX/Mesh-TensorFlow layouts."""
from __future__ import annotations

import json
import sys

from ..errors import Error
from .args import (Progress, bandwidths_arg, fmt_bytes, layout_arg, memory_arg, mesh_arg, model_args, positive_int,
                   write_output)
from .models import load_model
from .info import model_summary


#: baselines run by default when the chosen plan took under this many seconds per baseline
#: (lowering and search: each baseline repeats both), so the table costs about a second at most
AUTO_BASELINE_SECONDS = 1.0


def cmd_plan(args) -> int:
    """Plan the model, print the summary (and baselines), write the requested files."""
    import time

    from .. import planner

    if args.objective == "time" and args.hardware is None:  # say the flag, not at.plan's keyword
        from ..sim import available_profiles

        raise Error(f"--objective time needs --hardware PROFILE (a shipped name or a JSON path); shipped profiles: "
                    f"{', '.join(available_profiles())}")
    with Progress("lowering (loading the model)"):
        sym = load_model(args)
    print(model_summary(sym, args.batch))
    print()
    bandwidths = args.bandwidths
    layout = constraint_layout(args)
    if args.mesh is not None:
        args.devices = None  # the mesh's size
    t0 = time.perf_counter()
    with Progress(f"search ({args.algorithm}, lowering included)"):
        result = planner.plan(sym, devices=args.devices, batch=args.batch, algorithm=args.algorithm,
                              bandwidths=bandwidths, replicate_fallback=args.replicate_fallback,
                              mesh=args.mesh, layout=layout, device_memory=args.memory,
                              objective=args.objective, hardware=args.hardware)
    seconds = time.perf_counter() - t0
    args.devices = result.devices
    result.model = args.model
    print(result.summary())
    for fmt, path in (("dtensor", args.dtensor), ("jax", args.jax), ("mesh_tf", args.mesh_tf)):
        if path:
            write_output(f"--{fmt.replace('_', '-')}", path, json.dumps(getattr(result, f"to_{fmt}")(), indent=1))
            print(f"{fmt} layout written to {path}", file=sys.stderr)
    baselines = _baseline_algorithms(result)
    if args.compare is None:  # by default only where they cost about a second in all
        args.compare = seconds * len(baselines) < AUTO_BASELINE_SECONDS
        if not args.compare and baselines:
            print(f"\n(baselines skipped: about {seconds * len(baselines):.0f} s for {len(baselines)} algorithms on "
                  f"this graph; --baselines prints their table)")
    if args.compare:
        print()
        with Progress(f"baselines ({len(baselines)} algorithms)"):
            print(compare_table(sym, args, result, layout=layout))
    if args.json:
        write_output("--json", args.json, result.to_json())
        print(f"\nplan written to {args.json}", file=sys.stderr)
    if args.draw:
        try:
            result.draw(args.draw)
        except OSError as e:
            raise Error(f"--draw: cannot write '{args.draw}': {e.strerror or e}") from None
        print(f"picture written to {args.draw}", file=sys.stderr)
    return 0


def constraint_layout(args):
    """The layout rules of --layout and --layout-file (what --mesh-tf wrote; --mesh and the
    --layout rules given on the command line come first), None without either; sets
    ``args.mesh`` from the file when --mesh is not given."""
    layout = dict(args.layout) if args.layout else None
    if args.layout_file:
        from ..planner.layout_rules import read_rules

        file_mesh, file_rules = read_rules(args.layout_file)
        args.mesh = args.mesh or file_mesh
        given = layout or {}  # first: the first rule matching a tensor decides it
        layout = {**given, **{k: v for k, v in file_rules.items() if k not in given}}
    return layout


def _baseline_algorithms(best):
    """The algorithms compared with `best` (all but it and the exact checkers, which take
    minutes on large graphs and are asked for by name)."""
    from .. import planner

    return [a for a in planner.ALGORITHMS if a != best.algorithm and a not in ("ilp", "bruteforce")]


def _unconstrained(message: str) -> bool:
    """True when a baseline refused a mesh or layout rules (it plans its own layout)."""
    return "plans its own layout" in message or "layout rules work with" in message or "data+layout" in message


def compare_table(sym, args, best, layout=None) -> str:
    """One row per algorithm: communication, ratio to the chosen plan, search time. Each
    baseline runs under the plan's constraints (--mesh, --layout, --memory); one that cannot
    take a mesh or layout rules runs without them and its row says 'unconstrained'."""
    from .. import planner

    constrained = {"mesh": args.mesh, "layout": layout, "device_memory": args.memory}
    constrained = {k: v for k, v in constrained.items() if v is not None}
    rows = []
    for algo in planner.ALGORITHMS:
        if algo == best.algorithm:
            rows.append((algo, best.comm_bytes, best.search_seconds, ""))
            continue
        if algo not in _baseline_algorithms(best):
            rows.append((algo, None, None, f"exact per cut; run with --algorithm {algo}"))
            continue
        note = ""
        kwargs = dict(batch=args.batch, algorithm=algo, replicate_fallback=args.replicate_fallback)
        try:
            try:
                p = planner.plan(sym, devices=None if args.mesh else args.devices, **kwargs, **constrained)
            except Error as e:
                if not (constrained.keys() & {"mesh", "layout"}) or not _unconstrained(str(e)):
                    raise
                p = planner.plan(sym, devices=best.devices, device_memory=args.memory, **kwargs)
                note = "unconstrained: no --mesh/--layout"
            rows.append((algo, p.comm_bytes, p.search_seconds, note))
        except Error as e:
            rows.append((algo, None, None, str(e).split("\n")[0][:70]))
    lines = [f"{'algorithm':<11} {'comm/step':>12} {'vs ' + best.algorithm:>9} {'search':>10}"]
    for algo, comm, secs, note in rows:
        if comm is None:
            lines.append(f"{algo:<11} {'-':>12} {'-':>9} {'-':>10}  {note}")
        else:
            ratio = comm / best.comm_bytes if best.comm_bytes > 0 else float("inf") if comm > 0 else 1.0
            lines.append(f"{algo:<11} {fmt_bytes(comm):>12} {ratio:>8.2f}x {secs * 1000:>8.1f}ms"
                         + (f"  {note}" if note else ""))
    return "\n".join(lines)


def add_parser(sub) -> None:
    """The ``plan`` subcommand."""
    from .. import planner
    from .args import HelpFormatter, add_quiet_arg

    sp = sub.add_parser("plan", help="find the partition plan of a model's training step", formatter_class=HelpFormatter,
                        description="Find how to tile every tensor of MODEL's training step (forward, backward, "
                                    "update) across the devices with the least communication, and print the plan.")
    model_args(sp)
    sp.add_argument("--devices", type=positive_int, default=8, help="number of devices to partition across")
    sp.add_argument("--algorithm", default="tofu", metavar="NAME",
                    help=f"search algorithm: {', '.join(planner.ALGORITHMS)} (tofu: the recursive DP search; "
                         "the others are baselines and exact checkers)")
    sp.add_argument("--bandwidths", default=None, type=bandwidths_arg,
                    help="per-cut bandwidths, slowest first, e.g. 12.5e9,300e9")
    sp.add_argument("--objective", default="bytes", choices=("bytes", "time"),
                    help="minimise bytes moved, or the simulated step time on --hardware (docs/time-objective.md)")
    sp.add_argument("--hardware", default=None, metavar="PROFILE",
                    help="hardware profile for --objective time: a shipped name (dgx-h100, dgx-h200, dgx-a100, ...) "
                         "or a JSON path")
    sp.add_argument("--baselines", dest="compare", action="store_true", default=None,
                    help="print the table of baselines (default: only when they take about a second in all)")
    sp.add_argument("--no-compare", "--no-baselines", dest="compare", action="store_false",
                    help="never print the table of baselines")
    sp.add_argument("--json", default=None, metavar="FILE", help="write the plan as JSON to this file")
    sp.add_argument("--draw", default=None, metavar="PNG", help="write a picture of the tiles to this PNG")
    sp.add_argument("--replicate-fallback", action="store_true", help="run ops without TDL replicated")
    add_constraint_args(sp)
    sp.add_argument("--dtensor", default=None, metavar="FILE", help="write PyTorch DTensor placements (JSON)")
    sp.add_argument("--jax", default=None, metavar="FILE", help="write JAX PartitionSpecs (JSON)")
    sp.add_argument("--mesh-tf", dest="mesh_tf", default=None, metavar="FILE",
                    help="write layout rules reproducing the plan (JSON)")
    add_quiet_arg(sp)
    sp.set_defaults(fn=cmd_plan)


def add_constraint_args(sp) -> None:
    """--mesh, --layout, --layout-file and --memory (plan and run)."""
    sp.add_argument("--mesh", default=None, type=mesh_arg,
                    help="named device axes instead of --devices, e.g. batch=4,model=8")
    sp.add_argument("--layout", action="append", default=None, type=layout_arg, metavar="PATTERN:DIM=AXIS",
                    help="fix a tensor's layout (repeatable), e.g. 'fc*_weight:0=model'; the search does the rest")
    sp.add_argument("--layout-file", dest="layout_file", default=None, metavar="FILE",
                    help="fix layouts from a JSON file of rules as --mesh-tf writes (its mesh unless --mesh)")
    sp.add_argument("--memory", default=None, type=memory_arg, metavar="SIZE",
                    help="per-device memory budget, e.g. 16GiB: the cheapest plan that fits it")
