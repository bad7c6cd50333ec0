"""The PyTorch coverage table: every family of autotile.torch.families (torch.nn layers, a
ResNet-18 and a MobileNetV3 written as small nn.Modules, Hugging Face models from tiny
configs) planned by autotile.torch.runnable.runnable_plan and trained one SGD step on 4 and
8 gloo ranks against the plain module (autotile.torch.coverage.check_family). Writes
bench/out/torch_coverage.json and the table of docs/pytorch-coverage.md (between its
markers; the rest of that page is prose kept as it is).

    python bench/torch_coverage.py                 # every family, 4 and 8 ranks
    python bench/torch_coverage.py --devices 4 --family BERT --family GPT-2
    python bench/torch_coverage.py --docs-only     # the table again from the JSON
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402,F401  (this checkout's python/ first when it has a development build)

# bench/transformers.py is not the package: bench/ off the path (the script's own entry too)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JSON = os.path.join(ROOT, "bench", "out", "torch_coverage.json")
DOC = os.path.join(ROOT, "docs", "pytorch-coverage.md")
BEGIN, END = "<!-- coverage table: bench/torch_coverage.py -->", "<!-- end of coverage table -->"


def _bytes(b):
    if b is None:
        return "-"
    return f"{b / 1e6:.2f} MB" if b >= 1e5 else f"{b / 1e3:.1f} kB"


def _cell(row):
    if row is None:
        return "-"
    if row["status"] == "pass":
        w = row.get("whole") or []
        more = f" and {len(w) - 3} more" if len(w) > 3 else ""
        whole = f"; whole: {', '.join(f'`{q}`' for q in w[:3])}{more}" if w else ""
        return f"pass ({_bytes(row['plan_bytes'])} / {_bytes(row['dtensor_bytes'])}{whole})"
    reason = row.get("reason", "").replace("|", "\\|").replace("\n", " ")
    return f"**{row['status']}**: {reason[:240]}"


def table(rows) -> str:
    """The markdown table of `rows` (check_family's dicts): one line per family, a column per
    rank count."""
    devices = sorted({r["devices"] for r in rows})
    families = list(dict.fromkeys(r["family"] for r in rows))
    by = {(r["family"], r["devices"]): r for r in rows}
    head = "| family | plan | " + " | ".join(f"{k} gloo ranks: plan / DTensor bytes" for k in devices) + " |"
    lines = [head, "|" + "---|" * (2 + len(devices))]
    for fam in families:
        alg = next(r["algorithm"] for r in rows if r["family"] == fam)
        lines.append(f"| {fam} | {alg} | " + " | ".join(_cell(by.get((fam, k))) for k in devices) + " |")
    return "\n".join(lines)


def write_docs(rows, seconds=None) -> None:
    text = open(DOC).read() if os.path.exists(DOC) else ""
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{DOC} has no table markers ({BEGIN} ... {END})")
    passed = sum(r["status"] == "pass" for r in rows)
    note = f"{passed} of {len(rows)} runs pass"
    if seconds is not None:
        note += f"; the table took {seconds / 60:.0f} min to run"
    body = f"{BEGIN}\n{table(rows)}\n\n{note}.\n{END}"
    head, rest = text.split(BEGIN, 1)
    open(DOC, "w").write(head + body + rest.split(END, 1)[1])


def main(argv=None) -> int:
    from autotile.torch.coverage import check_family
    from autotile.torch.families import FAMILIES

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", action="append", choices=list(FAMILIES), help="only these families (repeatable)")
    ap.add_argument("--devices", type=int, action="append", help="rank counts (default 4 and 8)")
    ap.add_argument("--algorithm", default="tofu")
    ap.add_argument("--docs-only", action="store_true", help="rewrite the docs table from the JSON, run nothing")
    args = ap.parse_args(argv)
    if args.docs_only:
        write_docs(json.load(open(JSON))["rows"])
        return 0
    old = {(r["family"], r["devices"]): r for r in json.load(open(JSON))["rows"]} if os.path.exists(JSON) else {}
    t0 = time.monotonic()
    for fam in args.family or list(FAMILIES):
        for k in args.devices or [4, 8]:
            row = check_family(fam, k, args.algorithm)
            old[(fam, k)] = row
            print(f"{fam:28s} {k} ranks: {_cell(row)[:160]}", flush=True)
            _save(old, list(FAMILIES))  # each row as it comes: a stopped run keeps what it measured
    _save(old, list(FAMILIES), time.monotonic() - t0 if not args.family and not args.devices else None)
    return 0


def _save(rows_by_key, families, seconds=None) -> None:
    rows = [rows_by_key[key] for key in sorted(rows_by_key, key=lambda fk: (
        families.index(fk[0]) if fk[0] in families else len(families), fk[1]))]
    os.makedirs(os.path.dirname(JSON), exist_ok=True)
    with open(JSON, "w") as f:
        json.dump({"rows": rows}, f, indent=1)
    write_docs(rows, seconds)


if __name__ == "__main__":
    sys.exit(main())
