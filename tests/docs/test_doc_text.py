"""User docs (README.md, docs/*.md) cite no internal issue numbers: they say what they mean."""
import os
import re

from doc_blocks import ROOT, doc_paths

ISSUE = re.compile(r"\b[Ii]ssues?\s+#?\d+|(?<![\w&])#\d{1,4}\b(?!\s*(?:shape|bytes))")


def test_no_issue_numbers_in_user_docs():
    found = []
    for path in doc_paths():
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                for m in ISSUE.finditer(line):
                    found.append(f"{path}:{n}: {m.group(0)!r} in {line.strip()[:100]!r}")
    assert not found, "internal issue numbers in user docs:\n" + "\n".join(found)


def test_the_pattern_finds_issue_citations():
    for text in ("(issue #24)", "issue 32 item 1", "Issue 22 reported", "see #13."):
        assert ISSUE.search(text), text
    for text in ("array #0 shape (4, 4)", "C# code", "the 2nd issue of the journal"):
        assert not ISSUE.search(text), text


def test_the_docs_named_in_the_docs_exist():
    """Every docs/NAME.md (and docs/NAME.png) that README.md or a docs page names is there."""
    missing = []
    for path in doc_paths():
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                for name in re.findall(r"(?<![\w/])(?:docs/|benchmarks/)[\w.-]+\.(?:md|png)", line):
                    target = name if name.startswith("docs/") else os.path.join("docs", name)
                    if not os.path.isfile(os.path.join(ROOT, target)):
                        missing.append(f"{path}:{n}: {name}")
    assert not missing, "named but missing:\n" + "\n".join(missing)
