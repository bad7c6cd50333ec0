"""SwapAdvisor's genetic search over schedules (thesis Ch. 4.4) for a plan that swaps.

The swap planner (csrc/exec/swap_plan.h) works on a fixed serial schedule; which schedule it
gets decides how well its copies hide behind compute. This module searches schedules as the
thesis does. A chromosome is a schedule, a topological order of the training graph's nodes
(the thesis's list encoding), and a memory-reuse gene, the hold: how long (in nodes of the
schedule) a swapped-out buffer keeps its memory past its last use before the gap, so that the
op that takes the memory next need not wait for the copy to the host (csrc/exec/swap_plan.h).
The fitness of one is the step time that ``autotile.sim.simulator.simulate`` gives for the
execution graph built on it with the swap plan at the budget; one whose arena still exceeds
the budget is infeasible.

* The first generation is the serial schedule (``schedule_order``) with no hold (the seed) and
  mutations of it with holds drawn from 0, 1, 2, 4 ... 2^(HOLD_LEVELS - 2) nodes (random
  schedules from scratch mostly do not fit: the thesis starts from random ones).
* Crossover (thesis Fig. 4.5): a random cut point CR; one child takes the first CR nodes of
  one parent and the rest in the other parent's order, the other child the reverse. Both are
  topological orders when the parents are. Each child takes the hold of the parent its
  prefix comes from.
* Mutation (thesis 4.4.2): a dataflow scheduler replays the schedule; at each step, with
  probability `mutation` it runs a random ready node, else the ready node that comes first in
  the schedule being mutated. The hold moves one level up or down with probability 1/3.
* Selection (thesis Eq. 4.1): among parents and children, each survives with probability
  softmax(t_norm / temperature), t_norm = (T_best - t) / T_best; the thesis's temperature is 1,
  under which step times a few percent apart are nearly equally likely, so the default here
  is sharper. The best schedule found always survives, so the result is never worse than the
  seed.

The thesis's chromosome carries a memory allocation (size classes and object counts of its
pool allocator) beside the schedule. autotile places every buffer of the augmented graph with
its own memory planner (csrc/exec/memory_plan.h) instead of a pool, so there are no size
classes to search; the hold stands in for that half: it decides which memory a new buffer may
take while a copy to the host is still under way, which is where a swapped step stalls.

The search is deterministic under `seed` (Python's ``random.Random``) unless `time_limit` cuts
it short; it reports each generation on stderr.
"""
from __future__ import annotations

import heapq
import math
import numbers
import random
import sys
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from .. import _core
from ..errors import Error

Order = Tuple[int, ...]
Gene = Tuple[Order, int]  # (schedule, hold level)
HOLD_LEVELS = 8  # hold level k: 0 nodes for k = 0, else 2^(k - 1) nodes
NODE = 6  # memory-clock units per node (csrc/exec/exec_build.cc)


def hold_units(level: int) -> int:
    """Memory-clock units a swapped-out buffer keeps its memory at hold level `level`."""
    return 0 if level == 0 else NODE << (level - 1)


@dataclass
class ScheduleSearch:
    """Result of :func:`genetic_schedule`. Times are simulated step seconds on `profile`."""

    graph: object  #: the best schedule's execution graph (autotile.execgraph.ExecGraph), swapped
    step_seconds: float  #: its simulated step
    order: List[str]  #: its schedule (node names of the lowered graph)
    hold: int  #: its hold: nodes a swapped-out buffer keeps its memory past its last use
    seed_graph: object  #: the serial schedule's execution graph, swapped at the same budget
    seed_step_seconds: float
    seed_order: List[str]
    profile: str
    budget: int
    evaluated: int  #: distinct schedules simulated
    infeasible: int  #: of those, how many did not fit the budget even with swapping
    generations: int  #: generations run (fewer than asked when the time limit ran out)
    history: List[float] = field(default_factory=list)  #: best step after each generation

    @property
    def speedup(self) -> float:
        """The seed schedule's step over the best one's (>= 1)."""
        return self.seed_step_seconds / self.step_seconds


class _Schedules:
    """Builds and prices execution graphs of one plan on given schedules (lowered once)."""

    def __init__(self, model, plan, budget: int, profile: str):
        from ..execgraph import transform

        base = transform(model, plan, swap=False)  # the lowered graph and the training graph
        self.lowered, self.training, self.plan = base.lowered, base.training, plan
        self.budget, self.profile = budget, profile
        self.tilings = [plan.tensor_tilings[n] for n in self.lowered.tensor_names]
        self.strategies = [plan.node_strategies[n] for n in self.lowered.node_names]
        core = self.lowered.core
        n = core.num_nodes
        self.succs: List[List[int]] = [[] for _ in range(n)]
        self.indegree = [0] * n
        for v in range(n):
            producers = {core.tensor(t)["producer"] for t in core.node(v)["inputs"]} - {-1}
            self.indegree[v] = len(producers)
            for p in producers:
                self.succs[p].append(v)
        self.steps: Dict[Gene, float] = {}
        self.infeasible = 0

    def graph(self, gene: Gene):
        """The swapped execution graph of `gene`, or None when its arena exceeds the budget."""
        from ..execgraph.graph import ExecGraph

        order, level = gene
        core = _core.build_exec_graph(self.lowered.core, self.plan.factors, self.tilings, self.strategies, True,
                                      self.budget, order=list(order), swap_hold=hold_units(level))
        if max(core.arena_bytes) > self.budget:
            return None
        return ExecGraph(core, self.lowered, self.training, self.plan)

    def step(self, gene: Gene) -> float:
        """Simulated step seconds of `gene` (inf when it does not fit), cached."""
        from ..sim.simulator import simulate

        if gene not in self.steps:
            eg = self.graph(gene)
            self.steps[gene] = math.inf if eg is None else simulate(eg, self.profile).step_seconds
            self.infeasible += eg is None
        return self.steps[gene]

    def mutate_gene(self, gene: Gene, rng: random.Random, p: float) -> Gene:
        """`gene`'s schedule mutated (mutate) and its hold one level up or down w.p. 1/3."""
        order, level = gene
        if rng.random() < 1 / 3:
            level = min(HOLD_LEVELS - 1, max(0, level + rng.choice((-1, 1))))
        return self.mutate(order, rng, p), level

    def mutate(self, order: Order, rng: random.Random, p: float) -> Order:
        """Thesis 4.4.2: replay `order` as a dataflow scheduler, running a random ready node
        with probability `p` at each step and otherwise the one `order` runs first."""
        position = {v: i for i, v in enumerate(order)}
        indegree = list(self.indegree)
        ready = [(position[v], v) for v in range(len(order)) if indegree[v] == 0]
        heapq.heapify(ready)
        out = []
        while ready:
            if len(ready) > 1 and rng.random() < p:
                k = rng.randrange(len(ready))
                ready[k], ready[-1] = ready[-1], ready[k]
                _, v = ready.pop()
                heapq.heapify(ready)
            else:
                _, v = heapq.heappop(ready)
            out.append(v)
            for s in self.succs[v]:
                indegree[s] -= 1
                if indegree[s] == 0:
                    heapq.heappush(ready, (position[s], s))
        return tuple(out)


def crossover(first: Sequence[int], second: Sequence[int], cut: int) -> Order:
    """Thesis Fig. 4.5: the first `cut` nodes of `second`, then the others in `first`'s order."""
    head = tuple(second[:cut])
    taken = set(head)
    return head + tuple(v for v in first if v not in taken)


def _select(pool: List[Gene], steps: Dict[Gene, float], size: int, rng: random.Random,
            temperature: float) -> List[Gene]:
    """The best of `pool`, then survivors drawn without replacement by softmax of the
    normalized step (thesis Eq. 4.1); schedules that do not fit only fill what is left."""
    ranked = sorted(pool, key=lambda o: steps[o])
    best = steps[ranked[0]]
    chosen = [ranked[0]]
    rest = [o for o in ranked[1:] if math.isfinite(steps[o])]
    while rest and len(chosen) < size:
        weights = [math.exp((best - steps[o]) / best / temperature) for o in rest]
        k = rng.choices(range(len(rest)), weights=weights)[0]
        chosen.append(rest.pop(k))
    chosen += [o for o in ranked[1:] if not math.isfinite(steps[o])][: size - len(chosen)]
    return chosen


def _check_search_args(profile, generations, population, mutation, seed, time_limit, temperature) -> None:
    """Error naming the argument of :func:`genetic_schedule` that is out of range or of the
    wrong type (before any graph is built)."""
    from ..sim.hardware import Hardware, load_profile

    def number(v) -> bool:
        return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)

    if not isinstance(profile, (str, Hardware)):
        raise Error(f"genetic_schedule: profile must be a hardware profile name or Hardware, got "
                    f"{type(profile).__name__}")
    load_profile(profile)  # an unknown name is an Error naming the shipped ones
    for name, value, low in (("generations", generations, 0), ("population", population, 2), ("seed", seed, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise Error(f"genetic_schedule: {name} must be an integer >= {low}, got {value!r}")
    if not number(mutation) or not 0.0 <= mutation <= 1.0:
        raise Error(f"genetic_schedule: mutation must be a probability in [0, 1], got {mutation!r}")
    if not number(temperature) or not temperature > 0:
        raise Error(f"genetic_schedule: temperature must be a positive number, got {temperature!r}")
    if time_limit is not None and (not number(time_limit) or time_limit < 0):
        raise Error(f"genetic_schedule: time_limit must be a non-negative number of seconds or None, "
                    f"got {time_limit!r}")


def genetic_schedule(model, plan, budget=None, profile: str = "dgx-a100", generations: int = 10,
                     population: int = 8, mutation: float = 0.05, seed: int = 0,
                     time_limit: Optional[float] = None, temperature: float = 0.02,
                     log: bool = True) -> ScheduleSearch:
    """Search schedules and holds for `plan` of `model` swapped at `budget` bytes per device
    (default: ``plan.swap_budget``), each priced by the simulator on `profile`; returns a
    :class:`ScheduleSearch` with the best execution graph and the serial schedule's (no hold).

    `population` schedules per generation (the seed among the first), `generations` rounds of
    crossover, mutation (per-step probability `mutation`) and selection; `time_limit` seconds
    stop it after the schedule being priced. Errors: no budget, bad sizes, or no schedule that
    fits the budget."""
    from .memory_fit import parse_bytes

    if budget is None:
        budget = getattr(plan, "swap_budget", None)
        if budget is None:
            raise Error("genetic_schedule needs a budget: pass budget= (bytes per device) or a plan that swaps")
    budget = parse_bytes(budget, "budget")
    _check_search_args(profile, generations, population, mutation, seed, time_limit, temperature)
    start = time.perf_counter()
    rng = random.Random(seed)
    space = _Schedules(model, plan, budget, profile)
    names = space.lowered.node_names

    def say(text):
        if log:
            print(f"swap search ({profile}): {text}", file=sys.stderr, flush=True)

    def out_of_time():
        return time_limit is not None and time.perf_counter() - start > time_limit

    seed_gene: Gene = (tuple(_core.schedule_order(space.lowered.core)), 0)
    seed_step = space.step(seed_gene)
    pop = [seed_gene]
    while len(pop) < population and not out_of_time():
        child = (space.mutate(seed_gene[0], rng, mutation), rng.randrange(HOLD_LEVELS))
        space.step(child)
        pop.append(child)
    pop = _select(list(dict.fromkeys(pop)), space.steps, population, rng, temperature)
    history = [space.steps[pop[0]]]
    say(f"seed {seed_step * 1e3:.3f} ms, first generation best {history[-1] * 1e3:.3f} ms "
        f"({len(space.steps)} schedules, {time.perf_counter() - start:.0f} s)")
    ran = 0
    for gen in range(generations):
        if out_of_time():
            break
        children = []
        for _ in range(max(1, population // 2)):
            a, b = rng.sample(pop, 2) if len(pop) > 1 else (pop[0], pop[0])
            cut = rng.randrange(1, len(seed_gene[0]))
            children += [space.mutate_gene((crossover(a[0], b[0], cut), b[1]), rng, mutation),
                         space.mutate_gene((crossover(b[0], a[0], cut), a[1]), rng, mutation)]
        for child in children:
            if out_of_time():
                break
            space.step(child)
        pool = list(dict.fromkeys(pop + [c for c in children if c in space.steps]))
        pop = _select(pool, space.steps, population, rng, temperature)
        history.append(space.steps[pop[0]])
        ran += 1
        say(f"generation {gen + 1}/{generations}: best {history[-1] * 1e3:.3f} ms "
            f"(hold {hold_units(pop[0][1]) // NODE} nodes) "
            f"({seed_step / history[-1]:.3f}x the seed), {len(space.steps)} schedules "
            f"({space.infeasible} over budget), {time.perf_counter() - start:.0f} s")
    best = pop[0]
    if not math.isfinite(space.steps[best]):
        raise Error(f"genetic_schedule: no schedule of the {len(space.steps)} tried fits "
                    f"budget={budget} bytes per device even with swapping")
    return ScheduleSearch(graph=space.graph(best), step_seconds=space.steps[best],
                          order=[names[v] for v in best[0]], hold=hold_units(best[1]) // NODE,
                          seed_graph=space.graph(seed_gene), seed_step_seconds=seed_step,
                          seed_order=[names[v] for v in seed_gene[0]], profile=profile, budget=budget,
                          evaluated=len(space.steps), infeasible=space.infeasible, generations=ran,
                          history=history)
