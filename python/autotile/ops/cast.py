"""Cast: element-wise dtype conversion (MXNet's Cast / cast)."""
from __future__ import annotations

import numpy as np

from ..dtype_flags import numpy_dtype
from ._axes import need_shapes
from .registry import OpDef, Param, alias, register
from .tdl_helpers import elementwise

#: MXNet 1.x dtypes NumPy can hold (bfloat16 has no NumPy type of its own).
DTYPES = ("float16", "float32", "float64", "uint8", "int8", "int32", "int64", "bool")
#: What Cast converts to: those and bfloat16 through ml_dtypes (mixed precision,
#: autotile.autodiff.mixed_precision).
CAST_DTYPES = DTYPES + ("bfloat16",)


def _same_shape(op):
    def infer(attrs, in_shapes):
        need_shapes(op, in_shapes[:1], ["data"])
        return [in_shapes[0]] * len(in_shapes), [in_shapes[0]]

    return infer


def _cast_type(attrs, in_dtypes):
    return list(in_dtypes), [attrs["dtype"]]


register(OpDef(
    name="Cast",
    params={"dtype": Param("str", required=True, choices=CAST_DTYPES)},
    infer_shape=_same_shape("Cast"),
    infer_type=_cast_type,
    forward=lambda attrs, ins, ctx: [np.asarray(ins[0]).astype(numpy_dtype(attrs["dtype"]))],
    # The gradient is dy cast back to the input's dtype; data is passed for its dtype.
    gradient=lambda ctx: [ctx.op("_backward_Cast", ctx.out_grads[0], ctx.inputs[0])],
    tdl=lambda attrs, i, o: elementwise(i, o[0], "cast", ["data"]),
    elementwise=True,
    doc="Cast data to `dtype`.",
))
alias("cast", "Cast")


def _backward_type(attrs, in_dtypes):
    return list(in_dtypes), [in_dtypes[1] if in_dtypes[1] is not None else "float32"]


register(OpDef(
    name="_backward_Cast",
    arguments=lambda attrs: ["dy", "data"],
    infer_shape=_same_shape("_backward_Cast"),
    infer_type=_backward_type,
    forward=lambda attrs, ins, ctx: [np.asarray(ins[0]).astype(np.asarray(ins[1]).dtype)],
    tdl=lambda attrs, i, o: elementwise(i, o[0], "cast", ["dy", "data"]),
    elementwise=True,
    doc="dx = dy cast to the dtype of data.",
))
