"""Where a tensor's values live in an execution graph: the tiles graph inputs are written
into, the tiles whose sum is a tensor's full value, and the step's default inputs. Shared
by every runtime (host threads, MPI ranks): they differ in which devices' arenas they can
reach, not in which tiles hold what."""
from __future__ import annotations

from typing import Dict, Iterable, Iterator, List, Optional, Tuple

import numpy as np

from ..errors import Error


def box_index(lo, hi, origin=None) -> tuple:
    """The NumPy index of box [lo, hi) inside an array holding the box starting at `origin`
    (the whole tensor when None)."""
    if origin is None:
        return tuple(slice(l, h) for l, h in zip(lo, hi))
    return tuple(slice(l - o, h - o) for l, h, o in zip(lo, hi, origin))


def overlap(lo, hi, other_lo, other_hi) -> Optional[Tuple[List[int], List[int]]]:
    """The box where [lo, hi) and [other_lo, other_hi) meet, as (lo, hi); None when they don't."""
    ilo = [max(a, c) for a, c in zip(lo, other_lo)]
    ihi = [min(a, c) for a, c in zip(hi, other_hi)]
    return None if any(h <= l for l, h in zip(ilo, ihi)) else (ilo, ihi)


def device_digits(factors, device: int) -> List[int]:
    """The group index of `device` at each cut (mixed radix over the plan's factors)."""
    digits, rest = [], device
    for k in reversed(factors):
        digits.append(rest % k)
        rest //= k
    digits.reverse()
    return digits


def is_extra_replica(eg, name: str, device: int) -> bool:
    """True when `device`'s tile of `name` repeats a replica another device holds (a cut
    that replicates the tensor, and `device` is not in its group 0)."""
    tilings = eg.plan.tensor_tilings[name]
    return any(t == "replicate" and dig != 0 for t, dig in zip(tilings, device_digits(eg.core.factors, device)))


def value_tiles(eg, name: str, devices: Optional[Iterable[int]] = None) -> List[int]:
    """Buffer ids (on `devices`, all by default) whose sum, each added at its box, is the full
    value of tensor `name`: one copy of each replica, every partial."""
    tid = eg.tensor_id[name]
    devices = range(eg.devices) if devices is None else devices
    return [eg.core.tile(tid, d) for d in devices if not is_extra_replica(eg, name, d)]


def input_tiles(eg, values: Dict[str, np.ndarray], devices: Optional[Iterable[int]] = None,
                names: Optional[Iterable[str]] = None) -> Iterator[Tuple[int, np.ndarray]]:
    """(buffer id, value of its box) for every tile of a graph input (data, params, optimizer
    state, head gradients) on `devices` (all by default), of the inputs in `names` only when
    given. Raises Error naming a missing input or one of the wrong shape."""
    low = eg.lowered
    devices = list(range(eg.devices) if devices is None else devices)
    names = None if names is None else set(names)
    for tid, name in enumerate(low.tensor_names):
        if eg.core.tile(tid, 0) < 0 or (names is not None and name not in names):
            continue
        # a tensor is an input on the devices before the first one whose tile is produced
        first_produced = next((d for d in range(eg.devices) if eg.buffers[eg.core.tile(tid, d)]["producer"] >= 0),
                              eg.devices)
        mine = [d for d in devices if d < first_produced]
        if not mine:
            continue
        if name not in values:
            raise Error(f"missing input '{name}'")
        full = np.asarray(values[name], dtype=np.dtype(low.tensor_dtypes[tid]))
        if full.shape != tuple(low.tensor_shapes[tid]):
            raise Error(f"input '{name}' has shape {full.shape}, the plan expects {tuple(low.tensor_shapes[tid])}")
        for d in mine:
            b = eg.core.tile(tid, d)
            yield b, full[box_index(eg.buffers[b]["lo"], eg.buffers[b]["hi"])]


def step_inputs(eg, values: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """`values` completed with the training step's own inputs when not given: optimizer
    states start at zero, head gradients at one."""
    tg = eg.training
    inputs = dict(values)
    for name in list(tg.state_names) + list(tg.head_grad_names):
        if name not in inputs:
            tid = eg.tensor_id[name]
            fill = np.ones if name in tg.head_grad_names else np.zeros
            inputs[name] = fill(eg.lowered.tensor_shapes[tid], dtype=eg.lowered.tensor_dtypes[tid])
    return inputs


def buffer_span(eg, b: int) -> Tuple[bool, int, int, int]:
    """Where buffer `b` lies: (in the host pool, device, first byte, end byte) of its arena."""
    buf = eg.buffers[b]
    count = 1
    for lo, hi in zip(buf["lo"], buf["hi"]):
        count *= hi - lo
    start = int(buf["offset"])
    return bool(buf.get("host")), int(buf["device"]), start, start + count * np.dtype(eg.lowered.tensor_dtypes[buf["tensor"]]).itemsize


def freeable_tiles(eg, names: Iterable[str]) -> Dict[str, List[int]]:
    """For each tensor in `names` (the step's results), the buffers whose memory nothing else
    in `names` shares: every device's tile of it, replicas included, that overlaps no tile of
    another name (the memory plan keeps tensors live at the end of the step apart; a tile it
    aliases with another result's stays). Once a name is gathered these bytes may be freed."""
    spans = []  # (arena, start, end, name, buffer)
    for name in names:
        tid = eg.tensor_id[name]
        for d in range(eg.devices):
            b = eg.core.tile(tid, d)
            if b >= 0:
                host, dev, start, end = buffer_span(eg, b)
                spans.append(((host, dev), start, end, name, b))
    spans.sort(key=lambda s: (s[0], s[1], s[2]))
    shared = set()
    i = 0
    while i < len(spans):  # a sweep: runs of spans that overlap one another in one arena
        j, end = i + 1, spans[i][2]
        while j < len(spans) and spans[j][0] == spans[i][0] and spans[j][1] < end:
            end = max(end, spans[j][2])
            j += 1
        if len({s[3] for s in spans[i:j]}) > 1:
            shared.update(s[4] for s in spans[i:j])
        i = j
    out: Dict[str, List[int]] = {name: [] for name in names}
    for _, _, _, name, b in spans:
        if b not in shared and b not in out[name]:
            out[name].append(b)
    return out
