"""Checkpoints of the MPI runtime (autotile.backend.mpi_runtime): each rank writes its shards
of what the next step starts from (params, optimizer states, BatchNorm statistics) in the
at.nd format, rank 0 a JSON manifest; a checkpoint loads on any number of ranks under any
plan, every tile cut from the saved shards that cover it."""
from __future__ import annotations

import json
import os
from typing import List

import numpy as np

from ..errors import Error
from .mpi_faults import GRACE
from .tiles import box_index, is_extra_replica, overlap


class Checkpoints:
    """The checkpoint half of :class:`MPIRuntime`. Needs ``eg``, ``rank``, ``comm``, ``step``,
    ``dtypes``, ``exec_hash``, ``timeout``, ``_watchdog``, ``_inputs`` (this rank's input
    tiles by buffer id) and ``_carried()``."""

    def _checkpoint_names(self) -> List[str]:
        """The inputs a checkpoint holds: what one step hands the next."""
        aux = [a for a in self.eg.training.aux_names if a in self.eg.tensor_id]
        return [old for old, _ in self._carried()] + aux

    def save_checkpoint(self, directory: str) -> str:
        """Writes this rank's shards of the params, optimizer states and auxiliary states (the
        next step's inputs) as ``step<N>-rank<R>.params`` (at.nd format) and, from rank 0, the manifest
        ``manifest.json`` (written last, atomically). Collective; returns the manifest path."""
        from .. import ndarray

        eg, me = self.eg, self.rank
        os.makedirs(directory, exist_ok=True)
        fname = f"step{self.step:08d}-rank{me}.params"
        arrays, shards = {}, []
        for name in self._checkpoint_names():
            b = eg.core.tile(eg.tensor_id[name], me)
            if b not in self._inputs or is_extra_replica(eg, name, me):
                continue
            key = f"{name}@{me}"
            arrays[key] = self._inputs[b]
            buf = eg.buffers[b]
            shards.append({"tensor": name, "key": key, "file": fname, "lo": list(buf["lo"]), "hi": list(buf["hi"])})
        tmp = os.path.join(directory, fname + ".tmp")
        ndarray.save(tmp, arrays)
        os.replace(tmp, os.path.join(directory, fname))
        self._watchdog.arm(self.timeout + GRACE, "writing a checkpoint")
        try:
            everything = self.comm.gather(shards, root=0)
            path = os.path.join(directory, "manifest.json")
            if me == 0:
                low = eg.lowered
                manifest = {
                    "format": "autotile-mpi-checkpoint", "version": 1, "step": self.step, "devices": eg.devices,
                    "exec_hash": self.exec_hash,
                    "tensors": {n: {"shape": list(low.tensor_shapes[eg.tensor_id[n]]),
                                    "dtype": str(self.dtypes[eg.tensor_id[n]])} for n in self._checkpoint_names()},
                    "shards": [s for part in everything for s in part]}
                with open(path + ".tmp", "w") as f:
                    json.dump(manifest, f, indent=1)
                os.replace(path + ".tmp", path)
            self.comm.Barrier()
        finally:
            self._watchdog.disarm()
        for old in os.listdir(directory):  # this rank's shards of earlier checkpoints
            if old.endswith(f"-rank{me}.params") and old != fname:
                os.remove(os.path.join(directory, old))
        return path

    def load_checkpoint(self, directory: str) -> int:
        """Restores params, optimizer and auxiliary states from a checkpoint written by
        :meth:`save_checkpoint` (by any number of ranks, under any plan: every tile is cut from
        the saved shards that cover it). Returns the checkpoint's step."""
        from .. import ndarray

        eg = self.eg
        path = os.path.join(directory, "manifest.json")
        try:
            with open(path) as f:
                manifest = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise Error(f"cannot read checkpoint manifest '{path}': {e}") from None
        if manifest.get("format") != "autotile-mpi-checkpoint":
            raise Error(f"'{path}' is not an autotile MPI checkpoint manifest")
        files = {}
        for name in self._checkpoint_names():
            tid = eg.tensor_id[name]
            info = manifest["tensors"].get(name)
            shape = tuple(eg.lowered.tensor_shapes[tid])
            if info is None or tuple(info["shape"]) != shape:
                raise Error(f"checkpoint '{directory}' does not fit this model: tensor '{name}' has shape {shape}, "
                            f"the checkpoint {'lacks it' if info is None else 'has ' + str(tuple(info['shape']))}")
            b = eg.core.tile(tid, self.rank)
            if b not in self._inputs:
                continue
            lo, hi = eg.buffers[b]["lo"], eg.buffers[b]["hi"]
            region = np.zeros(tuple(h - l for l, h in zip(lo, hi)), dtype=self.dtypes[tid])
            covered = np.zeros(region.shape, dtype=bool)
            for shard in manifest["shards"]:
                box = overlap(lo, hi, shard["lo"], shard["hi"]) if shard["tensor"] == name else None
                if box is None:
                    continue
                ilo, ihi = box
                if shard["file"] not in files:
                    files[shard["file"]] = ndarray.load(os.path.join(directory, shard["file"]))
                value = files[shard["file"]][shard["key"]]
                region[box_index(ilo, ihi, lo)] = value[box_index(ilo, ihi, shard["lo"])]
                covered[box_index(ilo, ihi, lo)] = True
            if not covered.all():
                raise Error(f"checkpoint '{directory}' does not cover tensor '{name}' in box {tuple(lo)}..{tuple(hi)}")
            self._inputs[b] = region
        self.step = int(manifest["step"])
        return self.step
