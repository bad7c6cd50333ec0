"""Collective bytes of a compiled (SPMD-partitioned) XLA program, in ``plan.comm_bytes``'
accounting: ring collectives, bytes received summed over all devices.

For a group of ``n`` devices each holding ``S`` bytes (the per-device buffer in the HLO
text, which after partitioning is a shard's shape):

- all-reduce of S: 2 (n - 1) S (a ring reduce-scatter, then a ring all-gather)
- all-gather to S, reduce-scatter from S, all-to-all of S: (n - 1) S
- collective-permute of S: S per (source, target) pair with source != target

summed over the op's replica groups."""
from __future__ import annotations

import re
from typing import Dict, List

_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4,
          "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}
_KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
# "%name = TYPE kind(" or "kind-start(": the result type and the op
_LINE = re.compile(r"=\s*(?P<type>\(.*?\)|[a-z0-9]+\[[0-9,]*\](?:\{[^}]*\})?)\s+"
                   r"(?P<kind>all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute)(?P<start>-start)?\(")
_ARRAY = re.compile(r"([a-z0-9]+)\[([0-9,]*)\]")


def _array_bytes(text: str) -> List[int]:
    out = []
    for dtype, dims in _ARRAY.findall(text):
        n = 1
        for d in filter(None, dims.split(",")):
            n *= int(d)
        out.append(n * _BYTES.get(dtype, 4))
    return out


def _groups(line: str, devices: int) -> List[int]:
    """Sizes of the op's replica groups: explicit ``{{0,1},{2,3}}``, the iota form
    ``[G,N]<=[...]``, the mesh form ``mesh['a'=2,'b'=4] {'b'}`` (groups along the listed
    axes; an optional ``device_ids=(...)`` reorders devices, not group sizes), or (none given) one group of every device."""
    m = re.search(r"replica_groups=mesh\[([^\]]*)\][^{]*\{([^}]*)\}", line)  # may carry device_ids=(...)
    if m:
        sizes = {a: int(k) for a, k in re.findall(r"'([^']*)'=(\d+)", m.group(1))}
        total, size = 1, 1
        for k in sizes.values():
            total *= k
        for a in re.findall(r"'([^']*)'", m.group(2)):
            size *= sizes[a]
        return [size] * (total // size)
    m = re.search(r"replica_groups=\[(\d+),(\d+)\]<=", line)
    if m:
        return [int(m.group(2))] * int(m.group(1))
    m = re.search(r"replica_groups=\{(\{[0-9,{} ]*\})\}", line)
    if m and m.group(1).strip("{}"):
        return [len(g.split(",")) for g in re.findall(r"\{([0-9, ]+)\}", m.group(1))]
    return [devices]


def collectives(hlo_text: str, devices: int) -> List[Dict]:
    """Every collective of `hlo_text` (``compiled.as_text()``): its kind, per-device bytes,
    group sizes, bytes in autotile's accounting and the ``op_name`` of its metadata (the
    jax named scopes it was traced under)."""
    found = []
    for line in hlo_text.splitlines():
        m = _LINE.search(line)
        if not m or " ROOT " in line and "-done" in line:
            continue
        kind = m.group("kind")
        sizes = _array_bytes(m.group("type"))
        if m.group("start") and kind in ("all-gather", "collective-permute", "all-to-all") and len(sizes) > 1:
            sizes = sizes[len(sizes) // 2:]  # an async start's result is (operands, outputs)
        per_device = sum(sizes)
        if kind == "reduce-scatter":  # S is the operand: the output times the group size
            groups = _groups(line, devices)
            total = sum((n - 1) * per_device * n for n in groups)
        elif kind == "collective-permute":
            pairs = re.search(r"source_target_pairs=\{(.*?)\}\}", line)
            moves = [p for p in re.findall(r"\{(\d+),(\d+)\}", pairs.group(0) if pairs else "") if p[0] != p[1]]
            groups = []
            total = per_device * len(moves)
        else:
            groups = _groups(line, devices)
            factor = 2 if kind == "all-reduce" else 1
            total = sum(factor * (n - 1) * per_device for n in groups)
        name = re.search(r'op_name="([^"]*)"', line)
        found.append({"kind": kind, "bytes_per_device": per_device, "groups": groups, "bytes": total,
                      "op_name": name.group(1) if name else "", "line": line.strip()[:200]})
    return found


def collective_bytes(hlo_text: str, devices: int) -> int:
    """Bytes all collectives of a compiled program move, in ``plan.comm_bytes``' accounting
    (module docstring)."""
    return int(sum(c["bytes"] for c in collectives(hlo_text, devices)))
