"""Embedding: out[..., :] = weight[data[...], :] (MXNet semantics, or ONNX Gather's).

With ``mode="clip"`` (the default, MXNet's) indices arrive as floats (MXNet's default data
dtype); they are truncated to integers and *clipped* to [0, input_dim - 1], as MXNet 1.x's
Embedding does in forward and backward (checked against MXNet 1.9.1: -1 reads row 0,
input_dim + 3 reads the last row), so no index raises. With ``mode="raise"`` (ONNX Gather,
as onnxruntime computes it) ids lie in [-input_dim, input_dim), negative ones counting from
the end (-1 is the last row); an id outside that range, or a float id that is not an
integer, is an Error naming the value. The gradient of weight is a scatter-add of dy's rows
(repeated indices accumulate); data gets none. sparse_grad is accepted; the gradient is
always dense.

TDL: the row read depends on data's values, which an affine index cannot say, so weight's
row dim is ':'; splitting the batch dims or the output_dim column is exact. The backward
sums over the batch dims (a split there leaves partial weight gradients).
"""
from __future__ import annotations

import numpy as np

from ._axes import need_shapes
from ._tiles import box_shape
from .gather import map_indices
from .registry import OpDef, Param, register
from .tdl_helpers import access, index_vars


_MODES = ("clip", "raise")


def _rows(op, data, attrs):
    """The weight rows `data` reads under the op's mode (module doc)."""
    if attrs["mode"] == "raise":
        return map_indices(op, data, attrs["input_dim"], "raise", what="the vocabulary (input_dim)")
    return np.clip(np.asarray(data).astype(np.int64), 0, attrs["input_dim"] - 1)


def _infer(attrs, in_shapes):
    need_shapes("Embedding", in_shapes[:1], ["data"])
    data = tuple(in_shapes[0])
    return [data, (attrs["input_dim"], attrs["output_dim"])], [data + (attrs["output_dim"],)]


def _infer_type(attrs, in_dtypes):
    # The table's own dtype, when given, decides (an imported model run in float64);
    # the dtype attribute (MXNet's) is the default.
    table = in_dtypes[1] or attrs["dtype"]
    return [in_dtypes[0] or "float32", table], [table]


def _forward(attrs, inputs, ctx):
    data, weight = inputs
    return [weight[_rows("Embedding", data, attrs)]]


def _tdl(attrs, in_shapes, out_shapes):
    iv = index_vars(len(in_shapes[0]))
    return (f"data, weight -> out: {access('out', iv + ['o'])} = "
            f"gather({access('data', iv)}, weight[:, o])")


_PARAMS = {
    "input_dim": Param("int", required=True),
    "output_dim": Param("int", required=True),
    "dtype": Param("str", "float32", choices=("float16", "float32", "float64", "uint8", "int8", "int32", "int64")),
    "sparse_grad": Param("bool", False),
    #: "clip" (MXNet) or "raise" (ONNX Gather: negative ids from the end, out of range an Error)
    "mode": Param("str", "clip", choices=_MODES),
}

register(OpDef(
    name="Embedding",
    params=_PARAMS,
    arguments=lambda attrs: ["data", "weight"],
    infer_shape=_infer,
    infer_type=_infer_type,
    forward=_forward,
    gradient=lambda ctx: [None, ctx.op("_backward_Embedding", ctx.out_grads[0], ctx.inputs[0],
                                       input_dim=ctx.attrs["input_dim"], output_dim=ctx.attrs["output_dim"],
                                       mode=ctx.attrs["mode"])],
    tdl=_tdl,
    doc="Look up rows of weight (input_dim, output_dim) at the indices in data.",
))


def _bwd_infer(attrs, in_shapes):
    need_shapes("_backward_Embedding", in_shapes[1:], ["data"])
    data = tuple(in_shapes[1])
    rows = attrs["num_rows"] if attrs["num_rows"] is not None else attrs["input_dim"]
    return [data + (attrs["output_dim"],), data], [(rows, attrs["output_dim"])]


def _bwd_forward(attrs, inputs, ctx):
    """Rows [row_begin, row_begin + num_rows) of the weight gradient (all rows by default)."""
    dy, data = inputs
    n = attrs["num_rows"] if attrs["num_rows"] is not None else attrs["input_dim"]
    rows = _rows("_backward_Embedding", data, attrs).reshape(-1) - attrs["row_begin"]
    keep = (rows >= 0) & (rows < n)
    dw = np.zeros((n, attrs["output_dim"]), dtype=dy.dtype)
    np.add.at(dw, rows[keep], dy.reshape(-1, attrs["output_dim"])[keep])
    return [dw]


def _bwd_tile(attrs, ins, outs, in_shapes, out_shapes):
    rows, cols = box_shape(outs[0])
    return {**attrs, "row_begin": int(outs[0][0][0]), "num_rows": rows, "output_dim": cols}


def _bwd_tdl(attrs, in_shapes, out_shapes):
    iv = index_vars(len(in_shapes[1]))
    return (f"dy, data -> dweight: dweight[v, o] = "
            f"sum({', '.join(iv)}) {{ scatter({access('dy', iv + ['o'])}, {access('data', iv)}) }}")


register(OpDef(
    name="_backward_Embedding",
    params={"input_dim": Param("int", required=True), "output_dim": Param("int", required=True),
            # set on tiles only: the block of weight rows this tile accumulates
            "row_begin": Param("int", 0), "num_rows": Param("optional_int", None),
            "mode": Param("str", "clip", choices=_MODES)},
    arguments=lambda attrs: ["dy", "data"],
    extra={"tile_attrs": _bwd_tile},
    infer_shape=_bwd_infer,
    infer_type=lambda attrs, t: ([t[0], t[1] or "float32"], [t[0] or "float32"]),
    forward=_bwd_forward,
    tdl=_bwd_tdl,
    doc="Gradient of Embedding's weight: dy rows scatter-added at the indices (clipped or, mode raise, checked).",
))
