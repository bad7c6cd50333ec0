"""argmax / argmin (MXNet names; ONNX ArgMax / ArgMin).

argmax(data; axis, keepdims, select_last_index, dtype): the index of the largest element
along `axis` (the first one, or the last with select_last_index); axis None searches the
flattened tensor (shape (1,), as MXNet). The indices come out as `dtype`: float32 as in MXNet,
int64 for ONNX.

Index outputs are not differentiable: the gradient is None (like the comparisons).

TDL: ``out[i0, i2] = f(data[i0, :, i2])``: kept dims split exactly; the searched axis is read
whole and never split (a partial argmax could not be summed).
"""
from __future__ import annotations

import numpy as np

from ._axes import need_shapes, norm_axis
from .cast import DTYPES
from .registry import OpDef, Param, register
from .tdl_helpers import access, index_vars

_PARAMS = {"axis": Param("optional_int", None), "keepdims": Param("bool", False),
           "select_last_index": Param("bool", False), "dtype": Param("str", "float32", choices=DTYPES)}


def _out_shape(op, attrs, shape):
    if attrs["axis"] is None:
        return (1,) * len(shape) if attrs["keepdims"] else (1,)
    axis = norm_axis(op, attrs["axis"], len(shape), shape=shape)
    if attrs["keepdims"]:
        return tuple(1 if d == axis else s for d, s in enumerate(shape))
    return tuple(s for d, s in enumerate(shape) if d != axis) or (1,)


def _make(name, fn):
    def infer(attrs, in_shapes):
        need_shapes(name, in_shapes, ["data"])
        return [tuple(in_shapes[0])], [_out_shape(name, attrs, in_shapes[0])]

    def forward(attrs, inputs, ctx):
        x = inputs[0]
        axis = None if attrs["axis"] is None else norm_axis(name, attrs["axis"], x.ndim, shape=x.shape)
        flat = x.reshape(-1) if axis is None else x
        last = 0 if axis is None else axis
        if attrs["select_last_index"]:
            idx = flat.shape[last] - 1 - fn(np.flip(flat, axis=last), axis=last)
        else:
            idx = fn(flat, axis=last)
        return [np.asarray(idx).astype(attrs["dtype"]).reshape(_out_shape(name, attrs, x.shape))]

    def tdl(attrs, in_shapes, out_shapes):
        shape, out = in_shapes[0], out_shapes[0]
        if attrs["axis"] is None:
            return f"data -> out: {access('out', index_vars(len(out)))} = f({access('data', [':'] * len(shape))})"
        axis = norm_axis(name, attrs["axis"], len(shape), shape=shape)
        iv = index_vars(len(shape))
        data_idx = [":" if d == axis else v for d, v in enumerate(iv)]
        if attrs["keepdims"]:
            out_idx = iv
        else:
            out_idx = [v for d, v in enumerate(iv) if d != axis] or ["i0"]
            if len(shape) == 1:
                data_idx = [":"]
        return f"data -> out: {access('out', out_idx)} = f({access('data', data_idx)})"

    register(OpDef(
        name=name,
        params=dict(_PARAMS),
        infer_shape=infer,
        infer_type=lambda attrs, in_dtypes: ([in_dtypes[0] or "float32"], [attrs["dtype"]]),
        forward=forward,
        gradient=lambda ctx: [None],
        tdl=tdl,
        doc=f"Index of the {'largest' if fn is np.argmax else 'smallest'} element along an axis "
            "(first, or last with select_last_index); not differentiable.",
    ))


_make("argmax", np.argmax)
_make("argmin", np.argmin)
