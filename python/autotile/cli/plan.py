"""``autotile plan MODEL``: the partition plan of a model's training step, a table of the
baselines, and the plan written as JSON, a picture, DTensor/JAX/Mesh-TensorFlow layouts."""
from __future__ import annotations

import json
import sys

from ..errors import Error
from .args import (Progress, bandwidths_arg, fmt_bytes, layout_arg, load_model, memory_arg, mesh_arg, model_args,
                   positive_int, write_output)
from .info import model_summary


def cmd_plan(args) -> int:
    """Plan the model, print the summary (and baselines), write the requested files."""
    from .. import planner

    sym = load_model(args)
    print(model_summary(sym, args.batch))
    print()
    bandwidths = args.bandwidths
    layout = dict(args.layout) if args.layout else None
    if args.layout_file:  # what --mesh-tf wrote; --mesh and --layout rules given here come first
        from ..planner.layout_rules import read_rules

        file_mesh, file_rules = read_rules(args.layout_file)
        args.mesh = args.mesh or file_mesh
        given = layout or {}  # first: the first rule matching a tensor decides it
        layout = {**given, **{k: v for k, v in file_rules.items() if k not in given}}
    if args.mesh is not None:
        args.devices = None  # the mesh's size
    with Progress(f"planning ({args.algorithm})"):
        result = planner.plan(sym, devices=args.devices, batch=args.batch, algorithm=args.algorithm,
                              bandwidths=bandwidths, replicate_fallback=args.replicate_fallback,
                              mesh=args.mesh, layout=layout, device_memory=args.memory)
    args.devices = result.devices
    result.model = args.model
    print(result.summary())
    for fmt, path in (("dtensor", args.dtensor), ("jax", args.jax), ("mesh_tf", args.mesh_tf)):
        if path:
            write_output(f"--{fmt.replace('_', '-')}", path, json.dumps(getattr(result, f"to_{fmt}")(), indent=1))
            print(f"{fmt} layout written to {path}", file=sys.stderr)
    if args.compare:
        print()
        print(compare_table(sym, args, result))
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


def compare_table(sym, args, best) -> str:
    """One row per algorithm: communication, ratio to the chosen plan, search time."""
    from .. import planner

    rows = []
    for algo in planner.ALGORITHMS:
        if algo == best.algorithm:
            rows.append((algo, best.comm_bytes, best.search_seconds, ""))
            continue
        if algo in ("ilp", "bruteforce"):  # exact checkers: minutes on large graphs, asked for by name
            rows.append((algo, None, None, f"exact per cut; run with --algorithm {algo}"))
            continue
        try:
            with Progress(f"planning ({algo})"):
                p = planner.plan(sym, devices=args.devices, batch=args.batch, algorithm=algo,
                                 replicate_fallback=args.replicate_fallback)
            rows.append((algo, p.comm_bytes, p.search_seconds, ""))
        except Error as e:
            rows.append((algo, None, None, str(e).split("\n")[0][:70]))
    lines = [f"{'algorithm':<11} {'comm/step':>12} {'vs ' + best.algorithm:>9} {'search':>10}"]
    for algo, comm, secs, note in rows:
        if comm is None:
            lines.append(f"{algo:<11} {'-':>12} {'-':>9} {'-':>10}  {note}")
        else:
            ratio = comm / best.comm_bytes if best.comm_bytes > 0 else float("inf") if comm > 0 else 1.0
            lines.append(f"{algo:<11} {fmt_bytes(comm):>12} {ratio:>8.2f}x {secs * 1000:>8.1f}ms")
    return "\n".join(lines)


def add_parser(sub) -> None:
    """The ``plan`` subcommand."""
    sp = sub.add_parser("plan", help="find the partition plan of a model's training step")
    model_args(sp)
    sp.add_argument("--devices", type=positive_int, default=8)
    sp.add_argument("--algorithm", default="tofu")
    sp.add_argument("--bandwidths", default=None, type=bandwidths_arg,
                    help="per-cut bandwidths, slowest first, e.g. 12.5e9,300e9")
    sp.add_argument("--no-compare", dest="compare", action="store_false", help="skip the table of baselines")
    sp.add_argument("--json", default=None, help="write the plan as JSON to this file")
    sp.add_argument("--draw", default=None, help="write a picture of the tiles to this PNG")
    sp.add_argument("--replicate-fallback", action="store_true", help="run ops without TDL replicated")
    sp.add_argument("--mesh", default=None, type=mesh_arg,
                    help="named device axes instead of --devices, e.g. batch=4,model=8")
    sp.add_argument("--layout", action="append", default=None, type=layout_arg, metavar="PATTERN:DIM=AXIS",
                    help="fix a tensor's layout (repeatable), e.g. 'fc*_weight:0=model'; the search does the rest")
    sp.add_argument("--layout-file", dest="layout_file", default=None, metavar="FILE",
                    help="fix layouts from a JSON file of rules as --mesh-tf writes (its mesh unless --mesh)")
    sp.add_argument("--memory", default=None, type=memory_arg, metavar="SIZE",
                    help="per-device memory budget, e.g. 16GiB: the cheapest plan that fits it")
    sp.add_argument("--dtensor", default=None, metavar="FILE", help="write PyTorch DTensor placements (JSON)")
    sp.add_argument("--jax", default=None, metavar="FILE", help="write JAX PartitionSpecs (JSON)")
    sp.add_argument("--mesh-tf", dest="mesh_tf", default=None, metavar="FILE",
                    help="write layout rules reproducing the plan (JSON)")
    sp.set_defaults(fn=cmd_plan)
