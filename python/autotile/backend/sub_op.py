"""Running one compute op of an execution graph: the node's own kernel on the device's
tile (partition-n-reduce). Shared by every runtime (host threads, MPI ranks, GPUs): they
differ in where buffers live and how regions move, not in how a sub-operator runs."""
from __future__ import annotations

import os
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from ..errors import Error
from ..execgraph.tile_attrs import tile_attrs
from ..ops.registry import KernelContext, node_key, same_buffer
from . import lowp


def crop(value, buf: dict, full_shape):
    """A kernel that read whole dims of its inputs (e.g. softmax's class dim when the plan
    splits it) computes those dims in full: keep the part the tile owns."""
    if tuple(value.shape) == tuple(h - l for l, h in zip(buf["lo"], buf["hi"])) or value.ndim != len(full_shape):
        return value
    index = []
    for d, (lo, hi) in enumerate(zip(buf["lo"], buf["hi"])):
        if value.shape[d] == hi - lo:
            index.append(slice(None))
        elif value.shape[d] == full_shape[d]:
            index.append(slice(lo, hi))
        else:
            return value
    return value[tuple(index)]


class SubOpRunner:
    """Runs compute ops of one ExecGraph. `xp` is the array module of the buffers (numpy or cupy).

    Kernels that update auxiliary states (BatchNorm's moving statistics) replace entries of
    ``ctx.aux``; the runner keeps each new value by (state name, box) in :attr:`aux_updates`
    (runtimes clear it at the start of a step) rather than writing the input tile, which other
    devices may still read.

    With `out_views` (the default for NumPy buffers) kernels get the output buffers as
    ``ctx.out`` and may write into them; an output returned as that very array needs no copy
    (:meth:`in_place`). ``AUTOTILE_KERNEL_OUT=0`` in the environment turns this off (every
    kernel allocates its outputs and the runtime copies them), to compare memory and bits."""

    def __init__(self, eg, xp=np, out_views: Optional[bool] = None):
        self.eg = eg
        self.xp = xp
        if out_views is None:
            out_views = xp is np and os.environ.get("AUTOTILE_KERNEL_OUT", "1") != "0"
        self.out_views = out_views
        self.nodes = {n.name: n for n in eg.training.symbol.topo_nodes() if not n.is_variable}
        self.dtypes = [np.dtype(d) for d in eg.lowered.tensor_dtypes]
        #: (aux state name, lo, hi) -> its new value in that box, from this step's kernels
        self.aux_updates: Dict[Tuple[str, tuple, tuple], object] = {}

    def updated_aux(self) -> List[tuple]:
        """This step's new auxiliary-state boxes as (name, lo, hi, host array)."""
        to_host = getattr(self.xp, "asnumpy", np.asarray)
        return [(name, lo, hi, to_host(value)) for (name, lo, hi), value in list(self.aux_updates.items())]

    def shape_only_input(self, op: dict, j: int):
        """A stand-in for an input the op reads only for its shape (no data moves): a
        broadcast zero of the region's shape, or of the output's tile when it donates the
        output's shape."""
        low = self.eg.lowered
        t = self.eg.core_tensor_inputs[op["node"]][j]
        lo, hi = op["input_boxes"][j]
        shape = tuple(h - l for l, h in zip(lo, hi))
        full = tuple(low.tensor_shapes[t])
        for out_t, b in zip(self.eg.core_tensor_outputs[op["node"]], op["outputs"]):
            if tuple(low.tensor_shapes[out_t]) == full:
                ob = self.eg.buffers[b]
                shape = tuple(h - l for l, h in zip(ob["lo"], ob["hi"]))
                break
        return self.xp.broadcast_to(self.xp.zeros((), self.dtypes[t]), shape)

    def kernel(self, node, opdef, attrs, inputs, ctx):
        """Runs the op's kernel on the prepared tile inputs; runtimes that pick another
        implementation per op (the GPU runtime) override this. bfloat16 tiles compute
        through :func:`autotile.backend.lowp.forward` (upcast, the op's kernel, rounded)."""
        if self.xp is np:
            return lowp.forward(opdef, node.name, attrs, inputs, ctx)
        return opdef.forward(attrs, inputs, ctx)

    @staticmethod
    def in_place(value, view) -> bool:
        """Whether a kernel wrote output `value` straight into its buffer `view` (no copy needed)."""
        return value is view or (isinstance(value, np.ndarray) and isinstance(view, np.ndarray)
                                 and same_buffer(value, view))

    def run(self, op: dict, view: Callable[[int], object], is_train: bool, rng, seed: int = 0) -> List[object]:
        """Outputs of compute op `op` (one per output buffer, shaped like the buffers).
        `view(buffer_id)` returns the array of a buffer on this device."""
        low = self.eg.lowered
        name = low.node_names[op["node"]]
        node = self.nodes[name]
        opdef = node.opdef()
        in_tensors = self.eg.core_tensor_inputs[op["node"]]
        out_tensors = self.eg.core_tensor_outputs[op["node"]]
        inputs = [view(b) if b >= 0 else self.shape_only_input(op, j) for j, b in enumerate(op["inputs"])]
        in_shapes = [low.tensor_shapes[t] for t in in_tensors]
        out_shapes = [low.tensor_shapes[t] for t in out_tensors]
        out_boxes = [(self.eg.buffers[b]["lo"], self.eg.buffers[b]["hi"]) for b in op["outputs"]]
        attrs = tile_attrs(node.op, node.parsed_attrs(), op["input_boxes"], out_boxes, in_shapes, out_shapes)
        n_args = len(opdef.arguments(attrs))
        ctx = KernelContext(is_train=is_train, aux=list(inputs[n_args:]), rng=rng, xp=self.xp,
                            key=node_key(name, seed),
                            out=[view(b) for b in op["outputs"]] if self.out_views else None)
        aux_in = list(ctx.aux)
        outs = self.kernel(node, opdef, attrs, inputs, ctx)
        for i, (before, after) in enumerate(zip(aux_in, ctx.aux)):
            if after is not before:  # the kernel replaced the state: keep the tile's new value
                lo, hi = op["input_boxes"][n_args + i]
                want = tuple(h - l for l, h in zip(lo, hi))
                if tuple(after.shape) != want:
                    raise Error(f"node '{name}' (op {node.op}) on device {op['device']} updated auxiliary state "
                                f"{i} with shape {tuple(after.shape)}, its tile is {want}")
                state = low.tensor_names[in_tensors[n_args + i]]
                self.aux_updates[(state, tuple(lo), tuple(hi))] = after
        result = []
        for b, t, value in zip(op["outputs"], out_tensors, outs):
            buf = self.eg.buffers[b]
            value = crop(value, buf, low.tensor_shapes[t])
            want = tuple(h - l for l, h in zip(buf["lo"], buf["hi"]))
            if tuple(value.shape) != want:
                raise Error(f"node '{name}' (op {node.op}) on device {op['device']} produced shape "
                            f"{tuple(value.shape)} for its tile, expected {want}: the op cannot run on this "
                            f"tile (its OpDef needs a tile_attrs hook)")
            result.append(value)
        return result
