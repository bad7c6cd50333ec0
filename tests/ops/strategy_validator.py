"""Strategy validator: every partition strategy of every op, checked against one device.

In the spirit of PyTorch DTensor's sharding-strategy checker. For one op configuration (a
:class:`Case`: op, attributes, input shapes and value kinds) it builds the op's training
step (the forward node, every backward node its gradient creates and the weight updates),
and for each k-device cut in `FACTORS` (2-way, 3-way, nested 2x2) it runs that step on
virtual devices under plans that split *every* node of the step along each strategy the TDL
analysis yields for it (respecting the op's ``__no_split__`` veto, as the planner does). The
execution graph runs each sub-operator's kernel on its tiles with the attributes of the op's
tile hook, fetches halos and reduces partial results; the outcome must equal the op's
single-device step in float64: every output, every gradient, every updated weight and every
auxiliary state (BatchNorm's moving statistics), compared both ways so a missing or extra
gradient fails. A plan runs each node along its j-th strategy (cycling), so the number of
steps per cut is the largest strategy count of one node; when a step disagrees, the nodes
are split one at a time to name the (node, op, strategy) at fault.

The op under test really is split: a strategy row of a node is a variable of its TDL at the
composed split count (the execution-graph builder refuses a plan whose variable the TDL does
not allow), and :func:`check_case` records, per registered op, the (cut, strategy) pairs it
ran, so a sweep can tell which ops were never split and why.
"""
from __future__ import annotations

import os
import sys
import zlib
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

import autotile as at
from autotile.planner.plan import Plan

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "execgraph"))
from random_plans import _vars, lowered_training_graph, random_plan  # noqa: E402

from autotile.backend.multi_device import run_multi_device  # noqa: E402

#: the cuts every case runs at: 2-way, 3-way and two nested 2-way cuts
FACTORS: Tuple[Tuple[int, ...], ...] = ((2,), (3,), (2, 2))
RTOL, ATOL = 1e-9, 1e-10


@dataclass(frozen=True)
class In:
    """One input of a case. `kind` draws its values: normal, positive (0.5..2), nonzero (away
    from 0), unit (-0.9..0.9), binary (0/1), index:N (integers in [0, N)), label:N (class
    labels, fed as data). `data` inputs are fed, not trained (no gradient, no update)."""

    shape: Tuple[int, ...]
    kind: str = "normal"
    data: bool = False


@dataclass
class Case:
    """One op configuration: `op` applied to `inputs` (in the op's argument order) with `attrs`.
    `xfail` names a known bug (the case must fail until it is fixed); `optimizer` trains the
    weights (sgd, sgd with momentum, adam) so the update ops are split too."""

    op: str
    attrs: dict
    inputs: Sequence[In]
    optimizer: str = "sgd"
    optimizer_args: Optional[dict] = None
    xfail: Optional[str] = None
    label: str = ""

    @property
    def id(self) -> str:
        text = ",".join(f"{k}={_short(v)}" for k, v in sorted(self.attrs.items()))
        shapes = "|".join("x".join(map(str, i.shape)) or "s" for i in self.inputs)
        opt = "" if self.optimizer == "sgd" else f"[{self.optimizer}]"
        return f"{self.op}({text}){shapes}{opt}{self.label}"


def _short(v) -> str:
    return "x".join(map(str, v)) if isinstance(v, (tuple, list)) else str(v)


def draw(kind: str, shape, rng) -> np.ndarray:
    """Values of one input of kind `kind` (see :class:`In`), float64."""
    if kind == "normal":
        return rng.standard_normal(shape)
    if kind == "positive":
        return rng.uniform(0.5, 2.0, shape)
    if kind == "nonzero":
        return rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    if kind == "unit":
        return rng.uniform(-0.9, 0.9, shape)
    if kind == "binary":
        return rng.integers(0, 2, shape).astype(np.float64)
    if kind.startswith(("index:", "label:")):
        return rng.integers(0, int(kind.split(":")[1]), shape).astype(np.float64)
    raise ValueError(f"unknown input kind {kind!r}")


@dataclass
class Step:
    """A case made runnable: its symbol, every value a step is fed (weights, data, aux and
    head gradients), and the lowered training graph the plans are made for."""

    case: Case
    sym: object
    values: Dict[str, np.ndarray]
    data: Dict[str, np.ndarray]
    params: Dict[str, np.ndarray]
    aux: Dict[str, np.ndarray]
    head_grads: Dict[str, np.ndarray]
    lowered: object
    #: a training step (forward, backward, update), or partitioned inference (forward alone)
    train: bool = True
    #: runs a planned step: run_multi_device (the host runtime) or another runtime's
    runner: Callable = run_multi_device


def build(case: Case, train: bool = True) -> Step:
    """The one-op symbol of `case` with seeded values (float64), and its lowered training
    step (with ``train=False``: its forward graph alone, as partitioned inference plans it)."""
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    op = at.ops.get(case.op)
    parsed = at.ops.parse_attrs(op, {k: at.ops.registry.format_value(v) for k, v in case.attrs.items()}, "op")
    names = op.arguments(parsed)
    if len(names) != len(case.inputs):
        raise ValueError(f"{case.id}: {len(case.inputs)} inputs for arguments {names}")
    args, data, params = [], {}, {}
    for name, spec in zip(names, case.inputs):
        vname = f"in_{name}"
        attr = {"__data__": "1"} if spec.data or spec.kind.startswith("label:") else None
        args.append(at.sym.Variable(vname, shape=spec.shape, attr=attr))
        (data if attr else params)[vname] = draw(spec.kind, spec.shape, rng)
    from autotile.symbol.ops_api import create

    sym = create(case.op, *args, name="op", **case.attrs)
    shapes = {n: v.shape for n, v in data.items()}
    aux = {}
    aux_names = sym.list_auxiliary_states()
    if aux_names:
        _, _, aux_shapes = sym.infer_shape(**shapes, **{n: v.shape for n, v in params.items()})
        for n, s in zip(aux_names, aux_shapes):
            aux[n] = rng.uniform(0.5, 1.5, s) if "var" in n else rng.standard_normal(s)
    if train:
        low = lowered_training_graph(sym, shapes, case.optimizer, case.optimizer_args)
    else:
        from autotile.autodiff import inference_graph
        from autotile.planner.lower import lower

        tg = inference_graph(sym)
        low = lower(tg.symbol, shapes, tg.param_names, {}, {}, {})
    heads = {}
    for out in sym.list_outputs():
        hname = f"{out}_head_grad"
        if hname in low.tensor_names:
            heads[out] = rng.standard_normal(low.tensor_shapes[low.tensor_names.index(hname)])
    values = {**params, **data, **aux, **{f"{o}_head_grad": g for o, g in heads.items()}}
    return Step(case, sym, values, data, params, aux, heads, low, train)


def reference(step: Step):
    """The single-device step (the oracle)."""
    c = step.case
    if not step.train:
        return at.backend.run(step.sym, devices=1, inputs=step.data, params=step.params, aux=step.aux, train=False)
    return at.backend.run(step.sym, devices=1, inputs=step.data, params=step.params, aux=step.aux, train=True,
                          head_grads=step.head_grads or None, optimizer=c.optimizer, optimizer_args=c.optimizer_args)


def compare_results(got, want, where: str, rtol: float = RTOL, atol: float = ATOL) -> None:
    """Asserts two step results agree: outputs (count and values), and gradients, updated
    weights, optimizer states and aux states by name in both directions (a missing or extra
    entry fails)."""
    assert len(got.outputs) == len(want.outputs), f"{where}: {len(got.outputs)} outputs, want {len(want.outputs)}"
    for i, (g, w) in enumerate(zip(got.outputs, want.outputs)):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{where}: output {i}")
    for what in ("grads", "params", "states", "aux"):
        g, w = getattr(got, what) or {}, getattr(want, what) or {}
        assert set(g) == set(w), f"{where}: {what} {sorted(g)} != single device {sorted(w)}"
        for name in w:
            np.testing.assert_allclose(g[name], w[name], rtol=rtol, atol=atol, err_msg=f"{where}: {what}[{name}]")


def strategy_rows(lowered, node_id: int, factors: Sequence[int], replicate_cuts: bool = False) -> List[List[str]]:
    """Every per-cut strategy row of a node at `factors` (a TDL variable per cut, composed
    split counts allowed by the TDL), without the variables the node vetoes; with
    `replicate_cuts` at two cuts also rows that replicate the node at one of them."""
    node = lowered.core.node(node_id)
    ins = [lowered.tensor_shapes[t] for t in node["inputs"]]
    outs = [lowered.tensor_shapes[t] for t in node["outputs"]]
    vetoed = set(node["attrs"].get("__no_split__", "").split(","))
    rows: List[List[str]] = [[]]
    for k in factors:
        grown = []
        for row in rows:
            counts: Dict[str, int] = {}
            for var, f in zip(row, factors):
                counts[var] = counts.get(var, 1) * f
            counts.pop("replicate", None)
            grown += [row + [v] for v in _vars(node["tdl"], ins, outs, k, counts) if v not in ("replicate", *vetoed)]
            if replicate_cuts and len(factors) == 2:  # three cuts would multiply the rows again
                grown.append(row + ["replicate"])
        rows = grown
    return [r for r in rows if any(v != "replicate" for v in r)]


def vetoed_vars(lowered, node_id: int) -> List[str]:
    """The TDL variables the node vetoes (``__no_split__``)."""
    return [v for v in lowered.core.node(node_id)["attrs"].get("__no_split__", "").split(",") if v]


def make_plan(lowered, factors: Sequence[int], strategies: Dict[str, List[str]], optimizer: str = "sgd",
              tilings: Optional[Dict[str, List[str]]] = None, train: bool = True) -> Plan:
    """A plan with the given nodes split (the others replicated) and every tensor tiled as
    `tilings` says (replicated when not given)."""
    rep = ["replicate"] * len(factors)
    rows = {name: list(strategies.get(name, rep)) for name in lowered.node_names}
    tilings = tilings or {}
    return Plan(algorithm="validator", devices=int(np.prod(factors)), factors=list(factors),
                cut_costs=[0.0] * len(factors), comm_bytes=0.0, search_seconds=0.0,
                tensor_tilings={name: list(tilings.get(name, rep)) for name in lowered.tensor_names},
                node_strategies=rows,
                tensor_shapes=dict(zip(lowered.tensor_names, lowered.tensor_shapes)),
                param_names=list(lowered.param_names), optimizer=optimizer, train=train)


@dataclass
class Report:
    """What :func:`check_case` ran: per registered op, the (cut, strategy row) pairs checked,
    the nodes never split (with why), and the number of (op, config, strategy) triples."""

    checked: Dict[str, set] = field(default_factory=dict)
    unsplit: Dict[str, str] = field(default_factory=dict)
    #: ops that never appear in a step themselves: the ops autodiff lowers them into
    lowered: Dict[str, set] = field(default_factory=dict)
    #: TDL variables an op vetoes (``__no_split__``): strategies the planner never runs
    vetoed: Dict[str, set] = field(default_factory=dict)
    #: the (case, node, cut, strategy row) checked; a triple run under several tilings counts once
    seen: set = field(default_factory=set)
    steps: int = 0

    @property
    def triples(self) -> int:
        return len(self.seen)

    def merge(self, other: "Report") -> None:
        for op, rows in other.checked.items():
            self.checked.setdefault(op, set()).update(rows)
        for what in ("lowered", "vetoed"):
            for op, items in getattr(other, what).items():
                getattr(self, what).setdefault(op, set()).update(items)
        for op, why in other.unsplit.items():
            self.unsplit.setdefault(op, why)
        self.seen |= other.seen
        self.steps += other.steps


def random_tilings(lowered, factors: Sequence[int], seed: int) -> Dict[str, List[str]]:
    """Seeded random tensor tilings per cut (split(d), replicate, partial for produced
    tensors), as tests/execgraph/random_plans draws them: the sub-ops then read their
    regions from split and partial tiles, and their outputs convert to other layouts."""
    return random_plan(lowered, list(factors), np.random.default_rng(seed)).tensor_tilings


def _run(step: Step, plan: Plan):
    c = step.case
    if not step.train:
        return step.runner(step.sym, plan.devices, step.values, plan=plan, train=False)
    return step.runner(step.sym, plan.devices, step.values, plan=plan, optimizer=c.optimizer,
                       optimizer_args=c.optimizer_args)


def check_case(case: Case, factors_list: Sequence[Sequence[int]] = FACTORS, rtol: float = RTOL,
               atol: float = ATOL, tilings: str = "replicate", runner: Optional[Callable] = None,
               train: bool = True, replicate_cuts: bool = False) -> Report:
    """Validates every strategy of every node of `case`'s training step at each cut of
    `factors_list` against the single-device step; returns what was covered. Tensors are
    replicated (`tilings="replicate"`), or tiled at random per plan (``"random"``). `runner`
    runs a planned step (default: the host runtime, run_multi_device; the GPU runtime's
    run_gpu takes the same arguments). ``train=False`` checks partitioned inference (the
    forward graph alone, kernels in inference mode). `replicate_cuts` adds nested rows that
    replicate a node at some of the cuts. Raises AssertionError naming the case,
    cut, node, op and strategy at fault."""
    step = build(case, train)
    if runner is not None:
        step.runner = runner
    want = reference(step)
    low = step.lowered
    ops = {name: low.core.node(i)["op"] for i, name in enumerate(low.node_names)}
    report = Report()
    split_somewhere = set()
    for factors in factors_list:
        rows = {name: strategy_rows(low, i, factors, replicate_cuts) for i, name in enumerate(low.node_names)}
        for j in range(max((len(r) for r in rows.values()), default=0)):
            chosen = {name: r[j % len(r)] for name, r in rows.items() if r}
            tiles = random_tilings(low, factors, j) if tilings == "random" else None
            plan = make_plan(low, factors, chosen, case.optimizer, tiles, train)
            where = (f"{case.id}{'' if train else ' (inference)'} cut {list(factors)} plan {chosen}"
                     + (f" tilings {tiles}" if tiles else ""))
            try:
                got = _run(step, plan)
                compare_results(got, want, where, rtol, atol)
            except Exception as e:  # name the node at fault, then re-raise
                blame = _blame(step, want, factors, chosen, ops, rtol, atol, tiles)
                raise AssertionError(blame or f"{where}: {type(e).__name__}: {e}") from e
            report.steps += 1
            for name, row in chosen.items():
                split_somewhere.add(name)
                report.checked.setdefault(ops[name], set()).add((tuple(factors), tuple(row)))
        report.seen.update((case.id, name, tuple(factors), tuple(r)) for name, rs in rows.items() for r in rs)
    if case.op not in ops.values() and at.ops.get(case.op).name not in ops.values():
        report.lowered.setdefault(at.ops.get(case.op).name, set()).update(
            op for name, op in ops.items() if name == "op" or name.startswith("op_"))
    for i, name in enumerate(low.node_names):
        if vetoed_vars(low, i):
            report.vetoed.setdefault(ops[name], set()).update(vetoed_vars(low, i))
        if name not in split_somewhere:
            veto = vetoed_vars(low, i)
            why = f"vetoes {veto}" if veto else "no TDL strategy at these shapes"
            report.unsplit.setdefault(ops[name], f"{case.id}: node {name}: {why}")
    return report


def _blame(step: Step, want, factors, chosen, ops, rtol, atol, tilings=None) -> Optional[str]:
    """The first node that, split alone along its strategy, breaks the step (a message)."""
    for name, row in chosen.items():
        plan = make_plan(step.lowered, factors, {name: row}, step.case.optimizer, tilings, step.train)
        where = (f"{step.case.id}{'' if step.train else ' (inference)'} cut {list(factors)}: node {name} "
                 f"(op {ops[name]}) split along {row}"
                 + (f" (tensor tilings {tilings})" if tilings else ""))
        try:
            compare_results(_run(step, plan), want, where, rtol, atol)
        except Exception as e:
            return f"{where}: {type(e).__name__}: {e}"
    return None


#: (op, TDL variable, cut factors, cut index): one strategy of an op at one cut of a nested split
Key = Tuple[str, str, Tuple[int, ...], int]
_KEYS: Dict[str, frozenset] = {}


def _row_keys(op: str, factors: Sequence[int], row: Sequence[str]) -> List[Key]:
    return [(op, v, tuple(factors), i) for i, v in enumerate(row) if v != "replicate"]


def strategy_keys(case: Case, factors_list: Sequence[Sequence[int]] = FACTORS,
                  replicate_cuts: bool = False) -> frozenset:
    """Every (op, variable, factors, cut index) a check of `case` at `factors_list` runs: the
    strategy rows of each node of its training step and of its forward graph served alone,
    from the TDL analysis (the graphs are built, no step runs; memoized by case id)."""
    memo = f"{case.id}@{factors_list}@{replicate_cuts}"
    if memo not in _KEYS:
        out = set()
        for train in (True, False):
            low = build(case, train).lowered
            for i in range(len(low.node_names)):
                op = low.core.node(i)["op"]
                for factors in factors_list:
                    for row in strategy_rows(low, i, factors, replicate_cuts):
                        out.update(_row_keys(op, factors, row))
        _KEYS[memo] = frozenset(out)
    return _KEYS[memo]


def checked_keys(report: Report) -> set:
    """The (op, variable, factors, cut index) keys of the strategy rows a report ran in checked steps."""
    return {k for op, rows in report.checked.items() for factors, row in rows for k in _row_keys(op, factors, row)}


def covering(cases: Sequence[Case], chosen: Sequence[Case], factors_list: Sequence[Sequence[int]] = FACTORS,
             replicate_cuts: bool = False, project: Callable = tuple) -> List[Case]:
    """Cases to add to `chosen` so that together they reach every strategy key (at
    `factors_list`, mapped by `project`: ``lambda k: k[:3]`` drops the cut index) any of
    `cases` reaches, known-bug cases aside: greedily the case adding the most keys not yet
    reached, the first in `cases` order on ties."""
    keys = {c.id: {project(k) for k in strategy_keys(c, factors_list, replicate_cuts)} for c in cases if not c.xfail}
    have = set().union(*(keys.get(c.id, ()) for c in chosen))
    added, pool = [], [c for c in cases if c.id in keys]
    while True:
        best = max(pool, key=lambda c: len(keys[c.id] - have), default=None)
        if best is None or not keys[best.id] - have:
            return added
        added.append(best)
        have |= keys[best.id]


def uncovered(report: Report, registered: Sequence[str]) -> Dict[str, str]:
    """Registered ops never split in a checked step, each with the reason known. An op the
    step lowers into others (BatchNorm into _bn_moments/_bn_stats/_bn_apply) counts as
    covered when each of those was split."""
    out = {}
    for op in sorted(registered):
        if op in report.checked:
            continue
        into = report.lowered.get(op)
        if into and all(o in report.checked for o in into):
            continue
        if into:
            never = sorted(o for o in into if o not in report.checked)
            out[op] = f"lowered into {sorted(into)}, of which {never} never split"
        else:
            out[op] = report.unsplit.get(op, "no case reaches it")
    return out


def summary(report: Report, registered: Sequence[str]) -> str:
    """A printable account: counts, per-op strategies covered, and ops not covered."""
    split = [op for op in registered if op in report.checked]
    lines = [f"strategy validator: {report.triples} (op, config, strategy) triples in {report.steps} "
             f"k-device steps; {len(split)} of {len(registered)} registered ops split"]
    for op in sorted(report.checked):
        by_cut: Dict[str, List[str]] = {}
        for factors, row in sorted(report.checked[op]):
            by_cut.setdefault("x".join(map(str, factors)), []).append("/".join(row))
        lines.append(f"  {op}: " + "; ".join(f"{cut}: {', '.join(sorted(set(v)))}" for cut, v in by_cut.items()))
    for op in sorted(report.lowered):
        lines.append(f"  {op}: lowered into {', '.join(sorted(report.lowered[op]))}")
    if report.vetoed:
        lines.append("vetoed by the op (never planned, not run): "
                     + "; ".join(f"{op}: {', '.join(sorted(v))}" for op, v in sorted(report.vetoed.items())))
    missing = uncovered(report, registered)
    if missing:
        lines.append(f"not covered ({len(missing)}):")
        lines += [f"  {op}: {why}" for op, why in missing.items()]
    return "\n".join(lines)
