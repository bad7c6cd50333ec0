"""The code blocks of README.md and docs/*.md, as the docs tests run them.

A fenced block tagged ``python`` (or ``py``), ``bash`` (``sh``, ``shell``) or ``console`` runs;
blocks tagged otherwise (``c``, ``cmake``, ``cpp``: tests/capi builds those) and untagged blocks
(printed output, tables) do not. An HTML comment on the lines just before the fence changes that:

    <!-- skip: REASON -->   never run here (needs a GPU, MPI ranks, a file we do not ship, ...)
    <!-- slow: REASON -->   run only with ``pytest -m slow`` (.ci/nightly)
    <!-- file: NAME -->     not run: written to NAME in the page's directory, for a later block
                            (``mpirun -np 4 python train.py``) to run

The python blocks of one page run in order in one namespace, in a python process of the page's own
(block_worker.py), as a reader types them into one
session; bash blocks run under ``bash -euo pipefail``; console blocks run their ``$ `` lines.
Every block of a page runs in that page's own temporary directory, which links ``tests``,
``bench`` and ``examples`` of the checkout ("from a checkout" paths resolve there).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = {"python": "python", "py": "python", "bash": "bash", "sh": "bash", "shell": "bash", "console": "console"}
FENCE = re.compile(r"^(?P<indent> {0,3})```(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.S | re.M)
MARKER = re.compile(r"<!--\s*(?P<kind>skip|slow|file)\s*:\s*(?P<reason>.*?)\s*-->\s*$", re.S)
# first words of a shell command: an untagged block starting with one is a command left untagged
COMMAND = re.compile(r"^\s*(\$ |pip |python3? |autotile |mpirun |mpiexec |cmake |torchrun |\.ci/|bash |git )")


@dataclass
class Block:
    path: str          # relative to ROOT
    line: int          # line of the opening fence
    lang: str          # as tagged ('' when untagged)
    kind: Optional[str]  # 'python', 'bash', 'console' or None (not run)
    code: str
    marker: Optional[str] = None   # 'skip', 'slow' or 'file'
    reason: str = ""               # why (skip, slow) or the file name (file)

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"


def doc_paths(root=ROOT) -> List[str]:
    docs = os.path.join(root, "docs")
    return ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir(docs) if f.endswith(".md"))


def blocks(path: str, root=ROOT) -> List[Block]:
    """Every fenced block of one page, with its marker."""
    with open(os.path.join(root, path), encoding="utf-8") as f:
        text = f.read()
    out = []
    for m in FENCE.finditer(text):
        lang = m.group("lang").lower()
        before = text[:m.start()].rstrip()
        tail = before[before.rfind("<!--"):] if before.endswith("-->") else ""
        mk = MARKER.search(tail) if tail else None
        out.append(Block(path, text.count("\n", 0, m.start()) + 1, lang, RUN.get(lang), m.group("body"),
                         mk.group("kind") if mk else None, mk.group("reason") if mk else ""))
    return out


def all_blocks(root=ROOT) -> List[Block]:
    return [b for p in doc_paths(root) for b in blocks(p, root)]


def console_script(code: str) -> str:
    """The commands of a console block: its '$ ' lines (a trailing backslash continues one)."""
    lines, cont = [], False
    for line in code.splitlines():
        if line.startswith("$ ") or cont:
            lines.append(line[2:] if line.startswith("$ ") and not cont else line)
            cont = line.rstrip().endswith("\\")
    return "\n".join(lines) + "\n"
