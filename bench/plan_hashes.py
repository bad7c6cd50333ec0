"""Fingerprints of the plans the search finds, to show a faster search finds the same plans
(issue 24, "Search at the next scale").

    python3 bench/plan_hashes.py --write before.json     # on the old build
    python3 bench/plan_hashes.py --check before.json     # on the new one: exit 1 on any difference

Each case plans a zoo model's lowered training graph with the core's search (`tofu`, with and
without the refinement across cuts; one case with a memory term) and hashes everything the plan
holds: cut factors, per-cut bytes, total bytes, every tensor's tilings and every node's
strategies. Equal hashes mean equal plans, byte for byte. `--quick` leaves out the
80-layer LLaMA-70B cases. Prints one line per case with its search time."""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import use_tree_package  # noqa: E402

use_tree_package()

LLAMA_70B = {"d_model": 8192, "heads": 64, "d_ff": 28672, "seq": 4096}
TINY = {"d_model": 64, "heads": 4, "seq": 16, "vocab": 256}

#: (label, zoo name, keyword sizes, devices, refine, memory weight); the batch is 8 unless given
CASES = [
    ("llama-7b x64", "llama-7b", {"seq": 2048}, 64, True, 0.0),
    ("llama-7b x1024", "llama-7b", {"seq": 2048}, 1024, True, 0.0),
    ("llama-7b x64 recursion", "llama-7b", {"seq": 2048}, 64, False, 0.0),
    ("llama-70b 8 layers x1024", "llama-7b", dict(LLAMA_70B, layers=8), 1024, True, 0.0),
    ("llama-70b x64", "llama-7b", dict(LLAMA_70B, layers=80), 64, True, 0.0),
    ("llama-70b x1024", "llama-7b", dict(LLAMA_70B, layers=80), 1024, True, 0.0),
    ("llama-70b x1024 recursion", "llama-7b", dict(LLAMA_70B, layers=80), 1024, False, 0.0),
    ("gpt2-small x64", "gpt2-small", {"seq": 1024}, 64, True, 0.0),
    ("gpt2-small x1024", "gpt2-small", {"seq": 1024}, 1024, True, 0.0),
    ("bert-base x64", "bert-base", {"seq": 512}, 64, True, 0.0),
    ("bert-base x1024", "bert-base", {"seq": 512}, 1024, True, 0.0),
    ("tiny gpt2 x8", "gpt2-small", dict(TINY, layers=2), 8, True, 0.0),
    ("tiny bert x8", "bert-base", dict(TINY, layers=1), 8, True, 0.0),
    ("tiny llama x4", "llama-7b", dict(TINY, layers=1), 4, True, 0.0),
    ("mlp x64", "mlp", {"batch": 4096}, 64, True, 0.0),
    ("alexnet x8", "alexnet", {"batch": 128}, 8, True, 0.0),
    ("vgg16 x64", "vgg16", {"batch": 32}, 64, True, 0.0),
    ("rnn-4-1k x8", "rnn-4-1k", {}, 8, True, 0.0),
    ("gpt2-small x8 memory term", "gpt2-small", {"seq": 1024, "layers": 4}, 8, False, 1e-3),
]


def plan_hash(raw: dict) -> str:
    """SHA-256 of everything a core plan holds that describes the plan itself."""
    doc = {k: raw[k] for k in ("factors", "cut_costs", "total_bytes", "tensor_tilings", "node_strategies")}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def run_case(name: str, sizes: dict, devices: int, refine: bool, memory_weight: float) -> tuple[str, float, float]:
    """(hash, search seconds, bytes) of one case."""
    import autotile as at
    from autotile import _core
    from autotile.planner import lowered_training_graph

    sizes = dict(sizes)
    batch = sizes.pop("batch", 8)
    sym = at.models.get(name, batch=batch, **sizes)
    core = lowered_training_graph(sym)[3].core
    raw = _core.plan_graph(core, devices, "tofu", memory_weight=memory_weight, refine=refine)
    return plan_hash(raw), float(raw["search_seconds"]), float(raw["total_bytes"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", help="write the hashes to this JSON file")
    ap.add_argument("--check", help="compare with the hashes in this JSON file (exit 1 on a difference)")
    ap.add_argument("--quick", action="store_true", help="leave out the 80-layer LLaMA-70B cases")
    ap.add_argument("--only", help="run only the cases whose label contains this text")
    args = ap.parse_args(argv)
    want = json.load(open(args.check)) if args.check else {}
    got, bad = {}, []
    for label, name, sizes, devices, refine, weight in CASES:
        if args.quick and "llama-70b x" in label:
            continue
        if args.only and args.only not in label:
            continue
        h, secs, total = run_case(name, sizes, devices, refine, weight)
        got[label] = {"hash": h, "bytes": total}
        verdict = ""
        if args.check:
            ref = want.get(label)
            verdict = "new" if ref is None else ("same" if ref["hash"] == h else f"DIFFERENT (was {ref['bytes']:.6g} B)")
            if ref is not None and ref["hash"] != h:
                bad.append(label)
        print(f"{label:28s} search {secs:7.3f} s  {total:.6g} B  {h[:16]}  {verdict}", flush=True)
    if args.write:
        with open(args.write, "w") as f:
            json.dump(got, f, indent=1, sort_keys=True)
    if bad:
        print(f"{len(bad)} plans differ: {', '.join(bad)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
