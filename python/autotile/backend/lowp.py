"""bfloat16 kernels on NumPy: every op's float32 kernel, its bfloat16 inputs upcast and its
bfloat16 outputs rounded (to nearest even), as a bf16 GPU kernel reads bf16, accumulates in
fp32 and stores bf16 (docs/mixed-precision.md).

NumPy with ``ml_dtypes`` holds bfloat16 arrays but computes little on them natively (its
``matmul`` of two bfloat16 arrays returns float32, reductions accumulate in bfloat16), so
the kernels are not run on bfloat16 arrays: :func:`forward` upcasts, runs the op's own
kernel and rounds each output the op's type inference says is bfloat16. One rounding per
op output is what a GPU stores; the reference executor and every host-side runtime
(:class:`autotile.backend.sub_op.SubOpRunner`) call it, so k devices compute what one does.

Ops that must not see bfloat16 refuse it with an :class:`autotile.Error` naming the node,
op, input and dtype (never a silent float32 fallback): the optimizer updates (master
weights and optimizer states stay float32) and inputs that hold indices or labels
(bfloat16 holds integers exactly only up to 256)."""
from __future__ import annotations

from typing import List

import numpy as np

from ..dtype_flags import bfloat16, is_bfloat16
from ..errors import Error

#: Optimizer updates: mixed precision keeps master weights and states in float32.
FP32_ONLY_OPS = frozenset({"sgd_update", "sgd_mom_update", "adam_update"})
#: Argument names holding integer indices or class labels, in any op.
INDEX_ARGUMENTS = frozenset({"indices", "index", "label"})
#: Ops whose "data" argument holds indices (token ids).
INDEX_DATA_OPS = frozenset({"Embedding", "_backward_Embedding"})


def _refuse(node_name: str, opdef, attrs, inputs) -> None:
    names = list(opdef.arguments(attrs)) + list(opdef.aux(attrs))
    for j, x in enumerate(inputs):
        if not is_bfloat16(getattr(x, "dtype", None)):
            continue
        arg = names[j] if j < len(names) else f"input {j}"
        if opdef.name in FP32_ONLY_OPS:
            raise Error(f"node '{node_name}' (op {opdef.name}) has no bfloat16 kernel: its input '{arg}' is "
                        f"bfloat16, but optimizer updates run on float32 master weights and states "
                        f"(mixed precision casts weights to bfloat16 where compute reads them)")
        if arg in INDEX_ARGUMENTS or (arg == "data" and opdef.name in INDEX_DATA_OPS):
            raise Error(f"node '{node_name}' (op {opdef.name}) has no bfloat16 kernel for its input '{arg}': "
                        f"it holds indices, which bfloat16 holds exactly only up to 256; keep it float32")


def has_bfloat16(inputs) -> bool:
    """Whether any of `inputs` is a bfloat16 array."""
    return any(is_bfloat16(getattr(x, "dtype", None)) for x in inputs)


def forward(opdef, node_name: str, attrs: dict, inputs: List[object], ctx) -> List[object]:
    """``opdef.forward(attrs, inputs, ctx)``, in bfloat16 when an input is bfloat16 (see the
    module docstring); otherwise the kernel is called as it is."""
    if not has_bfloat16(inputs):
        return opdef.forward(attrs, inputs, ctx)
    _refuse(node_name, opdef, attrs, inputs)
    bf16 = bfloat16()
    n_args = len(opdef.arguments(attrs))
    _, out_types = opdef.infer_type(attrs, [np.asarray(x).dtype.name if hasattr(x, "dtype") else None
                                            for x in inputs[:n_args]])
    up = [np.asarray(x, dtype=np.float32) if is_bfloat16(getattr(x, "dtype", None)) else x for x in inputs]
    given_aux = list(ctx.aux)
    aux_bf16 = [is_bfloat16(getattr(a, "dtype", None)) for a in given_aux]
    ctx.aux = [np.asarray(a, dtype=np.float32) if b else a for a, b in zip(given_aux, aux_bf16)]
    upcast_aux = list(ctx.aux)
    ctx.out = None  # the runtime's buffers are bfloat16: the kernel allocates float32 ones
    outs = list(opdef.forward(attrs, up, ctx))
    if out_types is None:  # the op's outputs take its first input's dtype
        first = next((x.dtype.name for x in inputs[:n_args] if hasattr(x, "dtype")), "float32")
        out_types = [first] * len(outs)
    outs = [np.asarray(o).astype(bf16) if t == "bfloat16" else o for o, t in zip(outs, out_types)]
    # states the kernel left alone are handed back as given (the runtime tells an update by
    # identity); those it replaced go back to their own dtype
    ctx.aux = [g if a is u else (np.asarray(a).astype(bf16) if b else a)
               for a, u, g, b in zip(ctx.aux, upcast_aux, given_aux, aux_bf16)]
    return outs
