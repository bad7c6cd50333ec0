"""One-sided RMA of the MPI runtime (autotile.backend.mpi_runtime): the arena and flag
windows, and MultiFetch ops as Gets of remote pieces.

Memory. A rank's arena (the static memory plan of its device) is exposed as an RMA window.
By default the window memory comes from ``MPI.Win.Allocate`` and the NumPy arena is a view
of it: on one node MPI then maps it as shared memory and a Get is a plain copy that needs
nothing from the target. ``window="create"`` instead exposes a NumPy arena with
``MPI.Win.Create``; MPICH then moves data by active messages that progress only while the
target is inside MPI, which costs milliseconds per Get while the target computes (measured
in bench/mpi.py; MPICH's ``MPIR_CVAR_ASYNC_PROGRESS=1`` helps partly).

MultiFetch. A fetch op assembles its destination tile from pieces of other tiles. Local
pieces are copied by the C++ multifetch kernel; remote pieces are read in one
passive-target epoch per source rank: ``Lock(source, SHARED, NOCHECK)``, one ``Get`` per
piece, ``Unlock(source)`` (the Unlock completes the Gets). A strided piece (a box inside a
box) is described either by derived datatypes (``Create_subarray`` on the source tile and on
the destination tile, the default) or as one Get per contiguous row (``strided="rows"``); the
data lands straight in the destination buffer. An accumulating fetch (a reduction: zero the
destination, add the pieces) gets remote pieces into contiguous staging arrays, then the
C++ kernel zeroes the destination and adds local and staged pieces. The arena window is only
ever locked shared, so MPI_MODE_NOCHECK is valid and no lock message is sent.

"""
from __future__ import annotations

import numpy as np

from .. import _core
from .mpi_faults import FLAG_WORDS


def _runs(sub, src_shape, dst_shape):
    """Split box shape `sub` into contiguous runs common to a source tile of shape
    `src_shape` and a destination of shape `dst_shape`: (leading dims, run length in
    elements). The trailing dims the box fully covers in both, plus one more, are one run."""
    n = len(sub)
    k = n
    while k > 0 and sub[k - 1] == src_shape[k - 1] == dst_shape[k - 1]:
        k -= 1
    if k == 0:
        return (), int(np.prod(sub)) if n else 1
    return tuple(sub[:k - 1]), int(np.prod(sub[k - 1:]))


def piece_gets(MPI, dtype, src_shape, src_disp: int, src_start, sub, d_mem, d_shape, d_start, strided: str):
    """The Gets that copy box `sub` starting at `src_start` of a remote C-ordered tile of shape
    `src_shape` (at byte `src_disp` of the target's window) into the box starting at
    `d_start` of the local C-ordered array of shape `d_shape` whose bytes are `d_mem`.
    strided="subarray": one Get with subarray datatypes on both sides; "rows": one Get per
    contiguous run. Returns ([(origin spec, target spec)], committed datatypes to free later)."""
    from mpi4py.util.dtlib import from_numpy_dtype

    dtype = np.dtype(dtype)
    if strided == "subarray":
        base = from_numpy_dtype(dtype)
        if not src_shape:  # a scalar
            return [([d_mem, 1, base], (src_disp, 1, base))], []
        t_type = base.Create_subarray(list(src_shape), list(sub), list(src_start), order=MPI.ORDER_C).Commit()
        o_type = base.Create_subarray(list(d_shape), list(sub), list(d_start), order=MPI.ORDER_C).Commit()
        return [([d_mem, 1, o_type], (src_disp, 1, t_type))], [t_type, o_type]
    lead, run = _runs(sub, src_shape, d_shape)
    esz = dtype.itemsize
    s_strides = [int(np.prod(src_shape[i + 1:])) for i in range(len(src_shape))]
    d_strides = [int(np.prod(d_shape[i + 1:])) for i in range(len(d_shape))]
    items = []
    for idx in (np.ndindex(*lead) if lead else [()]):
        first_s = [s + i for s, i in zip(src_start, idx)] + list(src_start[len(idx):])
        first_d = [s + i for s, i in zip(d_start, idx)] + list(d_start[len(idx):])
        so = sum(a * b for a, b in zip(first_s, s_strides)) * esz
        do = sum(a * b for a, b in zip(first_d, d_strides)) * esz
        items.append(([d_mem[do: do + run * esz], run * esz, MPI.BYTE], (src_disp + so, run * esz, MPI.BYTE)))
    return items, []



class RMAWindows:
    """The window half of :class:`MPIRuntime`: its arena and flag windows and its fetch ops.
    Needs ``MPI``, ``comm``, ``rank``, ``eg``, ``views``, ``strided`` and ``_types``."""

    def _open_windows(self, nbytes: int, window: str):
        """Creates the arena window (`nbytes`; "allocate" or "create", see above) and the flag
        window, both zeroed on every rank before anyone reads them. Collective."""
        MPI = self.MPI
        if window == "allocate":
            self.win = MPI.Win.Allocate(nbytes, 1, comm=self.comm)
            self.arena = np.frombuffer(self.win.tomemory(), dtype=np.uint8)[:nbytes]
            self.arena[...] = 0
        else:
            self.arena = np.zeros(nbytes, dtype=np.uint8)
            self.win = MPI.Win.Create(self.arena, 1, comm=self.comm)
        self.fwin = MPI.Win.Allocate(FLAG_WORDS * 8, 8, comm=self.comm)
        self.flags = np.frombuffer(self.fwin.tomemory(), dtype=np.int64)[:FLAG_WORDS]
        self.flags[...] = 0
        self.comm.Barrier()

    def _free_windows(self):
        """Frees the windows and datatypes (collective); the arena views die with them."""
        self.win.Free()
        self.fwin.Free()
        for t in self._types:
            t.Free()
        self._types = []
        self.arena = self.flags = None

    def _fetch_plan(self, op: dict) -> dict:
        eg = self.eg
        dst_id = op["outputs"][0]
        dst = eg.buffers[dst_id]
        dst_view = self.views[dst_id]
        dtype = dst_view.dtype
        # bfloat16 (mixed precision) has no MPI or buffer-protocol type: its bits move as
        # uint16 and accumulate through MultiFetch's bfloat16 path (summed in float)
        bf16 = dtype.name == "bfloat16"
        if bf16:
            dtype, dst_view = np.dtype(np.uint16), dst_view.view(np.uint16)
        dst_shape = tuple(h - l for l, h in zip(dst["lo"], dst["hi"]))
        local, staged, gets = [], [], {}
        for src_id, lo, hi in op["pieces"]:
            sb = eg.buffers[src_id]
            sub = tuple(h - l for l, h in zip(lo, hi))
            if any(n <= 0 for n in sub):
                continue
            if sb["device"] == self.rank:
                local.append((self.views[src_id].view(np.uint16) if bf16 else self.views[src_id], sb["lo"], lo, hi))
                continue
            src_shape = tuple(h - l for l, h in zip(sb["lo"], sb["hi"]))
            src_start = tuple(l - o for l, o in zip(lo, sb["lo"]))
            if op["accumulate"]:  # stage contiguous, add after the gets
                stage = np.empty(sub, dtype=dtype)
                staged.append((stage, lo, lo, hi))
                d_mem, d_shape, d_start = stage.reshape(-1).view(np.uint8), sub, (0,) * len(sub)
            else:
                d_mem = self.arena[dst["offset"]: dst["offset"] + dst_view.nbytes]
                d_shape, d_start = dst_shape, tuple(l - o for l, o in zip(lo, dst["lo"]))
            items, types = piece_gets(self.MPI, dtype, src_shape, sb["offset"], src_start, sub, d_mem, d_shape,
                                      d_start, self.strided)
            gets.setdefault(sb["device"], []).extend(items)
            self._types.extend(types)
        return {"dst": dst_view, "dst_lo": dst["lo"], "local": local, "staged": staged, "gets": gets,
                "accumulate": bool(op["accumulate"]), "bfloat16": bf16}

    def _fetch(self, plan: dict):
        MPI = self.MPI
        if not plan["accumulate"] and plan["local"]:
            _core.multifetch(plan["dst"], plan["dst_lo"], plan["local"], False, bfloat16=plan["bfloat16"])
        for source, items in plan["gets"].items():
            self.win.Lock(source, MPI.LOCK_SHARED, MPI.MODE_NOCHECK)
            for origin, target in items:
                self.win.Get(origin, source, target=target)
            self.win.Unlock(source)
        if plan["accumulate"]:
            _core.multifetch(plan["dst"], plan["dst_lo"], plan["local"] + plan["staged"], True,
                             bfloat16=plan["bfloat16"])
