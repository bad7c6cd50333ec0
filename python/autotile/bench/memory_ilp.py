"""How close the memory-aware search gets to the exact memory-constrained plan (issue #15).

For each model: the unconstrained tofu plan holds H0 bytes per device (all tensors together,
planner/ilp_memory.py) and a plan splitting everything would hold Hmin. For bounds between
them, the memory-aware search's multiplier schedule (planner/memory_fit.search_weights on the
held bytes) against the exact optimum of the joint integer program with the held bytes bounded
(planner/ilp_memory.constrained_optimum): communication per step of each, and their ratio
(1.0000 = the search found the constrained optimum). Then the budget the search really works
to, the execution graph's arena: the search's plan against the integer program's, its bound
bisected to the least-communication solution whose arena fits (the program cannot express
liveness). Models small enough for the joint program (bench/optimality.py's joint column).

    autotile bench memory-ilp            # mlp b256 on 4 and 8, alexnet b128 and vgg16 b64 on 4
    autotile bench memory-ilp --quick    # mlp b256 on 4 (CI)
"""
from __future__ import annotations

import contextlib
import os
import sys
import time

from . import common

FULL = [("mlp", 256, 4), ("mlp", 256, 8), ("alexnet", 128, 4), ("vgg16", 64, 4)]
QUICK = [("mlp", 256, 4)]
FRACTIONS = (0.75, 0.5, 0.25)  # bound = Hmin + f (H0 - Hmin)


class Case:
    """One model's lowered graph, its DP search at a memory weight, and measures of plans."""

    def __init__(self, model: str, batch: int, devices: int, ilp_seconds: float):
        from autotile.planner import lowered_training_graph
        from autotile.planner.ilp_memory import tensor_bytes

        self.model, self.batch, self.devices, self.ilp_seconds = model, batch, devices, ilp_seconds
        self.lowered = lowered_training_graph(model, batch=batch, replicate_fallback=True)[3]
        self.nbytes = tensor_bytes(self.lowered)

    def search(self, w: float) -> dict:
        from autotile import _core

        return _core.plan_graph(self.lowered.core, self.devices, "tofu", None, True, memory_weight=w)

    def held(self, raw: dict) -> float:
        from autotile.planner.ilp_memory import held_bytes

        return held_bytes(raw["tensor_tilings"], raw["factors"], self.nbytes)

    def arena(self, raw: dict) -> int:
        from autotile.planner.memory_fit import peak_bytes

        return peak_bytes(self.lowered, raw)

    def exact(self, bound: float):
        """The constrained joint optimum as a raw plan (None when no plan holds that little)."""
        from autotile import Error
        from autotile.planner.ilp_memory import constrained_optimum

        try:
            with _quiet_stdout():  # HiGHS's MIP solver prints debugging lines on the C stdout
                j = constrained_optimum(self.lowered.core, self.devices, self.nbytes, bound,
                                        replicate_fallback=True, time_limit=self.ilp_seconds)
        except Error as e:
            if "no solution" in str(e) or "infeasible" in str(e).lower():
                return None
            raise
        return j


@contextlib.contextmanager
def _quiet_stdout():
    sys.stdout.flush()
    saved = os.dup(1)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 1)
        try:
            yield
        finally:
            os.dup2(saved, 1)
            os.close(saved)


def held_rows(case: Case, log):
    """Rows comparing search and program at bounds on the held bytes."""
    from autotile.planner.memory_fit import search_weights

    free = case.search(0.0)
    h0, hmin = case.held(free), float(case.nbytes.sum()) / case.devices
    rows, raw = [], []
    for f in FRACTIONS:
        bound = hmin + f * (h0 - hmin)
        t0 = time.perf_counter()
        got = search_weights(case.search, case.held, bound)
        t_search = time.perf_counter() - t0
        j = case.exact(bound)
        search_comm = None if got is None else float(got[0]["total_bytes"])
        exact_comm = None if j is None else float(j["total_bytes"])
        log(f"  {case.model} b{case.batch} on {case.devices}, held <= {bound / 1e6:.1f} MB: search "
            f"{_mb(search_comm)}, program {_mb(exact_comm)}")
        ratio = (search_comm / exact_comm if exact_comm else (1.0 if search_comm == 0 else None)) \
            if search_comm is not None and exact_comm is not None else None
        rows.append([f"{case.model} b{case.batch}", case.devices, f"{f:g}", f"{bound / 1e6:.1f} MB",
                     _mb(search_comm), _mb(got and got[1]), f"{t_search:.1f} s", _mb(exact_comm),
                     _mb(j and j["held_bytes"]), "-" if j is None else f"{j['seconds']:.1f} s"
                     + ("" if j["optimal"] else f" (gap {j['gap']:.1%})"),
                     "-" if ratio is None else f"{ratio:.4f}"])
        raw.append({"model": case.model, "batch": case.batch, "devices": case.devices, "fraction": f,
                    "bound": bound, "search_comm": search_comm, "search_held": got and got[1],
                    "exact_comm": exact_comm, "exact_held": j and j["held_bytes"],
                    "exact_optimal": j and j["optimal"], "ratio": ratio})
    return rows, raw, (free, h0, hmin)


def arena_row(case: Case, free, h0: float, hmin: float, log):
    """The search against the program at an arena budget halfway between the unconstrained
    plan's arena and the smallest the search reaches."""
    from autotile.planner.memory_fit import search_weights

    a0 = case.arena(free)
    a_min = min(case.arena(case.search(w)) for w in (4.0 ** 3, 4.0 ** 6))
    budget = (a0 + a_min) / 2
    got = search_weights(case.search, case.arena, budget)
    # the program: its optimum with no tighter bound than the unconstrained plan's (at least as
    # cheap as that plan), then its held-bytes bound bisected for the cheapest solution that fits
    best = None

    def consider(bound):
        j = case.exact(bound)
        if j is None:
            return None  # no plan holds that little: loosen
        a = case.arena({k: j[k] for k in ("factors", "tensor_tilings", "node_strategies")})
        if a > budget:
            return False
        nonlocal best
        if best is None or j["total_bytes"] < best[0]:
            best = (float(j["total_bytes"]), a)
        return True

    if not consider(h0):
        lo, hi = hmin, h0
        for _ in range(6):
            mid = (lo + hi) / 2
            if consider(mid) is not False:
                lo = mid
            else:
                hi = mid
    log(f"  {case.model} b{case.batch} on {case.devices}, arena <= {budget / 1e6:.1f} MB: search "
        f"{_mb(got and got[0]['total_bytes'])}, program {_mb(best and best[0])}")
    ratio = got[0]["total_bytes"] / best[0] if got is not None and best is not None and best[0] > 0 else None
    return ([f"{case.model} b{case.batch}", case.devices, _mb(a0), _mb(budget), _mb(got and got[0]["total_bytes"]),
             _mb(got and got[1]), _mb(best and best[0]), _mb(best and best[1]), "-" if ratio is None else f"{ratio:.4f}"],
            {"model": case.model, "devices": case.devices, "arena_unconstrained": a0, "budget": budget,
             "search_comm": got and float(got[0]["total_bytes"]), "search_arena": got and got[1],
             "program_comm": best and best[0], "program_arena": best and best[1], "ratio": ratio})


def _mb(x) -> str:
    return "-" if x is None else f"{float(x) / 1e6:.1f} MB"


def main(argv=None) -> int:
    p = common.arg_parser(__doc__.split("\n")[0])
    p.add_argument("--ilp-seconds", type=float, default=120.0, help="time limit of each integer program")
    args = p.parse_args(argv)
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    t0 = time.perf_counter()
    held, arena, raw = [], [], []
    for model, batch, devices in QUICK if args.quick else FULL:
        case = Case(model, batch, devices, args.ilp_seconds)
        rows, r, (free, h0, hmin) = held_rows(case, log)
        held += rows
        raw += r
        row, r = arena_row(case, free, h0, hmin, log)
        arena.append(row)
        raw.append(r)
    text = ("Bytes held per device bounded (all tensors, COMPUTED): the memory-aware search's multiplier schedule vs "
            "the exact constrained joint program; bound = Hmin + f (H0 - Hmin)\n"
            + common.table(["model", "devices", "f", "held bound", "search comm", "search held", "search time",
                            "exact comm", "exact held", "exact time", "search/exact"], held)
            + "\n\nArena budget halfway between the unconstrained arena and the smallest the search reaches: the "
            "search vs the program (its held bound bisected to the cheapest solution whose arena fits)\n"
            + common.table(["model", "devices", "unconstrained arena", "budget", "search comm", "search arena",
                            "program comm", "program arena", "search/program"], arena))
    print(text)
    common.write_json("memory_ilp.json", {"rows": raw, "table": text})
    print(f"\n{time.perf_counter() - t0:.0f}s; raw numbers in {common.out_path('memory_ilp.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(common.run_main(main))
