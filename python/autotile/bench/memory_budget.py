"""Plans that fit (issue #15): the largest batch that trains within a per-device memory
budget with the plain search (tofu), with the memory-aware search (tofu + budget), and with
swapping to host memory as well (+ swap, SwapAdvisor), and the simulated step time each costs
relative to the unconstrained plan at the same batch.

    autotile bench budget            # WResNet-152-4 and RNN-10-8K on 8 devices, 12 GB
    autotile bench budget --quick    # smaller models and budget (< 2 minutes)

Memory is the busiest device's arena under the execution graph's static memory plan (the
planner the runtime uses, COMPUTED, no run); step times are SIMULATED on the p2.8xlarge (K80,
PCIe 3 to host) and dgx-a100 (A100, PCIe 4 to host) profiles. The batch doubles until a
method no longer fits. Prints a table and writes bench/out/memory_budget.json.
SwapAdvisor's own results (thesis Ch. 5, one V100, vs an ideal GPU with infinite memory):
WResNet-152-10 at 95% of ideal throughput, RNN-8-8K at 70-80%."""
from __future__ import annotations

import argparse
import os
import sys

from .common import table, write_json


FULL = {"models": [("wresnet-152-4", 16), ("rnn-10-8k", 64)], "devices": 8, "budget": 12e9, "max_batch": 1024}
QUICK = {"models": [("wresnet-50-2", 16), ("rnn-4-4k", 64)], "devices": 8, "budget": 1.5e9, "max_batch": 256}
PROFILES = ("p2.8xlarge", "dgx-a100")
THESIS = {"wresnet": "SwapAdvisor: WResNet-152-10 95% of ideal", "rnn": "SwapAdvisor: RNN-8-8K 70-80% of ideal"}


def attempt(model, batch, devices, budget, method):
    """(plan, execution graph) of `method` at `batch`, or None when it does not fit."""
    import autotile as at
    from autotile.execgraph import transform

    try:
        if method == "tofu":
            plan = at.plan(model, devices=devices, batch=batch)
            eg = transform(model, plan)
            if max(eg.peak_memory(d) for d in range(devices)) > budget:
                return None
            return plan, eg
        plan = at.plan(model, devices=devices, batch=batch, device_memory=int(budget))
        if method == "tofu+budget" and plan.swap_budget is not None:
            return None  # needed swapping: not this method
        return plan, transform(model, plan)
    except at.Error:
        return None


def step_ratio(model, batch, devices, eg):
    """Simulated step time of `eg` over the unconstrained tofu plan's, per profile."""
    import autotile as at
    from autotile.execgraph import transform
    from autotile.sim.simulator import simulate

    free = transform(model, at.plan(model, devices=devices, batch=batch))
    return {p: simulate(eg, p).step_seconds / simulate(free, p).step_seconds for p in PROFILES}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    devices, budget = cfg["devices"], cfg["budget"]
    rows, out = [], []
    for model, first in cfg["models"]:
        for method in ("tofu", "tofu+budget", "+swap"):
            best, batch = None, first
            while batch <= cfg["max_batch"]:
                got = attempt(model, batch, devices, budget, method)
                print(f"  {model} {method} batch {batch}: {'fits' if got else 'does not fit'}", file=sys.stderr)
                if got is None:
                    break
                best = (batch, got)
                batch *= 2
            if best is None:
                rows.append([model, method, "-", "-", "-", "-", "-"])
                out.append({"model": model, "method": method, "batch": None})
                continue
            b, (plan, eg) = best
            ratio = step_ratio(model, b, devices, eg)
            peak = max(eg.peak_memory(d) for d in range(devices))
            rows.append([model, method, b, f"{peak / 1e9:.2f} GB", f"{plan.comm_bytes / 1e9:.2f} GB",
                         f"{ratio['p2.8xlarge']:.3f}", f"{ratio['dgx-a100']:.3f}"])
            out.append({"model": model, "method": method, "batch": b, "peak_bytes": peak,
                        "comm_bytes": plan.comm_bytes, "swapped": plan.swap_budget is not None,
                        "step_vs_unconstrained": ratio})
    print(f"budget {budget / 1e9:.1f} GB per device, {devices} devices")
    print(table(["model", "method", "largest batch", "peak/device", "comm/step", "step vs free (p2.8xlarge)",
                 "step vs free (dgx-a100)"], rows))
    print("\n" + "; ".join(THESIS.values()))
    write_json("memory_budget.json", {"budget": budget, "devices": devices, "rows": out, "quick": args.quick})
    return 0


if __name__ == "__main__":
    sys.exit(main())
