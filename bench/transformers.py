"""Transformers in the zoo: parameter counts, tofu's plan against the hand layouts people use,
and how long planning a LLaMA-7B takes (issue #12, "Search results that matter to users").

    python3 bench/transformers.py            # GPT-2 small, BERT-base at 8 and 64 devices (~1 min)
    python3 bench/transformers.py --full     # + Mesh-TF's 4.9B decoder at 512 devices (16 x 32)
    python3 bench/transformers.py --quick    # 2-layer GPT-2/BERT at 8 devices, LLaMA-7B timing (CI)

Bytes per training step (all devices together, the planner's cost model) of:
  tofu      the search, on `devices` devices (one axis);
  data      data parallelism (algorithm="data");
  megatron  Megatron-LM's layout (Shoeybi et al. 2019): attention heads split (q, k, v weights
            by their output rows, the output projection by its input columns), the first MLP
            weight by columns and the second by rows, over a `model` mesh axis of 4 (the
            largest of 8, 4, 2 that divides the 12 heads of GPT-2 small / BERT-base; 32 for
            the Mesh-TF decoder) with the batch over the other axis;
  mesh-tf   Mesh-TF Sec 9: [("batch", "rows"), ("vocab", "cols"), ("d_ff", "cols"),
            ("heads", "cols")] on the same mesh (rows x cols = batch axis x model axis).
The hand layouts are layout rules over the dimension names the zoo's parameters declare
(docs/layouts.md): they fix every parameter and the input as the layout says, and the search
completes the rest (activations, gradients) at its cheapest, in the same cost model. A hand
layout's figure is therefore the least any plan with its parameter layout costs. tofu must
never be worse than any of them; a row where it is says so in the last column.

Vocabularies are padded to a multiple of 128 as Megatron-LM pads them (GPT-2 50257 -> 50304,
BERT 30522 -> 30592) so that every layout can split them; the parameter counts use the
published vocabularies.

Writes bench/out/transformers.json."""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import error_text, table, use_tree_package, write_json  # noqa: E402

use_tree_package()

#: zoo name -> published parameter count (and where it is published)
PUBLISHED = {
    "gpt2-small": (124_439_808, "Hugging Face gpt2"), "gpt2-medium": (354_823_168, "Hugging Face gpt2-medium"),
    "gpt2-large": (774_030_080, "Hugging Face gpt2-large"), "gpt2-xl": (1_557_611_200, "Hugging Face gpt2-xl"),
    "bert-base": (109_482_240, "bert-base-uncased card: 110M"), "bert-large": (335_141_888, "bert-large card: 340M"),
    "llama-7b": (6_738_415_616, "LLaMA-7B (HF config)"), "llama-13b": (13_015_864_320, "LLaMA-13B (HF config)"),
    "vit-base": (86_567_656, "timm vit_base_patch16_224"), "vit-large": (304_326_632, "timm vit_large_patch16_224"),
}
#: extra weights the zoo's heads add to the published backbone (BERT: 2-class classifier)
HEAD = {"bert-base": 768 * 2 + 2, "bert-large": 1024 * 2 + 2}

MEGATRON = [("batch", "rows"), ("heads", "cols"), ("d_ff", "cols")]
MESH_TF = [("batch", "rows"), ("vocab", "cols"), ("d_ff", "cols"), ("heads", "cols")]


def parameter_counts(names):
    from autotile import models
    from autotile.autodiff.graph import default_data_names
    from autotile.models.transformer import MESH_TF_TABLE2

    import numpy as np

    def count(sym):
        data = set(default_data_names(sym))
        shapes = sym.infer_shape()[0]
        return sum(int(np.prod(s)) for n, s in zip(sym.list_arguments(), shapes) if n not in data)

    rows = []
    for name in names:
        published, source = PUBLISHED[name]
        got = count(models.get(name, batch=1, **({} if name.startswith("vit") else {"seq": 16}))) - HEAD.get(name, 0)
        rows.append({"model": name, "parameters": got, "published": published, "source": source,
                     "match": got == published})
    for (d_ff, heads), billions in sorted(MESH_TF_TABLE2.items()):
        got = count(models.get(f"transformer-{d_ff}-{heads}", batch=1, seq=16))
        rows.append({"model": f"transformer-{d_ff}-{heads}", "parameters": got, "published": billions * 1e9,
                     "source": "Mesh-TF Table 2 (2 decimals, billions)", "match": round(got / 1e9, 2) == billions})
    return rows


def _model_axis(heads: int, devices: int) -> int:
    for c in (32, 8, 4, 2):
        if heads % c == 0 and devices % c == 0 and c <= devices:
            return c
    return 1


def compare(name, sizes, heads, devices, batch, mesh=None):
    """Bytes of tofu, data parallelism and the two hand layouts for one configuration."""
    import autotile as at
    from autotile import models

    sym = models.get(name, batch=batch, **sizes)
    if mesh is None:
        cols = _model_axis(heads, devices)
        mesh = {"rows": devices // cols, "cols": cols}
    row = {"model": name, "layers": sizes.get("layers", "all"), "devices": devices, "batch": batch,
           "mesh": f"{mesh['rows']}x{mesh['cols']}"}
    runs = [("tofu", dict(devices=devices)), ("data", dict(devices=devices, algorithm="data")),
            ("megatron", dict(mesh=mesh, layout=MEGATRON)), ("mesh-tf", dict(mesh=mesh, layout=MESH_TF))]
    for label, kwargs in runs:
        t0 = time.perf_counter()
        try:
            plan = at.plan(sym, **kwargs)
            row[label] = plan.comm_bytes
            row[f"{label}_search_seconds"] = plan.search_seconds
        except at.Error as e:  # e.g. data parallelism with fewer sequences than devices
            row[label] = None
            row[f"{label}_error"] = error_text(e)
        row[f"{label}_wall_seconds"] = time.perf_counter() - t0
    hand = {k: row[k] for k in ("data", "megatron", "mesh-tf") if row[k] is not None}
    best = min(hand, key=hand.get) if hand else None
    row["best_hand"] = best
    row["tofu_over_best_hand"] = row["tofu"] / hand[best] if best and hand[best] else None
    row["worse_than"] = [k for k, v in hand.items() if row["tofu"] > v * (1 + 1e-9)]
    return row


def plan_time(label, build, devices):
    """at.plan wall time and its parts for one model."""
    import autotile as at

    t0 = time.perf_counter()
    sym = build()
    built = time.perf_counter() - t0
    t0 = time.perf_counter()
    plan = at.plan(sym, devices=devices)
    wall = time.perf_counter() - t0
    return {"model": label, "devices": devices, "build_seconds": built, "lower_seconds": plan.lower_seconds,
            "search_seconds": plan.search_seconds, "plan_wall_seconds": wall, "bytes": plan.comm_bytes,
            "groups": plan.num_groups}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2-layer models at 8 devices (CI smoke run)")
    ap.add_argument("--full", action="store_true", help="also Mesh-TF's 4.9B decoder at 512 devices (16 x 32)")
    args = ap.parse_args(argv)
    from autotile import models
    from autotile.models.transformer import decoder_lm

    result = {"quick": args.quick}
    names = ["gpt2-small", "bert-base", "llama-7b", "vit-base"] if args.quick else sorted(PUBLISHED)
    counts = parameter_counts(names)
    result["parameters"] = counts
    print("Parameter counts (zoo vs published)")
    print(table(["model", "parameters", "published", "source", "equal"],
                [[r["model"], f"{r['parameters']:,}", f"{r['published']:,.0f}", r["source"],
                  "yes" if r["match"] else "NO"] for r in counts]))

    layers = {"layers": 2} if args.quick else {}
    configs = []  # (name, sizes, heads, devices, batch, mesh)
    for devices in ([8] if args.quick else [8, 64]):
        for name, seq, vocab in (("gpt2-small", 1024, 50304), ("bert-base", 512, 30592)):
            for batch in (devices, 32 * devices):
                configs.append((name, dict(seq=seq, vocab=vocab, **layers), 12, devices, batch, None))
    if args.full:
        configs.append(("transformer-262144-256", dict(seq=256), 256, 512, 256, {"rows": 16, "cols": 32}))
    rows = [compare(*c) for c in configs]
    result["layouts"] = rows

    def gb(v):
        return "n/a" if v is None else f"{v / 1e9:.2f}"

    print("\nBytes per training step, GB (all devices; hand layouts = their parameter layout, rest searched)")
    print(table(["model", "layers", "devices", "mesh", "batch", "tofu", "data", "megatron", "mesh-tf",
                 "best hand", "tofu/best", "tofu worse than"],
                [[r["model"], c[1].get("layers", "all"), r["devices"], r["mesh"], r["batch"], gb(r["tofu"]),
                  gb(r["data"]), gb(r["megatron"]), gb(r["mesh-tf"]), r["best_hand"] or "-",
                  "-" if r["tofu_over_best_hand"] is None else f"{r['tofu_over_best_hand']:.3f}",
                  ", ".join(r["worse_than"]) or "none"] for r, c in zip(rows, configs)]))
    worse = [r for r in rows if r["worse_than"]]
    if worse:
        print("\nSEARCH WORSE THAN A HAND LAYOUT in", len(worse), "configuration(s):",
              "; ".join(f"{r['model']} x{r['devices']} b{r['batch']} vs {', '.join(r['worse_than'])}" for r in worse))

    # the whole 32 layers even with --quick: the search fixes the shared rotary tables
    # (csrc/search/dominance.h), so this takes about a second
    llama_layers = 32
    timings = [
        plan_time(f"llama-7b ({llama_layers} layers)", lambda: models.get("llama-7b", batch=8, seq=2048,
                                                                           layers=llama_layers), 64),
        # the same shapes without rotary embedding: its cos/sin tables feed every layer
        plan_time(f"llama-7b ({llama_layers} layers) without rotary",
                  lambda: decoder_lm(8, 2048, llama_layers, 4096, 32, 11008, 32000, norm_kind="rms", eps=1e-6,
                                     ffn="swiglu", bias=False), 64),
    ]
    result["plan_time"] = timings
    met = all(t["search_seconds"] <= 1 and t["plan_wall_seconds"] <= 3 for t in timings)
    print("\nPlanning LLaMA-7B shapes (batch 8, seq 2048) on 64 devices (target: search <= 1 s, at.plan <= 3 s: "
          f"{'met' if met else 'MISSED'})")
    print(table(["model", "build s", "lowering s", "search s", "at.plan wall s", "groups", "bytes GB"],
                [[t["model"], f"{t['build_seconds']:.2f}", f"{t['lower_seconds']:.2f}", f"{t['search_seconds']:.2f}",
                  f"{t['plan_wall_seconds']:.2f}", t["groups"], f"{t['bytes'] / 1e9:.1f}"] for t in timings]))
    print(f"\nwrote {write_json('transformers.json', result)}")
    return 1 if worse or not all(r["match"] for r in counts) else 0


if __name__ == "__main__":
    sys.exit(main())
