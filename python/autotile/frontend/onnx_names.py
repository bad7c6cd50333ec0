"""Unique autotile names for the tensors and nodes of an imported ONNX model."""
from __future__ import annotations

import itertools
import re


class NameTable:
    """Unique autotile names for ONNX names. A model's own names are kept as written
    (``gpu_0/data_0``, ``input_ids``, ``logits``) so users can pass them anywhere a name is
    taken; only whitespace, quotes and control characters are replaced, and a name made for a
    helper op is sanitised (``/conv1/Conv`` -> ``conv1_Conv``)."""

    def __init__(self):
        self.used: set = set()

    @staticmethod
    def keep(name: str) -> str:
        """`name` itself when usable as an autotile name, else its sanitised form."""
        if name and not re.search(r"[\s\"'\\\x00-\x1f]", name):
            return name
        return NameTable.sanitize(name)

    def unique_kept(self, name: str) -> str:
        """A unique name that keeps the model's own spelling where it can."""
        kept = self.keep(name)
        if kept not in self.used:
            self.used.add(kept)
            return kept
        return self.unique(name)

    @staticmethod
    def sanitize(name: str) -> str:
        text = re.sub(r"[^0-9A-Za-z_]+", "_", name).strip("_")
        if not text:
            text = "t"
        if text[0].isdigit():
            text = "t" + text
        return text

    def unique(self, name: str) -> str:
        base = self.sanitize(name)
        out = base
        for i in itertools.count(1):
            if out not in self.used:
                break
            out = f"{base}_{i}"
        self.used.add(out)
        return out
