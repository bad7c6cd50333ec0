"""Plans that fit a per-device memory budget (memory-aware search).

The search minimises bytes moved. With a budget it minimises bytes moved + w * bytes held
per device (csrc/search/memory_term.h: every tensor's tile on one device, weighted by w), and
this module searches w: each candidate plan is measured by the memory planner the runtime
uses (the execution graph's per-device arena, communication buffers included), and the
cheapest plan (by communication) whose peak fits is returned. When the plain plan (w = 0)
fits, it is returned unchanged. The search over w is a coarse geometric scan (w = 4^i) up to
the first fitting weight, then a bisection between the last weight that did not fit and the
first that did; the cost is a handful of searches and execution-graph builds. The scan ends
early once the weight has taken effect and the peak stops falling: the larger
weights then return the same plan again (GPT-2 large x8 at 12 GB: the same plan from w = 16
to 4096), so the scan would only repeat it. The bisection does not measure a plan that moves no
fewer bytes than one already found to fit: it could not be returned (LLaMA-7B x64 at 8 GB: two
of its six 64-device builds). A candidate's arena is measured on an arena-only execution graph
of one device per class of devices with the same memory plan (csrc/exec/node_template.h; the
other devices get their class's arena), built from one template per kind of node.
"""
from __future__ import annotations

import math
import numbers
import re
from typing import Callable, Optional, Tuple

from ..errors import Error
from .plan import _fmt_bytes

_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000 ** 2, "mb": 1000 ** 2, "g": 1000 ** 3, "gb": 1000 ** 3,
          "t": 1000 ** 4, "tb": 1000 ** 4, "kib": 1024, "mib": 1024 ** 2, "gib": 1024 ** 3, "tib": 1024 ** 4}


#: The largest budget: the core keeps byte counts in int64.
MAX_BYTES = 2 ** 63 - 1


def parse_bytes(value, what: str = "device_memory") -> int:
    """A byte count from an int or a string with a unit ("16GiB", "512 MB", "1.5e9")."""
    if isinstance(value, bool):
        raise Error(f"{what} must be a number of bytes or a string such as '16GiB', got {value!r}")
    if isinstance(value, numbers.Real):  # NumPy integers and floats too
        if not math.isfinite(value) or value <= 0:
            raise Error(f"{what} must be a positive number of bytes, got {value!r}")
        if value > MAX_BYTES:
            raise Error(f"{what}={value!r} bytes is more than any device holds (at most 2^63 - 1 bytes)")
        if value < 1:  # int() would floor it to 0, refused then as a budget nobody gave
            raise Error(f"{what}={value!r} is less than one byte")
        return int(value)
    if isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", value)
        if m and m.group(2).lower() in _UNITS:
            n = float(m.group(1)) * _UNITS[m.group(2).lower()]
            if n > MAX_BYTES:  # '1e309' is inf: no int, and no budget the core could hold
                raise Error(f"{what}={value!r} is more than any device holds (at most 2^63 - 1 bytes)")
            if 0 < n < 1:
                raise Error(f"{what}={value!r} is less than one byte")
            if n > 0:
                return int(n)
        raise Error(f"{what}={value!r}: expected a positive size with a unit of B, KB, MB, GB, TB, KiB, MiB, GiB "
                    "or TiB (e.g. '16GiB')")
    raise Error(f"{what} must be a number of bytes or a string such as '16GiB', got {type(value).__name__}")


def _exec_graph(lowered, raw: dict, swap_budget: int = 0, arena_only: bool = False, arena_limit: int = 0):
    """The core execution graph of a raw plan; an arena-only one is built for one device of
    each class of devices with the same memory plan (``classes``)."""
    from .. import _core

    return _core.build_exec_graph(lowered.core, raw["factors"], raw["tensor_tilings"], raw["node_strategies"], True,
                                  swap_budget, arena_only=arena_only, arena_limit=arena_limit, classes=arena_only)


def peak_bytes(lowered, raw: dict, swap_budget: int = 0) -> int:
    """The largest per-device arena of the execution graph of a raw core plan (with swap
    planning to `swap_budget` when given). Without swapping only the memory plan's sizes are
    built (``arena_only``: no dependencies, one device of each class of devices with the same
    memory plan; the same arenas)."""
    return int(max(_exec_graph(lowered, raw, swap_budget, arena_only=not swap_budget).arena_bytes))


def largest_working_set(lowered, raw: dict) -> Tuple[int, str, int]:
    """(bytes, node name, device) of the compute op that needs the most memory at once under a
    raw plan: all its inputs are on its device while it runs, and so are its outputs (which
    may take the place of inputs that die there, hence the larger of the two sums). No
    swapping brings a device below that."""
    eg = _exec_graph(lowered, raw)
    best = (0, "", 0)
    for i in range(eg.num_ops):
        op = eg.op(i)
        if op["kind"] != "compute":
            continue
        held = max(sum(eg.buffer(b)["bytes"] for b in set(op["inputs"]) if b >= 0),
                   sum(eg.buffer(b)["bytes"] for b in set(op["outputs"])))
        if held > best[0]:
            best = (held, lowered.node_names[op["node"]], op["device"])
    return best


def check_tiles_can_fit(lowered, devices: int, budget: int) -> None:
    """Error naming the tensor whose smallest possible tile (split over every device) is
    larger than the budget on its own: no plan can hold it."""
    nbytes = tensor_bytes(lowered)
    if not len(nbytes):
        return
    worst = int(nbytes.argmax())
    tile = nbytes[worst] / devices
    if tile > budget:
        raise Error(f"device_memory={_fmt_bytes(budget)} is smaller than the smallest tile any plan can give "
                    f"tensor '{lowered.tensor_names[worst]}' {tuple(lowered.tensor_shapes[worst])}: "
                    f"{_fmt_bytes(tile)} even split over all {devices} devices")


def tensor_bytes(lowered):
    """Bytes of every tensor of a lowered graph, by tensor id (a NumPy array)."""
    import numpy as np

    return np.array([float(np.prod(s, dtype=np.float64)) * np.dtype(d).itemsize
                     for s, d in zip(lowered.tensor_shapes, lowered.tensor_dtypes)])


#: The largest memory weight the scan tries.
MAX_WEIGHT = 4.0 ** 6


def plan_key(raw: dict) -> tuple:
    """What decides a raw plan's execution graph: its tilings and strategies (hashable)."""
    return (tuple(raw["factors"]), tuple(map(tuple, raw["tensor_tilings"])), tuple(map(tuple, raw["node_strategies"])))


def search_weights(search: Callable[[float], dict], measure: Callable[[dict], float], bound: float,
                   tried: Optional[list] = None, full_scan: bool = False) -> Optional[Tuple[dict, float, float]]:
    """(raw plan, its measure, weight) of the cheapest plan (by communication) found whose
    `measure` is at most `bound`, or None when no weight reaches it; `search(weight)` returns a
    raw core plan. The weights: 0, then a geometric scan 4^i / 64 to the first that fits, then
    a geometric bisection between the last that missed and the first that fit; every plan tried
    is appended to `tried` as (weight, comm, measure). A plan met again is not measured again.

    The scan ends without a fit when two weights in a row return the same plan, one that moves
    more bytes than the plain plan, and so does the largest weight: the search's cost is linear in the weight for
    each plan, so a plan cheapest at two weights is cheapest between them, and the weights
    left would return it again (the search is greedy across cuts, so this is not a proof:
    `full_scan` tries every weight to :data:`MAX_WEIGHT`). For the same reason the scan skips
    the weights below 1 (or below 1/4) when that weight returns the plain plan.

    In the bisection a new plan that moves no fewer bytes than the best fitting one is not
    measured (it cannot be returned): the bisection goes up from it, and the second such plan
    ends it. With an exact search only a tie could appear below the best's weight (its cost
    is linear in the weight); the greedy one returns them (LLaMA-7B x64: w = 2 and 2.38 move
    more bytes than w = 4's plan), and measuring them is a 64-device build each. `full_scan`
    measures every one and always takes 5 steps."""
    tried = [] if tried is None else tried
    measured: dict = {}
    searched: dict = {}  # weight -> (raw plan, its key)
    visited: dict = {}

    def plan_at(w):
        if w not in searched:
            raw = search(w)
            searched[w] = raw, plan_key(raw)
        return searched[w]

    def attempt(w):
        if w in visited:
            return visited[w]
        raw, key = plan_at(w)
        if key not in measured:
            measured[key] = measure(raw)
        m = measured[key]
        tried.append((w, float(raw["total_bytes"]), m))
        visited[w] = raw, m, key
        return visited[w]

    raw, m, previous = attempt(0.0)
    if m <= bound:
        return raw, m, 0.0
    plain_comm = raw["total_bytes"]
    best: Optional[Tuple[dict, float, float]] = None
    low, high = 0.0, None
    w = 1.0 / 64
    if not full_scan:
        # The small weights often return the plain plan (LLaMA-7B x64: to w = 1/4): when a
        # larger one does (by the argument above, so does every weight below it), the scan
        # starts there; the probes are searched, not measured, and count as tried only when
        # the scan reaches them.
        for probe in (1.0, 0.25):
            if plan_at(probe)[1] == previous:
                low, w = probe / 4, probe
                break
    while w <= MAX_WEIGHT:
        raw, m, key = attempt(w)
        if m <= bound:
            best, high = (raw, m, w), w
            break
        if (not full_scan and key == previous and raw["total_bytes"] > plain_comm and w < MAX_WEIGHT
                and attempt(MAX_WEIGHT)[2] == key):
            return None  # the plan stopped changing: the weights left return it again
        low, w, previous = w, w * 4, key
    if high is None:
        return None
    # bisection (geometric) between a weight that misses and one that fits
    losers = 0  # plans met in it that move no fewer bytes than the best, not measured
    for _ in range(5):
        mid = math.sqrt(low * high) if low > 0 else high / 4
        raw, key = plan_at(mid)
        if not full_scan and key not in measured and raw["total_bytes"] >= best[0]["total_bytes"]:
            # it cannot be returned (a plan that fits moves no more bytes): not measured; the
            # bisection goes up, towards the best, and gives up at the second such plan
            losers += 1
            if losers == 2:
                break
            low = mid
            continue
        raw, m, _ = attempt(mid)
        if m <= bound:
            high = mid
            if raw["total_bytes"] < best[0]["total_bytes"]:
                best = (raw, m, mid)
        else:
            low = mid
    # any fitting plan seen (the weight's effect is not monotone) competes on communication
    return best


def fit(search, lowered, devices: int, budget: int, swap: bool = True,
        full_scan: bool = False) -> Tuple[dict, int, float, list]:
    """(raw plan, its peak, the weight used, [(weight, comm, peak)] tried) for the cheapest
    plan found whose per-device peak fits `budget` (:func:`search_weights` on the execution
    graph's arena); `search(weight)` returns a raw core plan. A tried plan that holds more
    than the budget at once is not placed: its peak in `tried` is that live peak, a lower bound. When no partition fits and `swap`
    is set, the plan with the smallest peak is returned with ``raw["swap_budget"] = budget``:
    its execution graph swaps tensors to host memory. `full_scan`: see :func:`search_weights`."""
    check_tiles_can_fit(lowered, devices, budget)
    tried: list = []
    raws: dict = {}  # by weight: the plan with the smallest peak is swapped when none fits

    def kept(w):
        raws[w] = search(w)
        return raws[w]

    # A plan some device of which holds more than the budget at once cannot fit: its memory
    # plan is not placed, and its measure is that live peak, a lower bound.
    bounded: set = set()  # keys of the plans measured so

    def measure(raw):
        eg = _exec_graph(lowered, raw, arena_only=True, arena_limit=budget)
        if max(eg.live_peak_bytes) > budget:
            bounded.add(plan_key(raw))
        return int(max(eg.arena_bytes))

    got = search_weights(kept, measure, budget, tried, full_scan)
    if got is not None:
        return got[0], got[1], got[2], tried
    # No partition fits: swap tensors to host memory (SwapAdvisor) on the smallest plan (of
    # equal peaks, the one of the smallest weight); a bound is made exact only where it could win.
    smallest, exact = None, {}
    for w, comm, peak in sorted(tried, key=lambda t: (t[2], t[0])):
        if smallest is not None and peak > smallest[2]:
            break
        key = plan_key(raws[w])
        if key in bounded:
            if key not in exact:
                exact[key] = peak_bytes(lowered, raws[w])
            peak = exact[key]
        if smallest is None or (peak, w) < (smallest[2], smallest[0]):
            smallest = (w, comm, peak)
    raw = raws[smallest[0]]
    swapped = peak_bytes(lowered, raw, budget) if swap else None
    if swapped is not None and swapped <= budget:
        raw["swap_budget"] = budget
        return raw, swapped, smallest[0], tried
    held, node, device = largest_working_set(lowered, raw)
    floor = ""
    if swap and held <= budget:  # swapping stopped above the operands' bound: say where it can fit
        least, eg = smallest_budget(lowered, raw, budget, smallest[2], swapped)
        floor = (f"; the smallest budget that works is {_fmt_bytes(least)} ({least} bytes, to within "
                 f"{100 * SMALLEST_BUDGET_TOLERANCE:g}%), " + why_budget(lowered, eg, least))
    raise Error(f"no plan fits device_memory={_fmt_bytes(budget)} on {devices} devices: the smallest "
                f"per-device peak found is {_fmt_bytes(smallest[2])} (memory weight {smallest[0]:g})"
                + (f", {_fmt_bytes(swapped)} with tensors swapped to host memory" if swapped else "")
                + (f"; node '{node}' alone needs {_fmt_bytes(held)} at once on device {device} (its operands), "
                   "which no swapping can lower" if held > budget else floor)
                + "; use more devices, a smaller batch, or a larger budget")


#: how close (relative) smallest_budget's answer is to the smallest budget that works
SMALLEST_BUDGET_TOLERANCE = 0.005


def smallest_budget(lowered, raw: dict, budget: int, top: int, guess: Optional[int]):
    """(bytes, swapped exec graph or None) of the smallest budget above `budget` at which the
    raw plan fits, to within SMALLEST_BUDGET_TOLERANCE: a bisection between `budget` (that
    fails) and `top` (the plan's own peak, which fits unswapped), each budget tried by swapping
    to it as :func:`fit` does. `guess` (the arena swapping reached below `budget`: the point
    where nothing more moved) is tried first, then just under it; usually that ends it."""
    lo, hi, hi_eg = budget, top, None
    probes = [guess, int(guess * (1 - SMALLEST_BUDGET_TOLERANCE))] if guess else []
    while hi - lo > max(1, int(hi * SMALLEST_BUDGET_TOLERANCE)):
        mid = probes.pop(0) if probes else (lo + hi) // 2
        if not lo < mid < hi:
            continue
        eg = _exec_graph(lowered, raw, mid)
        if max(eg.arena_bytes) <= mid:
            hi, hi_eg = mid, eg
        else:
            lo = mid
    return hi, hi_eg


def why_budget(lowered, eg, least: int) -> str:
    """Why a swapped plan needs `least` bytes: where the swap planner stopped on the fullest
    device. It counts a buffer live from its producer's time to its last reader's (an output
    does not take its input's memory there) and stops at the busiest point where nothing live
    is idle (csrc/exec/swap_plan.cc): the node running there and what it holds. `eg` None:
    the plan fits only unswapped."""
    if eg is None:
        return "the peak of the plan itself: swapping lowers no budget below it"
    device = max(range(len(eg.arena_bytes)), key=lambda d: eg.arena_bytes[d])
    ops = [eg.op(i) for i in range(eg.num_ops)]
    live = [b for b in (eg.buffer(i) for i in range(eg.num_buffers))
            if b["device"] == device and not b["host"] and b["bytes"]]
    count = {}  # time -> bytes live then (the swap planner's count: ends inclusive)
    for b in live:
        count[b["live"][0]] = 0
    for t in count:
        count[t] = sum(b["bytes"] for b in live if b["live"][0] <= t <= b["live"][1])
    busiest = min(count, key=lambda t: (-count[t], t))
    there = [b for b in live if b["live"][0] <= busiest <= b["live"][1]]
    nodes = sorted({lowered.node_names[o["node"]] for o in ops
                    if o["device"] == device and o["time"] == busiest and o["kind"] == "compute" and o["node"] >= 0})
    in_use = [b for b in there if (b["producer"] >= 0 and ops[b["producer"]]["time"] == busiest)
              or any(ops[r]["time"] == busiest for r in b["readers"])]
    idle = [b for b in there if not any(b is u for u in in_use)]

    def names(group):
        group = sorted(group, key=lambda b: -b["bytes"])
        text = ", ".join(f"{lowered.tensor_names[b['tensor']]} {_fmt_bytes(b['bytes'])}" for b in group[:6])
        return text + (f" and {len(group) - 6} more" if len(group) > 6 else "")

    where = f"node{'s' if len(nodes) > 1 else ''} {', '.join(repr(n) for n in nodes)}" if nodes else "its busiest point"
    return (f"because swapping stops on device {device} at {where}, which holds {_fmt_bytes(count[busiest])} at once "
            f"by the swap planner's count (a buffer from its producer to its last reader, an output beside its "
            f"inputs): {names(in_use)} in use there"
            + (f", and {names(idle)} held across it" if idle else ", nothing idle to move")
            + f"; every other point is brought to that level, and the memory plan places the device's buffers "
            f"(outputs in their inputs' memory) in {_fmt_bytes(int(eg.arena_bytes[device]))}")
