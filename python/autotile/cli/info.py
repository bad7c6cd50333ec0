"""``autotile info MODEL``: nodes, inputs and parameter sizes of a model."""
from __future__ import annotations

from typing import Optional

from .args import fmt_bytes, model_args
from .models import load_model


def model_summary(sym, batch: Optional[int]) -> str:
    """Nodes, inputs and parameter sizes of a model."""
    import numpy as np

    from ..autodiff.graph import default_data_names
    from ..symbol.infer import infer_entry_shapes

    known = infer_entry_shapes(sym, {})
    nodes = sym.topo_nodes()
    ops = [n for n in nodes if not n.is_variable]
    variables = {n.name: known.get((id(n), 0)) for n in nodes if n.is_variable}
    data_names = set(default_data_names(sym))
    data = [n for n in variables if n in data_names or n.startswith("data")]  # in the model's order
    params = {n: s for n, s in variables.items() if n not in data and s is not None}
    count = sum(int(np.prod(s)) for s in params.values())
    kinds = {}
    for n in ops:
        kinds[n.op] = kinds.get(n.op, 0) + 1
    lines = [f"model: {sym.name or 'symbol'}   ops: {len(ops)}   parameters: {count:,} "
             f"({fmt_bytes(4 * count)} as float32)",
             "inputs: " + ", ".join(f"{n}{tuple(variables[n]) if variables[n] else ''}" for n in data),
             "ops: " + ", ".join(f"{k} x{v}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]))]
    return "\n".join(lines)


def cmd_info(args) -> int:
    """Print the model summary."""
    sym = load_model(args)
    print(model_summary(sym, args.batch))
    return 0


def add_parser(sub) -> None:
    """The ``info`` subcommand."""
    from .args import HelpFormatter, add_quiet_arg

    sp = sub.add_parser("info", help="print a model summary", formatter_class=HelpFormatter,
                        description="Print MODEL's ops, inputs and parameter count.")
    model_args(sp)
    add_quiet_arg(sp)
    sp.set_defaults(fn=cmd_info)
