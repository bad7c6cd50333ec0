"""Write the benchmark numbers of README.md and docs/*.md from the committed bench outputs.

Every number in the docs that a benchmark measured or computed sits in a marked region,

    <!-- bench:NAME key=value ... -->TEXT<!-- /bench -->

(on one line for a number in a sentence, or around a fenced table), and TEXT is what the
renderer NAME (RENDERERS below) makes of a committed JSON file under docs/benchmarks/data/
(SOURCES below: which bench wrote it, with which command). Nobody edits TEXT by hand.

    python bench/update_docs.py                    # rewrite every region from the JSON
    python bench/update_docs.py --check            # exit 1 where the docs differ from the JSON
    python bench/update_docs.py --take bench/out   # first copy the sources found there
                                                   # (after a bench run) into docs/benchmarks/data/
    python bench/update_docs.py --capture          # first rerun the programs whose output the docs
                                                   # show (CAPTURES: the C API example, the CLI)
    python bench/update_docs.py --figure           # first redraw docs/plan.png (README's picture)
    python bench/update_docs.py --check --fresh DIR
        # also compare the numbers of fresh bench outputs in DIR (CI's quick runs) with the
        # committed JSON wherever both hold the same entry, each within its stated noise:
        # bytes and ratios of bytes or of simulated times exactly (to the digits printed),
        # timings never. A fresh run of a quick configuration shares only some entries with the
        # full run whose JSON the docs use; the rest of a full run is checked text against JSON.

Each mismatch is printed as FILE:LINE region NAME: old 'X' new 'Y' (or, with --fresh, the
entry, committed and fresh values).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREE = os.path.join(ROOT, "python")
DATA = os.path.join(ROOT, "docs", "benchmarks", "data")
REGION = re.compile(r"<!-- bench:(?P<spec>[\w-]+(?: [\w-]+=[^\s>]+)*) -->(?P<text>.*?)<!-- /bench -->", re.S)

#: committed JSON file -> the command that writes it (into bench/out/, then --take)
SOURCES = {
    "speedup.json": "python bench/speedup.py",
    "transformers.json": "python bench/transformers.py --full",
    "memory.json": "python bench/memory.py",
    "engines_torch.json": "python bench/engines_torch.py",
    "mlp.json": "python bench/mlp.py",
    "algorithms.json": "python bench/algorithms.py",
    "capi_linear.json": "python bench/update_docs.py --capture (docs/embedding.md's linear.c, compiled and run)",
    "cli_plan_alexnet.json": "python bench/update_docs.py --capture (autotile plan alexnet --devices 8 --batch 256)",
    "memory_budget.json": "python bench/update_docs.py --capture (docs/memory.md's budget table, computed)",
    "time_vs_bytes.json": "python bench/time_vs_bytes.py",
}


def doc_files(root=ROOT):
    """README.md and docs/*.md."""
    docs = os.path.join(root, "docs")
    return [os.path.join(root, "README.md")] + sorted(
        os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))


def load(name, data_dir=DATA):
    path = os.path.join(data_dir, name)
    if not os.path.isfile(path):
        raise SystemExit(f"{os.path.relpath(path, ROOT)} is missing: run {SOURCES[name]}, then "
                         f"python bench/update_docs.py --take bench/out")
    with open(path) as f:
        return json.load(f)


# ------------------------------------------------------------------ facts: (key -> value, digits)
# Each source's entries as flat facts. `digits`: the decimals the docs print (a fresh value must
# round to the same); None marks a timing, which is never compared.

def speedup_facts(d):
    out = {}
    for e in d["results"]:
        for algo, r in e["algorithms"].items():
            if not r.get("ok"):
                continue
            for hw, s in r["sims"].items():
                if "speedup" in s:
                    out[f"speedup/{hw}/{e['model']}/{e['batch']}/{algo}"] = (s["speedup"], 2)
    return out


def transformers_facts(d):
    out = {}
    for r in d["layouts"]:
        key = f"transformers/{r['model']}/{r.get('layers', 'all')}/{r['devices']}/{r['batch']}"
        for col in ("tofu", "data", "megatron", "mesh-tf"):
            if r.get(col) is not None:
                out[f"{key}/{col}"] = (r[col] / 1e9, 2)
        if r.get("tofu_over_best_hand") is not None:
            out[f"{key}/tofu_over_best"] = (r["tofu_over_best_hand"], 3)
    for t in d.get("plan_time", []):
        out[f"transformers/plan_time/{t['model']}/search_seconds"] = (t["search_seconds"], None)
    return out


def memory_facts(d):
    out = {}
    for r in d:
        key = f"memory/{r['model']}/{r['devices']}/{r['batch']}/{r['algorithm']}"
        for col, value in memory_columns(r).items():
            out[f"{key}/{col}"] = (value, 2)
        out[f"{key}/seconds"] = (r["seconds"], None)
    return out


def memory_columns(r):
    """The ratios docs/memory.md and the README quote, as bench/memory.py's table prints them."""
    w, wo, ideal = r["with_control_deps"], r["without_control_deps"], r["ideal"]
    return {"serial_mb": r["serial_peak"] / 1e6, "ideal_mb": ideal / 1e6, "ctrl_mb": w["peak"] / 1e6,
            "ctrl": w["peak"] / ideal, "comm_mb": w["beyond_share"] / 1e6, "comm": w["beyond_share"] / ideal,
            "share": (w["peak"] - w["beyond_share"]) / ideal, "noctrl_mb": wo["peak"] / 1e6,
            "noctrl": wo["peak"] / ideal}


def engines_torch_facts(d):
    out = {}
    for r in d["results"]:
        key = f"engines_torch/{r['model']}/{r['plan']}"
        bp = r.get("beside_plan") or {}
        if "plan_bytes" in r:
            out[f"{key}/plan_bytes"] = (r["plan_bytes"], 0)
        if "dtensor_bytes" in bp:
            out[f"{key}/dtensor_bytes"] = (bp["dtensor_bytes"], 0)
    return out


def capture_facts(d):
    """A captured output's byte counts and ratios (its timings excluded), in order of appearance."""
    found = re.findall(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)(\s?(?:[KMGT]?B|bytes|x)\b)", d["stdout"])
    return {f"{d['program']}/{i}": (n + unit, "text") for i, (n, unit) in enumerate(found)}


def memory_budget_facts(d):
    out = {"memory_budget/serial": (d["serial"], 0)}
    for r in d["rows"]:
        out[f"memory_budget/{r['factor']}/peak"] = (r["peak"], 0)
        out[f"memory_budget/{r['factor']}/comm_bytes"] = (r["comm_bytes"], 0)
    return out


def time_vs_bytes_facts(d):
    """Each row's simulated steps (ms, as the table prints them) and the plan returned."""
    out = {}
    for r in d["rows"]:
        key = f"time_vs_bytes/{r['model']}/{r.get('layers') or 'all'}/{r['hardware']}/{r['devices']}"
        for name, v in r["steps"].items():
            if v is not None:
                out[f"{key}/{name}"] = (v * 1e3, 2)
        out[f"{key}/returned"] = (r["chosen"], "text")
        out[f"{key}/search_seconds"] = (r["search_seconds"]["time"], None)
    return out


FACTS = {"speedup.json": speedup_facts, "transformers.json": transformers_facts, "memory.json": memory_facts,
         "engines_torch.json": engines_torch_facts, "capi_linear.json": capture_facts,
         "cli_plan_alexnet.json": capture_facts, "memory_budget.json": memory_budget_facts,
         "time_vs_bytes.json": time_vs_bytes_facts}


# ------------------------------------------------------------------ renderers: region text

def _table(headers, rows, dashes=True):
    cells = [list(map(str, headers))] + [list(map(str, r)) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells]
    if dashes:
        lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _block(text):
    return "\n```\n" + text + "\n```\n"


def render_speedup_table(args, data_dir):
    """README's Results table: speedup on 8 devices over 1 on one profile, chosen rows."""
    d = load("speedup.json", data_dir)
    hw = args.get("profile", "p2.8xlarge")
    algos = args.get("algorithms", "tofu,data,owt,hypar").split(",")
    want = [tuple(x.split(":")) for x in args["rows"].split(",")]  # model:batch
    by = {(e["model"], str(e["batch"])): e for e in d["results"]}
    rows = []
    for model, batch in want:
        e = by[(model, batch)]
        rows.append([model, batch] + [f"{e['algorithms'][a]['sims'][hw]['speedup']:.2f}" for a in algos])
    return _block(_table(["model", "batch"] + algos, rows, dashes=False))


def render_printed(args, data_dir):
    """The tables a simulator bench printed for some profiles: source= (speedup, mlp, algorithms;
    default speedup) profiles=NAME,NAME."""
    d = load(args.get("source", "speedup") + ".json", data_dir)
    return _block("\n\n".join(next(t for t in d["tables"] if f"SIMULATED on '{p}'" in t)
                                for p in args["profiles"].split(",")))


def render_speedup(args, data_dir):
    """One speedup, e.g. model=alexnet batch=32 algorithm=tofu."""
    d = load("speedup.json", data_dir)
    e = next(e for e in d["results"] if e["model"] == args["model"] and str(e["batch"]) == args["batch"])
    return f"{e['algorithms'][args['algorithm']]['sims'][args.get('profile', 'p2.8xlarge')]['speedup']:.2f}"


def render_transformers_table(args, data_dir):
    """Bytes per step (GB) of tofu, data parallelism and the hand layouts (bench/transformers.py)."""
    d = load("transformers.json", data_dir)
    rows = d["layouts"]
    if "models" in args:
        rows = [r for r in rows if r["model"] in args["models"].split(",")]
    if "batch" in args:  # "small": one sequence per device
        rows = [r for r in rows if r["batch"] == r["devices"]]
    wide = args.get("columns") == "all"

    def gb(v):
        return "n/a" if v is None else f"{v / 1e9:.2f}"

    headers = ["model", "devices", "mesh", "batch", "tofu", "data", "megatron", "mesh-tf"]
    headers += ["best hand", "tofu/best"] if wide else ["tofu/best"]
    out = []
    for r in rows:
        ratio = "-" if r["tofu_over_best_hand"] is None else f"{r['tofu_over_best_hand']:.3f}"
        row = [r["model"], r["devices"], r["mesh"], r["batch"], gb(r["tofu"]), gb(r["data"]), gb(r["megatron"]),
               gb(r["mesh-tf"])]
        out.append(row + ([r["best_hand"] or "-", ratio] if wide else [ratio]))
    return _block(_table(headers, out, dashes=wide))


def render_transformers(args, data_dir):
    """One figure of a row: model= devices= batch= column= (tofu/data/megatron/mesh-tf GB, ratio)."""
    d = load("transformers.json", data_dir)
    r = next(r for r in d["layouts"] if r["model"] == args["model"] and str(r["devices"]) == args["devices"]
             and str(r["batch"]) == args["batch"])
    col = args["column"]
    return f"{r['tofu_over_best_hand']:.3f}" if col == "ratio" else f"{r[col] / 1e9:.2f}"


def _memory_row(args, data_dir):
    d = load("memory.json", data_dir)
    return next(r for r in d if r["model"] == args["model"])


def render_memory_table(args, data_dir):
    """docs/memory.md's table, as bench/memory.py prints it."""
    rows = []
    for r in load("memory.json", data_dir):
        c = memory_columns(r)
        rows.append([r["model"], f"{c['serial_mb']:.0f}", f"{c['ideal_mb']:.0f}", f"{c['ctrl_mb']:.0f}",
                     f"{c['ctrl']:.2f}", f"{c['comm_mb']:.1f}", f"{c['share']:.2f}", f"{c['noctrl_mb']:.0f}",
                     f"{c['noctrl']:.2f}"])
    return _block(_table(["model", "serial MB", "ideal MB", "ctrl MB", "ctrl/ideal", "comm MB",
                          "(ctrl-comm)/ideal", "no-ctrl MB", "no-ctrl/ideal"], rows))


def render_memory(args, data_dir):
    """One ratio of docs/memory.md's table: model= column= (ctrl, comm, share, noctrl, ...)."""
    r = _memory_row(args, data_dir)
    value = memory_columns(r)[args["column"]]
    fmt = args.get("format", "{:.2f}")
    return fmt.format(value)


def render_engines_torch_row(args, data_dir):
    """A row's figures of docs/layouts.md's DTensor table: plan= model= field= ('_' for a space)."""
    d = load("engines_torch.json", data_dir)
    model, plan = args["model"].replace("_", " "), args["plan"].replace("_", " ")
    r = next(r for r in d["results"] if r["model"] == model and r["plan"] == plan)
    bp = r["beside_plan"]
    field = args["field"]
    if field == "plan_bytes":
        return f"{int(r['plan_bytes']):,}"
    if field == "dtensor_bytes":
        return f"{int(bp['dtensor_bytes']):,}"
    if field == "ratio":
        return f"{bp['dtensor_bytes'] / r['plan_bytes']:.2f}x" if bp["dtensor_bytes"] < 10 * r["plan_bytes"] \
            else f"{bp['dtensor_bytes'] / r['plan_bytes']:.1f}x"
    if field == "collectives":
        names = {"all_gather_into_tensor": "all-gather", "all_reduce": "all-reduce",
                 "reduce_scatter_tensor": "reduce-scatter", "all_to_all": "all-to-all"}
        counts = bp["dtensor_counts"]
        return ", ".join(f"{counts[k]} {names.get(k, k)}" for k in sorted(counts, key=lambda k: names.get(k, k))) \
            or "none"
    if field == "redistributed":
        return str(len(r.get("redistributed") or []))
    raise KeyError(field)


#: docs/layouts.md's names for engines_torch.py's modules and plans
TORCH_MODULES = {"mlp (README)": "README MLP (batch 256)", "transformer block":
                 "Transformer block (d 32, 4 heads, ff 64; batch 16, seq 16)", "cnn": "CNN (2 conv, batch 16)"}
TORCH_PLANS = {"rules 2x4": "mesh 2x4, `fc1.weight:0=model`, `data:0=batch`",
               "rules 2x4 (Megatron)": "mesh 2x4, Megatron rules (`engines_torch.megatron_rules`)"}
TORCH_COLLECTIVES = {"all_gather_into_tensor": "all-gather", "all_reduce": "all-reduce",
                     "reduce_scatter_tensor": "reduce-scatter", "all_to_all": "all-to-all"}


def render_engines_torch_table(args, data_dir):
    """docs/layouts.md's table: each plan run by DTensor beside the plan's own bytes."""
    d = load("engines_torch.json", data_dir)
    lines = ["| module | plan | plan bytes | DTensor bytes | ratio | DTensor collectives | redistributed |",
             "|---|---|---|---|---|---|---|"]
    seen = set()
    for r in d["results"]:
        label = TORCH_MODULES.get(r["model"], r["model"])
        module = label if r["model"] not in seen else label.split(" (")[0]  # described once
        seen.add(r["model"])
        plan = TORCH_PLANS.get(r["plan"], r["plan"])
        bp = r["beside_plan"]
        if "error" in r:
            lines.append(f"| {module} | {plan} | {int(bp['plan_bytes']):,} | not run: {r['error']} | | | |")
            continue
        ratio = f"{bp['dtensor_bytes'] / bp['plan_bytes']:.2f}x" if bp["dtensor_bytes"] else "-"
        if bp["dtensor_bytes"] > 10 * bp["plan_bytes"]:
            ratio = f"{bp['dtensor_bytes'] / bp['plan_bytes']:.1f}x"
        counts = bp["dtensor_counts"]
        colls = ", ".join(f"{counts[k]} {TORCH_COLLECTIVES.get(k, k)}"
                          for k in sorted(counts, key=lambda k: TORCH_COLLECTIVES.get(k, k))) or "none"
        lines.append(f"| {module} | {plan} | {int(bp['plan_bytes']):,} | {int(bp['dtensor_bytes']):,} | {ratio} | "
                     f"{colls} | {len(r.get('redistributed') or [])} |")
    return "\n" + "\n".join(lines) + "\n"


def render_memory_budget(args, data_dir):
    """docs/memory.md's budget table (no field=), or one figure: field=serial|ideal (GB) or
    field=ratio factor=F (bytes per step at that budget over the cheapest plan's)."""
    d = load("memory_budget.json", data_dir)
    field = args.get("field")
    if field in ("serial", "ideal"):
        return f"{d[field] / 1e9:.{2 if field == 'serial' else 3}f} GB"
    cheapest = d["rows"][0]["comm_bytes"]
    if field == "ratio":
        row = next(r for r in d["rows"] if str(r["factor"]) == args["factor"])
        return f"{row['comm_bytes'] / cheapest:.2f}x"
    lines = ["| budget | per-device peak | / ideal | bytes per step | vs cheapest plan |", "|---|---|---|---|---|"]
    for r in d["rows"]:
        label = ("none (cheapest plan)" if r["factor"] is None
                 else f"{r['factor']:.2f} x ideal ({r['budget'] / 1e9:.2f} GB)")
        lines.append(f"| {label} | {r['peak'] / 1e9:.3f} GB | {r['peak'] / d['ideal']:.2f}x | "
                     f"{r['comm_bytes'] / 1e9:.2f} GB | {r['comm_bytes'] / cheapest:.2f}x |")
    return "\n" + "\n".join(lines) + "\n"


def render_time_vs_bytes_table(args, data_dir):
    """docs/time-objective.md's table: each plan's simulated step (ms) per model, profile and
    device count (bench/time_vs_bytes.py)."""
    d = load("time_vs_bytes.json", data_dir)

    def ms(v):
        return "n/a" if v is None else f"{v * 1e3:.2f}"

    lines = ["| model | profile | devices | time plan | bytes plan | data | owt / megatron | best other | returned "
             "| time search won | search s (time / bytes) |", "|" + " --- |" * 11]
    for r in d["rows"]:
        s = r["steps"]
        model = r["model"] + (f" ({r['layers']} layers)" if r.get("layers") else "")
        profile = r["profile"] + (f" ({r['hardware']})" if r["hardware"] != r["profile"] else "")
        hand = s.get("owt", s.get("megatron"))
        other = f"{r['best_other']} {ms(s[r['best_other']])}" if r.get("best_other") else "n/a"
        search = r["search_seconds"]
        lines.append(f"| {model} | {profile} | {r['devices']} | {ms(s['time'])} | {ms(s['bytes'])} | "
                     f"{ms(s.get('data'))} | {ms(hand)} | {other} | {r['chosen']} | "
                     f"{'yes' if r['time_won'] else 'no'} | {search['time']:.2f} / {search.get('bytes', float('nan')):.2f} |")
    return "\n" + "\n".join(lines) + "\n"


def render_output(args, data_dir):
    """A captured program's output (CAPTURES): name= (the JSON's name without .json)."""
    return _block(load(args["name"] + ".json", data_dir)["stdout"].rstrip("\n"))


RENDERERS = {
    "speedup-table": render_speedup_table, "speedup-printed": render_printed, "printed": render_printed, "speedup": render_speedup,
    "transformers-table": render_transformers_table, "transformers": render_transformers,
    "memory-table": render_memory_table, "memory-budget": render_memory_budget, "memory": render_memory,
    "engines-torch": render_engines_torch_row, "engines-torch-table": render_engines_torch_table, "output": render_output,
    "time-vs-bytes-table": render_time_vs_bytes_table,
}


def parse_spec(spec):
    name, *rest = spec.split()
    args = {}
    for item in rest:
        if "=" not in item:
            raise ValueError(f"bench region '{spec}': '{item}' is not key=value")
        k, v = item.split("=", 1)
        args[k] = v
    if name not in RENDERERS:
        raise ValueError(f"bench region '{spec}': no renderer '{name}' (known: {', '.join(sorted(RENDERERS))})")
    return name, args


def render_text(text, data_dir=DATA):
    """(new text, [(line, spec, old, new)]) for one document."""
    changes = []

    def sub(m):
        name, args = parse_spec(m.group("spec"))
        new = RENDERERS[name](args, data_dir)
        old = m.group("text")
        if old != new:
            changes.append((text.count("\n", 0, m.start()) + 1, m.group("spec"), old, new))
        return f"<!-- bench:{m.group('spec')} -->{new}<!-- /bench -->"

    return REGION.sub(sub, text), changes


def _show(s):
    s = s.strip("\n")
    return repr(s) if "\n" not in s else "\n      " + s.replace("\n", "\n      ")


def update(paths, data_dir=DATA, check=False, out=None):
    """Render every region of `paths`; write the files (or, with check, report). Returns the changes."""
    out = out or sys.stdout
    found = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        new, changes = render_text(text, data_dir)
        for line, spec, old, now in changes:
            rel = os.path.relpath(path, ROOT) if path.startswith(ROOT) else path
            found.append((rel, line, spec, old, now))
            print(f"{rel}:{line} region '{spec}': {'docs have' if check else 'was'} {_show(old)}, "
                  f"the JSON gives {_show(now)}", file=out)
        if changes and not check:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
    return found


def compare_fresh(fresh_dir, data_dir=DATA, out=None):
    """Mismatches between the facts of fresh bench outputs and the committed JSON (shared entries)."""
    out = out or sys.stdout
    bad, compared = [], 0
    for name, facts in FACTS.items():
        path = os.path.join(fresh_dir, name)
        if not os.path.isfile(path):
            continue
        with open(path) as f:
            fresh = facts(json.load(f))
        committed = facts(load(name, data_dir))
        shared = sorted(set(fresh) & set(committed))
        n = 0
        for key in shared:
            (old, digits), (new, _) = committed[key], fresh[key]
            if digits is None:
                continue  # a timing
            n += 1
            same = old == new if digits == "text" else round(old, digits) == round(new, digits)
            if not same:
                bad.append((name, key, old, new))
                print(f"{name}: {key}: committed {old!r}, fresh run {new!r} (compared to {digits} decimals)",
                      file=out)
        compared += n
        print(f"{name}: {n} shared entries compared with the fresh run", file=out)
    if compared == 0:
        bad.append(("-", "-", "no fresh bench output shares an entry with the committed JSON", fresh_dir))
        print(f"{fresh_dir}: no fresh bench output shares an entry with the committed JSON", file=out)
    return bad


def _capi_example():
    """docs/embedding.md's linear.c, compiled against this checkout's core (csrc/include and the
    build's libautotile_core.a, or an installed package's) and run: what it prints."""
    with open(os.path.join(ROOT, "docs", "embedding.md"), encoding="utf-8") as f:
        source = re.search(r"```c\n(.*?)```", f.read(), re.S).group(1)
    import autotile

    include = autotile.get_include()
    here = os.path.dirname(os.path.abspath(autotile.__file__))
    libs = [os.path.join(here, "lib", "libautotile_core.a"), os.path.join(ROOT, "build", "libautotile_core.a")]
    lib = next((p for p in libs if os.path.isfile(p)), None)
    if lib is None:
        raise SystemExit(f"no libautotile_core.a in {' or '.join(libs)}: build the core first")
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "linear.c"), "w") as f:
            f.write(source)
        exe = os.path.join(tmp, "linear")
        subprocess.run(["cc", "-O1", "linear.c", f"-I{include}", lib, "-lstdc++", "-lm", "-lpthread", "-o", exe],
                       cwd=tmp, check=True)
        return subprocess.run([exe], check=True, capture_output=True, text=True).stdout


def _command(*argv):
    """A command's stdout, importing autotile as this script does (the checkout's build first)."""
    def run():
        import autotile

        path = os.path.dirname(os.path.dirname(os.path.abspath(autotile.__file__)))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([path, os.environ.get("PYTHONPATH", "")]))
        return subprocess.run(list(argv), check=True, capture_output=True, text=True, env=env).stdout
    return run


#: captured program outputs shown in the docs: JSON name -> (what ran, how to run it)
CAPTURES = {
    "capi_linear.json": ("docs/embedding.md's linear.c", _capi_example),
    "cli_plan_alexnet.json": ("autotile plan alexnet --devices 8 --batch 256",
                              _command(sys.executable, "-m", "autotile.cli", "plan", "alexnet", "--devices", "8",
                                       "--batch", "256")),
}


def _memory_budget():
    """docs/memory.md's budget table: WResNet-50-4, batch 32, 8 devices, the cheapest plan and the
    plans at 1.25x and 1.10x the ideal share (serial peak / 8), each plan's per-device peak (the
    execution graph's memory plan) and bytes per step."""
    import autotile as at

    model, k, batch = "wresnet-50-4", 8, 32
    serial = at.transform(model, at.plan(model, devices=1, batch=batch, replicate_fallback=True),
                          replicate_fallback=True).peak_memory(0)
    rows = []
    for factor in (None, 1.25, 1.10):
        budget = None if factor is None else factor * serial / k
        plan = at.plan(model, devices=k, batch=batch, **({} if budget is None else {"device_memory": budget}))
        eg = at.transform(model, plan)
        rows.append({"factor": factor, "budget": budget, "peak": max(eg.peak_memory(d) for d in range(k)),
                     "comm_bytes": plan.comm_bytes})
    return {"model": model, "devices": k, "batch": batch, "serial": serial, "ideal": serial / k, "rows": rows}


#: computed tables shown in the docs: JSON name -> function returning the JSON (rerun by --capture)
COMPUTED = {"memory_budget.json": _memory_budget}


def capture(out_dir=DATA):
    """Rerun every CAPTURES program and COMPUTED table; write each as JSON into out_dir. Returns
    the paths."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for name, (what, run) in CAPTURES.items():
        path = os.path.join(out_dir, name)
        with open(path, "w") as f:
            json.dump({"program": what, "stdout": run()}, f, indent=1)
        paths.append(path)
    for name, compute in COMPUTED.items():
        path = os.path.join(out_dir, name)
        with open(path, "w") as f:
            json.dump(compute(), f, indent=1)
        paths.append(path)
    return paths


#: README's picture: the AlexNet plan the README's first command prints, drawn by Plan.draw
FIGURE = os.path.join(ROOT, "docs", "plan.png")
FIGURE_TENSORS = ["conv1_weight", "conv5_weight", "fc6_weight", "fc7_weight", "fc8_weight", "fc8_bias"]


def draw_figure(path=FIGURE):
    """docs/plan.png: which tile of each weight every device owns in AlexNet's plan on 8 devices at
    batch 256 (README "Install and run" prints that plan)."""
    import autotile as at

    plan = at.plan("alexnet", devices=8, batch=256)
    return plan.draw(path, tensors=FIGURE_TENSORS)


def _slim_speedup(d):
    """speedup.json without what the docs never read (per-op simulator detail: 380 KB -> ~20 KB)."""
    keep = ("speedup", "step_seconds", "fits", "devices")
    for e in d["results"]:
        for r in [e["single"], *e["algorithms"].values()]:
            r["sims"] = {hw: {k: v for k, v in s.items() if k in keep} for hw, s in (r.get("sims") or {}).items()}
    return d


def _slim_mlp(d):
    """mlp.json without the per-device lists and the plan copy in every simulation."""
    for r in d["results"]:
        for sim in (r.get("sims") or {}).values():
            for k in ("device_compute", "device_comm", "plan"):
                sim.pop(k, None)
    return d


SLIM = {"speedup.json": _slim_speedup, "mlp.json": _slim_mlp}


def take(src_dir, data_dir=DATA):
    """Copy the known bench JSON files found in src_dir into data_dir (slimmed); their paths."""
    os.makedirs(data_dir, exist_ok=True)
    taken = []
    for name in SOURCES:
        src = os.path.join(src_dir, name)
        if os.path.isfile(src):
            with open(src) as f:
                d = json.load(f)
            with open(os.path.join(data_dir, name), "w") as f:
                json.dump(SLIM.get(name, lambda x: x)(d), f, indent=1)
            taken.append(src)
    return taken


def main(argv=None):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import common  # noqa: F401  (this checkout's python/ first when it has a development build)

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="report differences and exit 1; write nothing")
    ap.add_argument("--fresh", metavar="DIR", help="with --check: also compare fresh bench JSON in DIR")
    ap.add_argument("--take", metavar="DIR", help="first copy the known bench JSON files found in DIR")
    ap.add_argument("--capture", action="store_true",
                    help="first rerun the programs whose output the docs show (CAPTURES); with --fresh into DIR")
    ap.add_argument("--figure", action="store_true", help="first redraw docs/plan.png (README's picture)")
    ap.add_argument("--data", default=DATA, help="the committed JSON (default docs/benchmarks/data)")
    ap.add_argument("files", nargs="*", help="documents (default README.md and docs/*.md)")
    args = ap.parse_args(argv)
    if args.take:
        for src in take(args.take, args.data):
            print(f"took {src}")
    if args.figure:
        print(f"drew {draw_figure()}")
    if args.capture:
        for path in capture(args.fresh or args.data):
            print(f"wrote {path}")
    files = args.files or doc_files()
    changes = update(files, args.data, check=args.check)
    bad = compare_fresh(args.fresh, args.data) if args.fresh else []
    regions = sum(len(REGION.findall(open(p, encoding="utf-8").read())) for p in files)
    if args.check:
        print(f"{regions} bench regions in {len(files)} files: {len(changes)} differ from the JSON"
              + (f", {len(bad)} fresh-run mismatches" if args.fresh else ""))
        return 1 if changes or bad else 0
    print(f"{regions} bench regions in {len(files)} files: {len(changes)} rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
