"""Bytes per tensor, the plan's and the compiled program's, to find where they differ.

The plan side sums the bytes of the execution graph's fetches by the tensor each fetch
writes (a re-layout to a node's input tiles, a partial sum reduced into its stored layout,
a gather into the stored layout). The compiled side reads each collective's ``op_name``:
the JAX step traces each re-layout of tensor ``i`` under ``jax.named_scope("at_t<i>")``
inside its node's ``"at_n<k>"`` (``TrainingStep.scope_names``), so the innermost tensor
scope names the tensor moved; a collective with none (XLA partitioning a node's own
computation) is named after its node, ``"node:<name>"``."""
from __future__ import annotations

import re
from typing import Dict, List, Tuple

_SCOPE = re.compile(r"\bat_([tn])(\d+)\b")


def plan_bytes_by_tensor(eg) -> Dict[str, int]:
    """{tensor: bytes its fetches move} of execution graph `eg` (they sum to
    ``eg.stats()["bytes"]``)."""
    out: Dict[str, int] = {}
    names = eg.lowered.tensor_names
    for i in range(len(eg.ops)):
        op = eg.ops[i]
        if op["kind"] != "fetch" or not op["bytes_moved"]:
            continue
        t = names[eg.buffers[op["outputs"][0]]["tensor"]] if op["outputs"] else "?"
        out[t] = out.get(t, 0) + int(op["bytes_moved"])
    return out


def repeated_fetches(eg) -> Dict[str, List[str]]:
    """{tensor: reader nodes} where one device fetches the same box of a tensor for several
    nodes: the execution graph (and the cost model, which prices each reader's re-layout)
    moves it once per reader; a compiled program moves it once and both read it."""
    seen: Dict[tuple, List[str]] = {}
    names, nodes = eg.lowered.tensor_names, eg.lowered.node_names
    for i in range(len(eg.ops)):
        op = eg.ops[i]
        if op["kind"] != "fetch" or not op["bytes_moved"] or not op["outputs"]:
            continue
        b = eg.buffers[op["outputs"][0]]
        seen.setdefault((names[b["tensor"]], op["device"], tuple(b["lo"]), tuple(b["hi"])), []).append(
            nodes[op["node"]] if op["node"] >= 0 else "?")
    out: Dict[str, List[str]] = {}
    for (t, _, _, _), readers in seen.items():
        if len(readers) > 1:
            out[t] = sorted(set(out.get(t, [])) | set(readers))
    return out


def owner(op_name: str, scope_names: Dict[str, str]) -> str:
    """The tensor (or ``node:<name>``) a collective with metadata `op_name` belongs to."""
    found = _SCOPE.findall(op_name)
    tensors = [f"at_t{i}" for k, i in found if k == "t"]
    if tensors:
        return scope_names.get(tensors[-1], "?")
    nodes = [f"at_n{i}" for k, i in found if k == "n"]
    return f"node:{scope_names.get(nodes[-1], '?')}" if nodes else "?"


def compiled_bytes_by_tensor(collectives, scope_names: Dict[str, str]) -> Dict[str, Dict[str, int]]:
    """{tensor or node: {collective kind: bytes}} of `collectives`
    (:func:`autotile.jax.collectives` of the compiled step)."""
    out: Dict[str, Dict[str, int]] = {}
    for c in collectives:
        kinds = out.setdefault(owner(c.get("op_name", ""), scope_names), {})
        kinds[c["kind"]] = kinds.get(c["kind"], 0) + c["bytes"]
    return out


def uneven(plan, tensor: str) -> str:
    """'' or which dimension of `tensor` the plan splits into pieces of unequal size."""
    shape = plan.tensor_shapes.get(tensor)
    if shape is None:
        return ""
    parts = [1] * len(shape)
    for k, t in zip(plan.factors, plan.tensor_tilings.get(tensor, ())):
        if t.startswith("split("):
            parts[int(t[6:-1])] *= k
    for d, (n, p) in enumerate(zip(shape, parts)):
        if n % p:
            return f"dimension {d} of {n} in {p} pieces"
    return ""


def cause(tensor: str, plan_bytes: int, kinds: Dict[str, int], step) -> Tuple[str, str]:
    """Why the compiled step moves other bytes for `tensor` than the plan, short and in full
    (from the step's notes on how each re-layout was lowered; docs/layouts.md "What XLA
    compiles from a plan")."""
    compiled = sum(kinds.values())
    if tensor.startswith("node:"):
        why = step.global_nodes.get(tensor[5:], "")
        return "global-view node", f"XLA partitions this node's own computation (it runs in the global view: {why})"
    notes = list(dict.fromkeys(step.notes.get(tensor, [])))
    if tensor in step.layout.get("partial", {}):
        return "output left partial", ("the plan leaves this model output a partial sum (no node reads it; its "
                                       "runtimes sum the pieces when collecting outputs, uncounted): the step "
                                       "returns it summed")
    if compiled < plan_bytes and _dtype(step, tensor) in ("int64", "uint64", "float64", "complex128"):
        import jax

        if not jax.config.jax_enable_x64:
            return "64-bit held in 32", (f"a {_dtype(step, tensor)} tensor (token ids): JAX without JAX_ENABLE_X64 "
                                         "holds it in 32 bits, so its collectives move half the plan's bytes")
    odd = uneven(step.plan, tensor) or next((n[8:] for n in notes if n.startswith("uneven: ")), "")
    if odd:
        return "uneven split", (f"uneven split ({odd}): XLA's collectives need equal tiles, so the plan's unequal "
                                "pieces are all-reduced or gathered whole")
    xla = [n[5:] for n in notes if n.startswith("xla: ")]
    again = repeated_fetches(step.exec_graph).get(tensor) if compiled < plan_bytes else None
    if again:
        return "fetched per reader", (f"the plan fetches the same tiles once per reader ({', '.join(again[:3])}); "
                                      "the compiled program moves them once (autotile's cost model prices each "
                                      "reader's re-layout: its count is the higher one)")
    if "order" in notes:
        return "reduce-scatter + permute", ("partial sum reduce-scattered in mesh-axis order, then its tiles "
                                            "permuted into the stored order (the plan reduces each piece straight "
                                            "to its owner)")
    if xla:
        return "XLA re-layout", (f"re-layout left to XLA ({'; '.join(xla[:2])}): tiles in another mesh-axis "
                                 "order, XLA permutes and gathers (the plan sends each piece straight to its owner)")
    a2a = [n for n in notes if n.startswith("a2a: ")]
    if a2a:
        return "all-to-all per dimension", (f"re-laid out by {a2a[0][5:]} all-to-alls, one per dimension the mesh "
                                            "axes move to (an all-to-all splits one dimension), so part of the data "
                                            "moves twice (the plan sends each piece once)")
    if "gather+a2a" in notes and compiled > plan_bytes:
        return "gather + all-to-all", ("gathered over the mesh axes the target drops, then an all-to-all of the "
                                       "others (each collective acts on one set of axes), so the gathered part "
                                       "moves again (the plan fetches each target piece once)")
    if "move" in notes:
        return "tile permute", "tiles permuted by collective-permutes of whole tiles (the plan sends only the pieces that move)"
    readers = [n.name for n in step.tg.symbol.topo_nodes() if not n.is_variable and n.name in step.global_nodes
               and any((src.name if src.is_variable else src.output_names()[i]) == tensor for src, i in n.inputs)]
    if compiled < plan_bytes and readers:
        return "bounding box", (f"read by {readers[0]} in boxes that are no mesh tiles (a reshape's bounding box, "
                                "rows beyond the tile): the plan fetches the box, XLA (global view) only the rows "
                                "used")
    from .reshape_tiles import SHAPE_ONLY

    reshapes = [n.name for n in step.tg.symbol.topo_nodes() if n.op in SHAPE_ONLY and n.name in step.mapped
                and n.inputs and _name(*n.inputs[0]) == tensor]
    if compiled < plan_bytes and reshapes:
        return "bounding box", (f"read by the reshape {reshapes[0]}, whose tile the plan fetches as the interval hull "
                                "of its reads (rows beyond the tile); the step reads the exact run of its output "
                                "tile (jax/reshape_tiles.py)")
    if compiled < plan_bytes:
        return "XLA moves less", "XLA moves less than the plan's execution graph"
    return "not attributed", "not attributed"


def _dtype(step, tensor: str) -> str:
    """The training graph's dtype of `tensor` (symbol.infer's types; float32 if unknown)."""
    types = getattr(step, "_attribution_dtypes", None)
    if types is None:
        from ..symbol.infer import infer_entry_types

        known = infer_entry_types(step.tg.symbol, {})
        types = {_name(n, i): t for n in step.tg.symbol.topo_nodes() for i in range(len(n.output_names()) or 1)
                 for t in [known.get((id(n), i), "float32")]}
        step._attribution_dtypes = types  # one inference per step
    return types.get(tensor, "float32")


def _name(src, i) -> str:
    return src.name if src.is_variable else src.output_names()[i]


def differences(plan_bytes: Dict[str, int], compiled: Dict[str, Dict[str, int]], step):
    """Per tensor where `compiled` (:func:`compiled_bytes_by_tensor`) and `plan_bytes`
    (:func:`plan_bytes_by_tensor`) differ: dicts of tensor, plan and compiled bytes, the
    compiled collectives by kind and the cause, largest difference first."""
    out = []
    for t in set(plan_bytes) | set(compiled):
        kinds = compiled.get(t, {})
        c, p = sum(kinds.values()), plan_bytes.get(t, 0)
        if c != p:
            short, full = cause(t, p, kinds, step)
            out.append({"tensor": t, "plan": int(p), "compiled": int(c), "kinds": dict(kinds), "short": short,
                        "cause": full})
    return sorted(out, key=lambda d: -abs(d["compiled"] - d["plan"]))
