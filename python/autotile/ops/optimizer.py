"""Optimizer update ops (MXNet 1.x optimizer_op-inl.h): sgd_update, sgd_mom_update, adam_update.

They form the update phase of the training graph and are element-wise. MXNet updates the
optimizer states (mom, mean, var) in place and shows one output (the new weight); here the
new states are extra, hidden outputs (visible_outputs = 1) that the training graph reads:
sgd_mom_update -> [weight, mom], adam_update -> [weight, mean, var]. No gradient.

Gradient clipping follows MXNet's kernels: it applies when clip_gradient >= 0 (0 clips
every gradient to 0), after rescaling (and, for Adam, after adding wd * weight)."""
from __future__ import annotations

import numpy as np

from ._ew_util import cast, multi_elementwise, same_shape
from .registry import OpDef, Param, register

_COMMON = {
    "lr": Param("float", required=True),
    "wd": Param("float", 0.0),
    "rescale_grad": Param("float", 1.0),
    "clip_gradient": Param("float", -1.0),
    "lazy_update": Param("bool", True),  # only matters for row_sparse gradients, which autotile does not have
}


def _clip(g, c):
    return np.clip(g, -c, c) if c >= 0 else g


def _sgd(attrs, ins, ctx):
    w, g = ins
    lr, wd = attrs["lr"], attrs["wd"]
    new_w = (1.0 - lr * wd) * w - lr * _clip(attrs["rescale_grad"] * g, attrs["clip_gradient"])
    return [cast(new_w, w)]


def _sgd_mom(attrs, ins, ctx):
    w, g, mom = ins
    lr, wd = attrs["lr"], attrs["wd"]
    new_mom = attrs["momentum"] * mom - lr * wd * w - lr * _clip(attrs["rescale_grad"] * g, attrs["clip_gradient"])
    return [cast(w + new_mom, w), cast(new_mom, mom)]


def _adam(attrs, ins, ctx):
    w, g, mean, var = ins
    b1, b2 = attrs["beta1"], attrs["beta2"]
    grad = _clip(attrs["rescale_grad"] * g + attrs["wd"] * w, attrs["clip_gradient"])
    new_mean = b1 * mean + (1.0 - b1) * grad
    new_var = b2 * var + (1.0 - b2) * grad * grad
    new_w = w - attrs["lr"] * new_mean / (np.sqrt(new_var) + attrs["epsilon"])
    return [cast(new_w, w), cast(new_mean, mean), cast(new_var, var)]


_UPDATES = {
    "sgd_update": (["weight", "grad"], ["output"], {}, _sgd),
    "sgd_mom_update": (["weight", "grad", "mom"], ["output", "mom"], {"momentum": Param("float", 0.0)}, _sgd_mom),
    "adam_update": (["weight", "grad", "mean", "var"], ["output", "mean", "var"],
                    {"beta1": Param("float", 0.9), "beta2": Param("float", 0.999),
                     "epsilon": Param("float", 1e-8)}, _adam),
}

for _name, (_args, _outs, _extra, _kernel) in _UPDATES.items():
    register(OpDef(
        name=_name,
        params={**_COMMON, **_extra},
        arguments=(lambda a: lambda attrs: list(a))(_args),
        outputs=(lambda o: lambda attrs: list(o))(_outs),
        visible_outputs=lambda attrs: 1,
        infer_shape=(lambda name, a, o: lambda attrs, s: same_shape(name, a, s, len(o)))(_name, _args, _outs),
        forward=_kernel,
        gradient=(lambda n: lambda ctx: [None] * n)(len(_args)),
        tdl=(lambda name, a, o: lambda attrs, i, out: multi_elementwise(
            i, out[0], [f"{name}_{x}" for x in o], a, [f"new_{x}" if x != "output" else "output" for x in o]))(
            _name, _args, _outs),
        elementwise=True,
        doc=f"{_name}: MXNet's update; inputs {_args}, outputs {_outs} (only the first is visible).",
    ))
