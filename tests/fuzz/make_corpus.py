"""Writes the seed corpus of the TDL fuzz target (tests/fuzz/tdl_corpus/): the TDL text of
every node of the training graphs of a few zoo models (real descriptions: convolutions with
halos, reductions, element-wise chains, updates), the examples of docs/tdl.md, and a few
hostile shapes (long sums, deep nesting). Run from the repository root with the package
importable: `PYTHONPATH=python python tests/fuzz/make_corpus.py`. Rerun after adding ops."""
import hashlib
import os
import re
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tdl_corpus")


def zoo_texts():
    from autotile.planner import lowered_training_graph

    texts = set()
    for name, batch in (("mlp", 8), ("alexnet", 4), ("rnn-2-1k", 4), ("wresnet-50-4", 2)):
        try:
            *_, lowered = lowered_training_graph(name, batch=batch, replicate_fallback=True)
        except Exception as e:  # a zoo name this version lacks
            print(f"skip {name}: {e}", file=sys.stderr)
            continue
        g = lowered.core
        for nid in range(g.num_nodes):
            text = g.node(nid)["tdl"]
            if text:
                texts.add(text)
    return texts


def doc_texts():
    doc = open(os.path.join(os.path.dirname(OUT), "..", "..", "docs", "tdl.md")).read()
    return {m.strip() for m in re.findall(r"^\s*([A-Za-z_, ]*->[^\n`]+)$", doc, re.M) if ":" in m}


def hostile_texts():
    return {
        "x -> y: y[i] = " + " + ".join(["x[i]"] * 2000),
        "x -> y: y[i] = " + "(" * 300 + "x[i]" + ")" * 300,
        "x -> y: y[i] = x[" + "-" * 300 + "i]",
        "x -> y: y[i, j] = " + " + ".join(f"sum(k{n}) {{ x[i, k{n}] }}" for n in range(200)),
        "x, w -> y: y[n, o] = max(k) { x[n, k] * w[o, k] } - 1",
        "x -> y: y[i] = x[2 * i + 9223372036854775807]",
    }


def main():
    os.makedirs(OUT, exist_ok=True)
    texts = zoo_texts() | doc_texts() | hostile_texts()
    for text in sorted(texts):
        digest = hashlib.sha1(text.encode()).hexdigest()[:16]
        with open(os.path.join(OUT, digest), "w") as f:
            f.write(text)
    print(f"{len(texts)} seed inputs in {OUT}")


if __name__ == "__main__":
    main()
