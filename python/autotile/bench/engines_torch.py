"""Plans run by PyTorch DTensor (``autotile.torch.parallelize``) on 8 gloo CPU processes: per
module and plan, one SGD step's largest difference from the plain module's step (output,
gradients, updated parameters), the bytes the plan says the step moves (``plan.comm_bytes``;
autotile's execution graph of the plan moves exactly these in its fetches and reductions),
the collectives DTensor's ``CommDebugMode`` counts and their bytes in the same accounting
(ring collectives, bytes received summed over ranks), and how many module outputs the hooks
redistributed to the plan's layout.

    autotile bench engines-torch [--quick]
"""
from __future__ import annotations

import sys
import time

from . import common

DEVICES = 8
SHORT = {"all_reduce": "AR", "all_gather_into_tensor": "AG", "reduce_scatter_tensor": "RS",
         "all_to_all_single": "A2A", "broadcast": "BC"}


def megatron_rules():
    """Mesh-TF rules for the Transformer block on batch 2 x model 4: the batch over `batch`,
    q/k/v and ff1 split by output features, o and ff2 by input features over `model`."""
    return {"x": {0: "batch"}, "attn.[qkv].weight": {0: "model"}, "attn.[qkv].bias": {0: "model"},
            "ff1.weight": {0: "model"}, "ff1.bias": {0: "model"}, "attn.o.weight": {1: "model"},
            "ff2.weight": {1: "model"}, "*.bias": {}, "ln*": {}}


def cases(quick: bool):
    """(module name, factory, input shape, [(plan name, at.plan keyword arguments)])."""
    from ..torch import zoo

    mesh = {"batch": 2, "model": 4}
    yield "mlp (README)", zoo.MLP, (256, 784), [
        ("tofu", {"devices": DEVICES}), ("data", {"devices": DEVICES, "algorithm": "data"}),
        ("rules 2x4", {"mesh": mesh, "layout": {"fc1.weight": {0: "model"}, "data": {0: "batch"}}})]
    if quick:
        return
    yield "transformer block", zoo.Block, (16, 16, 32), [
        ("data", {"devices": DEVICES, "algorithm": "data"}), ("rules 2x4 (Megatron)", {"mesh": mesh,
                                                                                        "layout": megatron_rules()}),
        ("tofu", {"devices": DEVICES})]
    yield "cnn", zoo.CNN, (16, 1, 8, 8), [("data", {"devices": DEVICES, "algorithm": "data"}),
                                          ("tofu", {"devices": DEVICES})]


#: why a plan is not run: DTensor's sharding propagation on a mesh of three or more
#: dimensions did not finish the Transformer block's first step within 150 s per rank here
MAX_MESH_DIMS = 2


def _all_steps(rank, jobs):
    """Every job's :func:`autotile.torch.compare_step` on this rank; an exception (raised by
    every rank alike: DTensor's sharding rules are deterministic) becomes the job's error."""
    from ..torch import compare_step

    out = []
    for module, plan, model, inputs in jobs:
        try:
            out.append(compare_step(rank, module, plan, model, inputs))
        except Exception as e:  # the row says why
            out.append({"error": common.error_text(e, 90)})
    return out


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="the README MLP only")
    args = p.parse_args(argv)
    try:
        import torch

        import autotile as at
        import autotile.torch as att
    except ImportError as e:
        print(f"autotile bench engines-torch needs torch and onnx (pip install 'autotile[torch]'): {e}")
        return 1
    t0 = time.perf_counter()
    jobs, rows_meta = [], []
    for model_name, factory, shape, plans in cases(args.quick):
        torch.manual_seed(0)
        module = factory()
        x = torch.randn(*shape)
        sym = att.export(module, x)
        name = list(sym.torch_map.inputs.values())[0]
        for plan_name, kwargs in plans:
            plan = at.plan(sym, shapes={name: shape}, **kwargs)
            layout = att.plan_layout(plan)
            meta = {"model": model_name, "plan": plan_name, "plan_bytes": plan.comm_bytes,
                    "mesh": layout["mesh"]["shape"], "plan_obj": plan, "sym": sym}
            if len(layout["mesh"]["shape"]) > MAX_MESH_DIMS:
                meta["error"] = (f"mesh {'x'.join(map(str, layout['mesh']['shape']))}: parameters split differently "
                                 f"at each cut; DTensor's sharding propagation on a 3-dim mesh is too slow to run")
            else:
                meta["job"] = len(jobs)
                jobs.append((module, plan, sym, (x,)))
            rows_meta.append(meta)
    print(f"  {len(jobs)} steps on {DEVICES} gloo processes ...", file=sys.stderr)
    results = att.run_local(_all_steps, DEVICES, jobs, timeout=1200)
    raw, rows = [], []
    for meta in rows_meta:
        plan, sym = meta.pop("plan_obj"), meta.pop("sym")
        r = meta.get("error") and {"error": meta["error"]} or results[0][meta["job"]]
        both = att.beside_plan(plan, r.get("report", {"total_bytes": 0, "counts": {}, "bytes": {}}), sym)
        g = both["plan_graph"]
        plan_cell = (int(both["plan_bytes"]), f"{g['fetches']} fetches, {g['reductions']} reductions")
        if "error" in r:
            rows.append((meta["model"], meta["plan"], *plan_cell, "n/a", "n/a", "n/a", "n/a", "n/a", r["error"]))
        else:
            worst = {k: max(rr[meta["job"]]["diff"][k] / max(1.0, rr[meta["job"]]["scale"][k]) for rr in results)
                     for k in ("output", "grad", "param")}
            counts = " ".join(f"{SHORT.get(k, k)} {v}" for k, v in sorted(both["dtensor_counts"].items())) or "none"
            ratio = f"{both['dtensor_bytes'] / both['plan_bytes']:.2f}x" if both["plan_bytes"] else "-"
            rows.append((meta["model"], meta["plan"], *plan_cell, int(both["dtensor_bytes"]), ratio, counts,
                         f"{len(r['redistributed'])}/{len(r['unexpressed'])}",
                         f"{max(worst.values()):.1e}", ""))
        raw.append({**{k: v for k, v in meta.items() if k != "job"}, **r, "beside_plan": both})
    text = (f"plans run by DTensor (torch {torch.__version__}), {DEVICES} gloo CPU processes; one SGD step; "
            "ring accounting, bytes received summed over ranks\n"
            + common.table(("module", "plan", "plan bytes", "plan's execution graph", "DTensor bytes", "ratio",
                            "DTensor collectives", "redistributed/unexpressed", "max rel. diff", "not run"), rows))
    print(text)
    path = common.write_json("engines_torch.json", {"devices": DEVICES, "torch": torch.__version__,
                                                    "results": raw, "table": text})
    print(f"{time.perf_counter() - t0:.0f}s; raw numbers in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(common.run_main(main))
