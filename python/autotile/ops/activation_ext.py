"""Element-wise activations of today's models (ONNX / transformer names): erf, gelu (erf form
or tanh approximation), silu, mish, hard_sigmoid, hard_swish, and the `_backward_<op>` ops
their gradients use (dx = dy * f'(x), from dy and the forward input)."""
from __future__ import annotations

import math

import numpy as np

from ._ew_util import cast, same_shape
from .leaky_relu import _erf  # SciPy's erf when installed, math.erf otherwise
from .registry import OpDef, Param, register
from .tdl_helpers import elementwise

_SQRT2 = math.sqrt(2.0)
_TANH_C = math.sqrt(2.0 / math.pi)  # gelu's tanh approximation: tanh(c * (x + 0.044715 x^3))
_TANH_A = 0.044715


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # no overflow for large |x|


def _gelu(x, a):
    if a["approximate"] == "tanh":
        return 0.5 * x * (1.0 + np.tanh(_TANH_C * (x + _TANH_A * x ** 3)))
    return 0.5 * x * (1.0 + _erf(x / _SQRT2))


def _gelu_grad(x, a):
    if a["approximate"] == "tanh":
        t = np.tanh(_TANH_C * (x + _TANH_A * x ** 3))
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _TANH_C * (1.0 + 3.0 * _TANH_A * x * x)
    return 0.5 * (1.0 + _erf(x / _SQRT2)) + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def _mish_grad(x, a):
    t = np.tanh(np.logaddexp(0.0, x))
    return t + x * (1.0 - t * t) * _sigmoid(x)


def _hard_sigmoid(x, alpha, beta):
    return np.clip(alpha * x + beta, 0.0, 1.0)


def _hard_sigmoid_slope(x, alpha, beta):
    """d/dx hard_sigmoid: alpha inside the linear part, 0 where clipped (ONNX/PyTorch)."""
    u = alpha * x + beta
    return alpha * ((u > 0.0) & (u < 1.0))


def _hard_swish_grad(x, a):
    return _hard_sigmoid(x, 1.0 / 6.0, 0.5) + x * _hard_sigmoid_slope(x, 1.0 / 6.0, 0.5)


_HARD_SIGMOID_PARAMS = {"alpha": Param("float", 0.2), "beta": Param("float", 0.5)}

# name -> (params, f(x, attrs), f'(x, attrs), doc)
_ACTIVATIONS = {
    "erf": ({}, lambda x, a: _erf(x), lambda x, a: (2.0 / math.sqrt(math.pi)) * np.exp(-x * x),
            "Gauss error function erf(x), element-wise."),
    "gelu": ({"approximate": Param("str", "none", choices=("none", "tanh"))}, _gelu, _gelu_grad,
             "GELU: 0.5 x (1 + erf(x / sqrt 2)); approximate='tanh': 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."),
    "silu": ({}, lambda x, a: x * _sigmoid(x), lambda x, a: _sigmoid(x) * (1.0 + x * (1.0 - _sigmoid(x))),
             "SiLU (swish): x * sigmoid(x)."),
    "mish": ({}, lambda x, a: x * np.tanh(np.logaddexp(0.0, x)), _mish_grad,
             "Mish: x * tanh(softplus(x))."),
    "hard_sigmoid": (_HARD_SIGMOID_PARAMS, lambda x, a: _hard_sigmoid(x, a["alpha"], a["beta"]),
                     lambda x, a: _hard_sigmoid_slope(x, a["alpha"], a["beta"]),
                     "max(0, min(1, alpha * x + beta)) (ONNX HardSigmoid)."),
    "hard_swish": ({}, lambda x, a: x * _hard_sigmoid(x, 1.0 / 6.0, 0.5), _hard_swish_grad,
                   "x * hard_sigmoid(x, alpha=1/6, beta=0.5) (ONNX HardSwish)."),
}


def _forward(fn):
    return lambda attrs, ins, ctx: [cast(fn(ins[0], attrs), ins[0])]


def _gradient(name, params):
    def gradient(ctx):
        attrs = {k: ctx.attrs[k] for k in params}
        return [ctx.op(f"_backward_{name}", ctx.out_grads[0], ctx.inputs[0], **attrs)]
    return gradient


def _backward_forward(deriv):
    return lambda attrs, ins, ctx: [cast(ins[0] * deriv(ins[1], attrs), ins[0])]


def register_unary(table) -> None:
    """Registers each element-wise op of `table` (name -> (params, f(x, attrs), f'(x, attrs),
    doc)) and its ``_backward_<name>`` (dx = dy * f'(x), from dy and the forward input)."""
    for name, (params, fn, deriv, doc) in table.items():
        register(OpDef(
            name=name,
            params=params,
            infer_shape=(lambda name: lambda attrs, s: same_shape(name, ["data"], s))(name),
            forward=_forward(fn),
            gradient=_gradient(name, params),
            tdl=(lambda name: lambda attrs, i, o: elementwise(i, o[0], name, ["data"]))(name),
            elementwise=True,
            doc=doc,
        ))
        bwd = f"_backward_{name}"
        register(OpDef(
            name=bwd,
            params=params,
            arguments=lambda attrs: ["dy", "data"],
            infer_shape=(lambda name: lambda attrs, s: same_shape(name, ["dy", "data"], s))(bwd),
            forward=_backward_forward(deriv),
            tdl=(lambda name: lambda attrs, i, o: elementwise(i, o[0], name[1:], ["dy", "data"]))(bwd),
            elementwise=True,
            doc=f"Gradient of {name}: dy * {name}'(data).",
        ))


register_unary(_ACTIVATIONS)
