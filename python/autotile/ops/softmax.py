"""softmax, log_softmax (axis, temperature) and SoftmaxActivation (mode instance/channel), with
their backward ops, MXNet 1.x semantics."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import Error
from ._ew_util import cast, normalize_axis, same_shape
from .registry import OpDef, Param, out_array, register
from .tdl_helpers import access, header, index_vars

_PARAMS = {
    "axis": Param("int", -1),
    "temperature": Param("optional_float", None),
    "dtype": Param("optional_str", None),
    "use_length": Param("bool", False),
}
_DTYPES = (None, "float16", "float32", "float64")


def softmax_np(x, axis: int, temperature: float = 1.0, out=None):
    """Numerically stable softmax of x / temperature along `axis`; with `out` (x's shape and
    dtype, possibly x itself) computed there by the same operations."""
    if out is not None:
        z = np.divide(x, temperature, out=out) if temperature != 1.0 else x
        np.subtract(z, z.max(axis=axis, keepdims=True), out=out)
        np.exp(out, out=out)
        return np.divide(out, out.sum(axis=axis, keepdims=True), out=out)
    z = x / temperature if temperature != 1.0 else x
    z = z - z.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_forward(ctx, x, axis: int, temperature: float = 1.0, rows: bool = False, dtype=None):
    """A softmax kernel's output: softmax_np of x (rows: of x seen as (x.shape[0], -1), along
    `axis` of that) in `dtype` (x's by default), written into ctx's output buffer when the
    runtime offers one of x's shape and dtype."""
    dtype = x.dtype if dtype is None else np.dtype(dtype)
    x2 = x.reshape(x.shape[0], -1) if rows else x
    out = out_array(ctx, 0, x.shape, x.dtype) if x.dtype.kind == "f" and dtype == x.dtype else None
    if out is None:
        return softmax_np(x2, axis, temperature).reshape(x.shape).astype(dtype, copy=False)
    softmax_np(x2, axis, temperature, out=out.reshape(x2.shape))
    return out


def log_softmax_np(x, axis: int, temperature: float = 1.0):
    z = x / temperature if temperature != 1.0 else x
    z = z - z.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def _temperature(attrs) -> float:
    t = attrs["temperature"]
    return 1.0 if t is None else t


def _check(name, attrs, in_shapes):
    if attrs["use_length"]:
        raise Error(f"{name}: use_length=True (a length input masking data) is not supported")
    if attrs["dtype"] not in _DTYPES:
        raise Error(f"{name}: dtype={attrs['dtype']!r} is not one of {list(_DTYPES)}")
    if attrs["temperature"] is not None and attrs["temperature"] == 0:
        raise Error(f"{name}: temperature must be non-zero")
    if in_shapes[0] is not None:
        normalize_axis(name, attrs["axis"], len(in_shapes[0]))


def _shape(name):
    def infer(attrs, in_shapes):
        _check(name, attrs, in_shapes)
        return same_shape(name, ["data"], in_shapes)

    return infer


def _type(attrs, in_dtypes):
    return list(in_dtypes), ([attrs["dtype"]] if attrs["dtype"] else None)


def _out_dtype(attrs, x):
    return np.dtype(attrs["dtype"]) if attrs["dtype"] else x.dtype


def softmax_tdl(shape: Sequence[int], axes: Sequence[int], body: str, inputs=("data",), output="out") -> str:
    """TDL of an op whose output element reads its own input elements and a reduction over
    `axes` of the same row: body uses {x} for the element access(es) and {row} for the
    row's reduction variables, e.g. "exp({x}) / sum({red}) {{ exp({row}) }}"."""
    ov = index_vars(len(shape))
    row = [f"k{d}" if d in axes else ov[d] for d in range(len(shape))]
    red = ", ".join(f"k{d}" for d in axes)
    x = {name: access(name, ov) for name in inputs}
    r = {name: access(name, row) for name in inputs}
    text = body.format(red=red, **{f"x_{n}": v for n, v in x.items()}, **{f"row_{n}": v for n, v in r.items()})
    return f"{header(list(inputs), [output])}: {access(output, ov)} = {text}"


def _fwd(kind):
    def forward(attrs, ins, ctx):
        x = ins[0]
        axis = normalize_axis(kind, attrs["axis"], x.ndim)
        if kind == "softmax":
            return [softmax_forward(ctx, x, axis, _temperature(attrs), dtype=_out_dtype(attrs, x))]
        return [log_softmax_np(x, axis, _temperature(attrs)).astype(_out_dtype(attrs, x), copy=False)]

    return forward


def _grad(kind):
    def gradient(ctx):
        return [ctx.op(f"_backward_{kind}", ctx.out_grads[0], ctx.outputs[0], axis=ctx.attrs["axis"],
                       temperature=ctx.attrs["temperature"])]

    return gradient


def _fwd_tdl(kind):
    def tdl(attrs, in_shapes, out_shapes):
        shape = in_shapes[0]
        axis = normalize_axis(kind, attrs["axis"], len(shape))
        fn = "exp({x_data}) / sum({red}) {{ exp({row_data}) }}" if kind == "softmax" else \
            "{x_data} - log(sum({red}) {{ exp({row_data}) }})"
        return softmax_tdl(shape, [axis], fn)

    return tdl


for _kind in ("softmax", "log_softmax"):
    register(OpDef(
        name=_kind,
        params=_PARAMS,
        infer_shape=_shape(_kind),
        infer_type=_type,
        forward=_fwd(_kind),
        gradient=_grad(_kind),
        tdl=_fwd_tdl(_kind),
        doc=f"{_kind} of data / temperature along `axis`.",
    ))

# ----------------------------------------------------------------------------- backward

_BWD_PARAMS = {"axis": Param("int", -1), "temperature": Param("optional_float", None)}


def _bwd_forward(kind):
    def forward(attrs, ins, ctx):
        dy, y = ins
        axis = normalize_axis(f"_backward_{kind}", attrs["axis"], y.ndim)
        t = _temperature(attrs)
        if kind == "softmax":
            dx = y * (dy - (dy * y).sum(axis=axis, keepdims=True))
        else:
            dx = dy - np.exp(y) * dy.sum(axis=axis, keepdims=True)
        return [cast(dx / t if t != 1.0 else dx, dy)]

    return forward


def _bwd_tdl(kind):
    def tdl(attrs, in_shapes, out_shapes):
        shape = in_shapes[0]
        axis = normalize_axis(f"_backward_{kind}", attrs["axis"], len(shape))
        body = ("{x_output} * ({x_dy} - sum({red}) {{ {row_dy} * {row_output} }})" if kind == "softmax" else
                # / sum(exp(output)) = 1 over a row: the kernel normalises whole rows of output
                "{x_dy} - exp({x_output}) * sum({red}) {{ {row_dy} }} / sum({red}) {{ exp({row_output}) }}")
        return softmax_tdl(shape, [axis], body, inputs=("dy", "output"), output="dx")

    return tdl


for _kind in ("softmax", "log_softmax"):
    register(OpDef(
        name=f"_backward_{_kind}",
        params=_BWD_PARAMS,
        arguments=lambda attrs: ["dy", "output"],
        infer_shape=(lambda name: lambda attrs, s: same_shape(name, ["dy", "output"], s))(f"_backward_{_kind}"),
        forward=_bwd_forward(_kind),
        tdl=_bwd_tdl(_kind),
    ))

# ----------------------------------------------------------------------------- SoftmaxActivation


def _act_axes(mode, rank):
    """Axes one softmax runs over: instance = every axis but 0, channel = axis 1."""
    return list(range(1, rank)) if mode == "instance" else [1]


def _act_shape(attrs, in_shapes):
    data = in_shapes[0]
    if data is not None:
        if attrs["mode"] == "channel" and len(data) < 3:
            raise Error(f"SoftmaxActivation mode=channel needs data of rank >= 3, got shape {tuple(data)}")
        if len(data) < 2:
            raise Error(f"SoftmaxActivation needs data of rank >= 2, got shape {tuple(data)}")
    return same_shape("SoftmaxActivation", ["data"], in_shapes)


def _act_forward(attrs, ins, ctx):
    x = ins[0]
    return [softmax_forward(ctx, x, 1, rows=attrs["mode"] == "instance")]


def _act_bwd_forward(attrs, ins, ctx):
    dy, y = ins
    axes = tuple(_act_axes(attrs["mode"], y.ndim))
    return [cast(y * (dy - (dy * y).sum(axis=axes, keepdims=True)), dy)]


_MODE = {"mode": Param("str", "instance", choices=("channel", "instance"))}

register(OpDef(
    name="SoftmaxActivation",
    params=_MODE,
    infer_shape=_act_shape,
    forward=_act_forward,
    gradient=lambda ctx: [ctx.op("_backward_SoftmaxActivation", ctx.out_grads[0], ctx.outputs[0],
                                 mode=ctx.attrs["mode"])],
    tdl=lambda attrs, i, o: softmax_tdl(i[0], _act_axes(attrs["mode"], len(i[0])),
                                        "exp({x_data}) / sum({red}) {{ exp({row_data}) }}"),
    doc="Softmax per instance (over all non-batch dims) or per position across channels (axis 1).",
))

register(OpDef(
    name="_backward_SoftmaxActivation",
    params=_MODE,
    arguments=lambda attrs: ["dy", "output"],
    infer_shape=lambda attrs, s: same_shape("_backward_SoftmaxActivation", ["dy", "output"], s),
    forward=_act_bwd_forward,
    tdl=lambda attrs, i, o: softmax_tdl(i[0], _act_axes(attrs["mode"], len(i[0])),
                                        "{x_output} * ({x_dy} - sum({red}) {{ {row_dy} * {row_output} }})",
                                        inputs=("dy", "output"), output="dx"),
))
