"""ONNX Loop, unrolled at import time when its trip count is known (as LSTM is unrolled).

nn.EmbeddingBag exports as a Loop over the bags whose body slices the ids of one bag (at
offsets that are constants when the input is 2-D), gathers their embeddings and reduces them;
each iteration's result is a scan output, stacked along a new first axis. The importer runs
the body once per iteration: the iteration number and the condition are constants, the
loop-carried values are those of the previous iteration, and every body node is folded or
converted exactly as a node of the main graph (so the unrolled graph is made of ordinary
autotile ops, each with its TDL, gradient and tiles). Scan outputs are stacked with
expand_dims + Concat.

Refused, with an Error naming the node: a trip count or condition computed at run time
(data-dependent termination), a body that computes its condition at run time, more than
MAX_TRIPS iterations, and a loop with no iteration that has scan outputs (empty tensors).
"""
from __future__ import annotations

import numpy as np

from .onnx_fold import fold
from .onnx_registry import CONVERTERS, converter

#: iterations a Loop may unroll into (each copies the body into the graph)
MAX_TRIPS = 4096


def _const_scalar(ctx, i, what):
    if not ctx.has_input(i):
        return None
    if not ctx.is_const(i):
        raise ctx.error(f"the {what} '{ctx.input_name(i)}' is computed at run time: autotile unrolls a Loop at "
                        "import and needs it known then (a data-dependent loop cannot be partitioned statically)")
    value = np.asarray(ctx.const(i, what)).reshape(-1)
    if value.size != 1:
        raise ctx.error(f"the {what} must be a scalar, got shape {np.shape(ctx.const(i, what))}")
    return value[0]


def _run_body(ctx, body, index: int):
    """Folds or converts every node of `body` once, binding its outputs in the importer."""
    imp = ctx.imp
    for k, node in enumerate(body.node):
        sub = type(ctx)(imp, node, index * 100000 + k)  # a NodeContext of the body node
        present = [x for x in node.input if x]
        values = [imp.lookup(x, sub) if x else None for x in node.input]
        outs = None
        if node.op_type == "Loop":
            raise sub.error("a Loop nested in a Loop body is not supported")
        if all(isinstance(imp.values.get(x), np.ndarray) for x in present):
            outs = fold(sub, values, generic=node.domain in ("", "ai.onnx"))
        if outs is None:
            if node.domain not in ("", "ai.onnx") or node.op_type not in CONVERTERS:
                raise sub.error(f"operator {node.op_type} in the body of Loop '{ctx.display}' is not supported")
            outs = CONVERTERS[node.op_type](sub)
        imp._bind(sub, outs)


def _stack(ctx, values, j):
    if all(isinstance(v, np.ndarray) for v in values):
        return np.stack(values)
    parts = [ctx.op("expand_dims", v if not isinstance(v, np.ndarray) else ctx.param(v, tag=f"scan{j}_{t}"), axis=0,
                    suffix=f"scan{j}_{t}") for t, v in enumerate(values)]
    if len(parts) == 1:
        return parts[0]
    return ctx.op("Concat", *parts, dim=0, num_args=len(parts), suffix=f"scan{j}")


@converter("Loop")
def loop(ctx):
    body = ctx.attr("body")
    trips = _const_scalar(ctx, 0, "trip count")
    cond = _const_scalar(ctx, 1, "loop condition")
    if trips is None:
        raise ctx.error("a Loop without a trip count runs until its condition turns false at run time; autotile "
                        "unrolls only loops whose trip count is known at import")
    trips = int(trips)
    if trips > MAX_TRIPS:
        raise ctx.error(f"trip count {trips} is more than the {MAX_TRIPS} iterations autotile unrolls")
    n_carried = ctx.num_inputs - 2
    if len(body.input) != 2 + n_carried or len(body.output) < 1 + n_carried:
        raise ctx.error(f"the body has {len(body.input)} inputs and {len(body.output)} outputs for {n_carried} "
                        "loop-carried values")
    imp = ctx.imp
    carried = [imp.lookup(ctx.input_name(2 + j), ctx) for j in range(n_carried)]
    n_scan = len(body.output) - 1 - n_carried
    scans = [[] for _ in range(n_scan)]
    running = True if cond is None else bool(cond)
    for i in range(trips):
        if not running:
            break
        imp.values[body.input[0].name] = np.array(i, dtype=np.int64)
        imp.values[body.input[1].name] = np.array(True)
        for vi, value in zip(body.input[2:], carried):
            imp.values[vi.name] = value
        _run_body(ctx, body, i)
        cond_out = imp.lookup(body.output[0].name, ctx)
        if not isinstance(cond_out, np.ndarray):
            raise ctx.error(f"the body computes its condition '{body.output[0].name}' at run time; autotile "
                            "unrolls only loops whose condition is known at import")
        running = bool(np.asarray(cond_out).reshape(-1)[0])
        carried = [imp.lookup(o.name, ctx) for o in body.output[1:1 + n_carried]]
        for j, o in enumerate(body.output[1 + n_carried:]):
            scans[j].append(imp.lookup(o.name, ctx))
    if n_scan and not scans[0]:
        raise ctx.error("the loop runs no iteration, so its scan outputs are empty tensors, which autotile "
                        "does not compute")
    return carried + [_stack(ctx, values, j) for j, values in enumerate(scans)]
