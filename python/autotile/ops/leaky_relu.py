"""LeakyReLU (MXNet 1.x): act_type leaky, elu, selu, gelu (erf form), prelu (learnt `gamma`
per channel, axis 1) and rrelu (random slope in [lower_bound, upper_bound) while training,
their mean in inference; the slopes are a second, hidden output `mask` as in MXNet)."""
from __future__ import annotations

import math

import numpy as np

from ..errors import Error
from ._ew_util import cast, fmt, same_shape
from .dropout import draw_tile_attrs
from .registry import OpDef, Param, register
from .tdl_helpers import access, header, index_vars

_KINDS = ("elu", "gelu", "leaky", "prelu", "rrelu", "selu")
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_LAMBDA = 1.0507009873554804934193349852946

_PARAMS = {
    "act_type": Param("str", "leaky", choices=_KINDS),
    "slope": Param("float", 0.25),
    "lower_bound": Param("float", 0.125),
    "upper_bound": Param("float", 0.334),
}

_ERF = []


def _erf(x):
    """erf elementwise: SciPy's (vectorised) when installed, else math.erf (exact). SciPy is
    imported on the first call, not with the op registry: scipy.special costs 0.2-0.4 s, which
    every process that loads a model would pay."""
    if not _ERF:
        try:
            from scipy.special import erf
        except ImportError:  # pragma: no cover - SciPy is optional
            erf = np.vectorize(math.erf, otypes=[np.float64])
        _ERF.append(erf)
    return _ERF[0](x)


def _args(attrs):
    return ["data", "gamma"] if attrs["act_type"] == "prelu" else ["data"]


def _outputs(attrs):
    return ["output", "mask"] if attrs["act_type"] == "rrelu" else ["output"]


def _gamma_view(gamma, data):
    """gamma (C,) or (1,) shaped to broadcast against data along axis 1."""
    if gamma.size == 1:
        return gamma.reshape(())
    return gamma.reshape((1, -1) + (1,) * (data.ndim - 2))


def _infer_shape(attrs, in_shapes):
    kind = attrs["act_type"]
    data = in_shapes[0]
    if kind != "prelu":
        if len(in_shapes) != 1:
            raise Error(f"LeakyReLU act_type={kind} takes 1 input (data), got {len(in_shapes)}")
        return [data], [data] * len(_outputs(attrs))
    gamma = in_shapes[1]
    if data is None:
        return [None, gamma], [None]
    data = tuple(data)
    if len(data) < 2:
        raise Error(f"LeakyReLU act_type=prelu needs data of rank >= 2 (channels on axis 1), got shape {fmt(data)}")
    if gamma is None:
        gamma = (data[1],)
    elif tuple(gamma) not in ((data[1],), (1,)):
        raise Error(f"LeakyReLU act_type=prelu: gamma has shape {fmt(gamma)} but data of shape {fmt(data)} "
                    f"needs ({data[1]},) or (1,)")
    return [data, tuple(gamma)], [data]


#: set by the tile hook (rrelu only): where the tile starts and the whole tensor's shape
_TILE_PARAMS = {"tile_lo": Param("shape", ()), "tile_full": Param("shape", ())}


def _tile(attrs, ins, outs, in_shapes, out_shapes):
    return draw_tile_attrs(attrs, ins, outs, in_shapes, out_shapes) if attrs["act_type"] == "rrelu" else attrs


def _rrelu_mask(attrs, x, ctx):
    lo, hi = attrs["lower_bound"], attrs["upper_bound"]
    if ctx.is_train and ctx.key is not None:
        # Slopes are a function of (node key, global element index), as Dropout's draws: a
        # tile draws the whole tensor's slopes and keeps its part, so a partitioned step uses
        # the slopes the single-device step uses.
        full = tuple(attrs.get("tile_full") or ()) or x.shape
        start = tuple(attrs.get("tile_lo") or ()) or (0,) * x.ndim
        slopes = np.random.default_rng(ctx.key).uniform(lo, hi, size=full)
        return slopes[tuple(slice(s, s + n) for s, n in zip(start, x.shape))].astype(x.dtype)
    if ctx.is_train:
        rng = ctx.rng if ctx.rng is not None else np.random.default_rng(0)  # deterministic fallback
        return rng.uniform(lo, hi, size=x.shape).astype(x.dtype)
    return np.full(x.shape, (lo + hi) / 2.0, dtype=x.dtype)


def _forward(attrs, ins, ctx):
    kind, x = attrs["act_type"], ins[0]
    if kind == "leaky":
        y = np.where(x > 0, x, attrs["slope"] * x)
    elif kind == "elu":
        y = np.where(x > 0, x, attrs["slope"] * np.expm1(np.minimum(x, 0)))
    elif kind == "selu":
        y = _SELU_LAMBDA * np.where(x > 0, x, _SELU_ALPHA * np.expm1(np.minimum(x, 0)))
    elif kind == "gelu":
        y = 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
    elif kind == "prelu":
        y = np.where(x > 0, x, _gamma_view(ins[1], x) * x)
    else:  # rrelu
        mask = _rrelu_mask(attrs, x, ctx)
        return [cast(np.where(x > 0, x, mask * x), x), mask]
    return [cast(y, x)]


def _data_grad(attrs, dy, x, extra):
    kind = attrs["act_type"]
    if kind == "leaky":
        d = np.where(x > 0, 1.0, attrs["slope"])
    elif kind == "elu":
        d = np.where(x > 0, 1.0, attrs["slope"] * np.exp(np.minimum(x, 0)))
    elif kind == "selu":
        d = _SELU_LAMBDA * np.where(x > 0, 1.0, _SELU_ALPHA * np.exp(np.minimum(x, 0)))
    elif kind == "gelu":
        d = 0.5 * (1.0 + _erf(x / math.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    elif kind == "prelu":
        d = np.where(x > 0, 1.0, _gamma_view(extra, x))
    else:  # rrelu: extra is the mask of slopes
        d = np.where(x > 0, 1.0, extra)
    return dy * d


def _gradient(ctx):
    kind = ctx.attrs["act_type"]
    dy, x = ctx.out_grads[0], ctx.inputs[0]
    common = {k: ctx.attrs[k] for k in _PARAMS}
    if kind == "prelu":
        gamma = ctx.inputs[1]
        return [ctx.op("_backward_LeakyReLU", dy, x, gamma, **common),
                ctx.op("_backward_LeakyReLU_gamma", dy, x, gamma, **common)]
    if kind == "rrelu":
        return [ctx.op("_backward_LeakyReLU", dy, x, ctx.outputs[1], **common)]
    return [ctx.op("_backward_LeakyReLU", dy, x, **common)]


def _tdl(attrs, in_shapes, out_shapes):
    ov = index_vars(len(out_shapes[0]))
    reads = [access("data", ov)]
    if attrs["act_type"] == "prelu":
        reads.append(access("gamma", [ov[1]] if in_shapes[1][0] != 1 or out_shapes[0][1] == 1 else ["0"]))
    fn = attrs["act_type"]
    if attrs["act_type"] == "rrelu":  # the mask is drawn per element, the output uses it
        return (f"{header(['data'], ['output', 'mask'])}: {access('output', ov)} = rrelu({reads[0]}); "
                f"{access('mask', ov)} = uniform({reads[0]})")
    return f"{header(_args(attrs), ['output'])}: {access('output', ov)} = {fn}({', '.join(reads)})"


register(OpDef(
    name="LeakyReLU",
    params={**_PARAMS, **_TILE_PARAMS},
    arguments=_args,
    outputs=_outputs,
    visible_outputs=lambda attrs: 1,
    infer_shape=_infer_shape,
    forward=_forward,
    gradient=_gradient,
    tdl=_tdl,
    doc="Leaky rectified linear units: leaky, elu, selu, gelu, prelu, rrelu (MXNet's LeakyReLU).",
    extra={"tile_attrs": _tile},
))

# ----------------------------------------------------------------------------- backward ops


def _bwd_args(attrs):
    kind = attrs["act_type"]
    return ["dy", "data"] + (["gamma"] if kind == "prelu" else ["mask"] if kind == "rrelu" else [])


def _bwd_shape(attrs, in_shapes):
    names = _bwd_args(attrs)
    if attrs["act_type"] == "prelu":
        (dy, x), _ = same_shape("_backward_LeakyReLU", names[:2], in_shapes[:2])
        return [dy, x, in_shapes[2]], [x]
    return same_shape("_backward_LeakyReLU", names, in_shapes)


def _bwd_tdl(attrs, in_shapes, out_shapes):
    ov = index_vars(len(out_shapes[0]))
    names = _bwd_args(attrs)
    reads = [access(n, ov) for n in names[:2]]
    if attrs["act_type"] == "prelu":
        reads.append(access("gamma", [ov[1]] if in_shapes[2][0] != 1 or out_shapes[0][1] == 1 else ["0"]))
    elif attrs["act_type"] == "rrelu":
        reads.append(access("mask", ov))
    return f"{header(names, ['dx'])}: {access('dx', ov)} = d{attrs['act_type']}({', '.join(reads)})"


register(OpDef(
    name="_backward_LeakyReLU",
    params=_PARAMS,
    arguments=_bwd_args,
    infer_shape=_bwd_shape,
    forward=lambda attrs, ins, ctx: [cast(_data_grad(attrs, ins[0], ins[1], ins[2] if len(ins) > 2 else None), ins[0])],
    tdl=_bwd_tdl,
))


def _gamma_grad_forward(attrs, ins, ctx):
    dy, x, gamma = ins
    g = dy * x * (x <= 0)
    if gamma.size == 1:
        return [cast(np.asarray(g.sum()).reshape(gamma.shape), dy)]
    axes = (0,) + tuple(range(2, x.ndim))
    return [cast(g.sum(axis=axes), dy)]


def _gamma_grad_tdl(attrs, in_shapes, out_shapes):
    rank = len(in_shapes[1])
    per_channel = in_shapes[2][0] != 1 or in_shapes[1][1] == 1
    idx = [f"r{d}" for d in range(rank)]
    if per_channel:
        idx[1] = "c"
    red = [v for v in idx if v != "c"]
    return (f"dy, data, gamma -> dgamma: dgamma[c] = sum({', '.join(red)}) "
            f"{{ dprelu_gamma({access('dy', idx)}, {access('data', idx)}) }}")


register(OpDef(
    name="_backward_LeakyReLU_gamma",
    params=_PARAMS,
    arguments=lambda attrs: ["dy", "data", "gamma"],
    infer_shape=lambda attrs, s: (list(s), [s[2]]),
    forward=_gamma_grad_forward,
    tdl=_gamma_grad_tdl,
    doc="Gradient of PReLU's gamma: sum over every dim but the channel axis of dy * x where x <= 0.",
))
