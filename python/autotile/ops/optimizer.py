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
from .registry import OpDef, Param, out_array, register, same_buffer

_COMMON = {
    "lr": Param("float", required=True),
    "wd": Param("float", 0.0),
    "rescale_grad": Param("float", 1.0),
    "clip_gradient": Param("float", -1.0),
    "lazy_update": Param("bool", True),  # only matters for row_sparse gradients, which autotile does not have
}


def _clip(g, c):
    return np.clip(g, -c, c) if c >= 0 else g


# The kernels below work in place on arrays they allocate themselves (never on their inputs),
# so an update holds its outputs plus one temporary the size of the weight tile, where the
# plain expressions held up to three: on k devices at once these were the peak of a step
# (docs/memory.md, "Memory of a run"). Each in-place operation is the one the plain
# expression evaluates, in the same order and dtype, so the results are bit for bit the same.
# When the inputs do not share one float dtype the plain expressions run (NumPy's promotion
# would give a wider intermediate than an in-place output can hold).


def _one_float_dtype(ins):
    return ins[0].dtype.kind == "f" and all(x.dtype == ins[0].dtype for x in ins)


def _rescaled_grad(attrs, g, out=None):
    """clip(rescale_grad * g), in `out` or a fresh array."""
    t = np.multiply(g, attrs["rescale_grad"], out=out)
    if attrs["clip_gradient"] >= 0:
        np.clip(t, -attrs["clip_gradient"], attrs["clip_gradient"], out=t)
    return t


def _sgd(attrs, ins, ctx):
    w, g = ins
    lr, wd = attrs["lr"], attrs["wd"]
    if not _one_float_dtype(ins):
        new_w = (1.0 - lr * wd) * w - lr * _clip(attrs["rescale_grad"] * g, attrs["clip_gradient"])
        return [cast(new_w, w)]
    t = _rescaled_grad(attrs, g)
    np.multiply(t, lr, out=t)
    new_w = np.multiply(w, 1.0 - lr * wd)
    return [np.subtract(new_w, t, out=new_w)]


def _sgd_mom(attrs, ins, ctx):
    w, g, mom = ins
    lr, wd = attrs["lr"], attrs["wd"]
    if not _one_float_dtype(ins):
        new_mom = attrs["momentum"] * mom - lr * wd * w - lr * _clip(attrs["rescale_grad"] * g, attrs["clip_gradient"])
        return [cast(w + new_mom, w), cast(new_mom, mom)]
    new_mom = np.multiply(mom, attrs["momentum"])
    t = np.multiply(w, lr * wd)
    np.subtract(new_mom, t, out=new_mom)
    _rescaled_grad(attrs, g, out=t)
    np.multiply(t, lr, out=t)
    np.subtract(new_mom, t, out=new_mom)
    return [np.add(w, new_mom, out=t), new_mom]


def _adam(attrs, ins, ctx):
    w, g, mean, var = ins
    b1, b2 = attrs["beta1"], attrs["beta2"]
    if not _one_float_dtype(ins):
        grad = _clip(attrs["rescale_grad"] * g + attrs["wd"] * w, attrs["clip_gradient"])
        new_mean = b1 * mean + (1.0 - b1) * grad
        new_var = b2 * var + (1.0 - b2) * grad * grad
        new_w = w - attrs["lr"] * new_mean / (np.sqrt(new_var) + attrs["epsilon"])
        return [cast(new_w, w), cast(new_mean, mean), cast(new_var, var)]
    # `out` becomes the new weight; until then it holds the second operand of each step
    out = np.multiply(w, attrs["wd"])
    grad = np.multiply(g, attrs["rescale_grad"])
    np.add(grad, out, out=grad)
    if attrs["clip_gradient"] >= 0:
        np.clip(grad, -attrs["clip_gradient"], attrs["clip_gradient"], out=grad)
    new_mean = np.multiply(mean, b1)
    np.add(new_mean, np.multiply(grad, 1.0 - b1, out=out), out=new_mean)
    new_var = np.multiply(var, b2)
    np.multiply(grad, 1.0 - b2, out=out)
    np.add(new_var, np.multiply(out, grad, out=out), out=new_var)
    denom = np.sqrt(new_var, out=grad)
    np.add(denom, attrs["epsilon"], out=denom)
    np.multiply(new_mean, attrs["lr"], out=out)
    np.divide(out, denom, out=out)
    return [np.subtract(w, out, out=out), new_mean, new_var]


# Straight into the runtime's buffers, a block at a time: each block of the outputs is the
# kernel above on that block of the inputs (element-wise, so the same bits), and its
# temporaries are a block's size instead of a weight tile's. The memory plan gives an update
# the buffers of the weight and state it replaces (in place), so an output may be exactly an
# input; a block is read whole before it is written, which makes that safe.
BLOCK = 1 << 16  # elements: a block's inputs, outputs and temporaries stay in the L2 cache


def _blocked(kernel):
    def forward(attrs, ins, ctx):
        w = ins[0]
        like = [w] + list(ins[2:])  # the outputs: the new weight, then the states in input order
        outs = [out_array(ctx, i, x.shape, x.dtype) for i, x in enumerate(like)]
        if any(o is None for o in outs) or not _in_place_safe(outs, ins):
            return kernel(attrs, ins, ctx)
        flat_in = [x.reshape(-1) for x in ins]
        flat_out = [o.reshape(-1) for o in outs]
        for lo in range(0, w.size, BLOCK):
            hi = min(lo + BLOCK, w.size)
            for o, value in zip(flat_out, kernel(attrs, [x[lo:hi] for x in flat_in], ctx)):
                o[lo:hi] = value
        return outs

    return forward


def _in_place_safe(outs, ins) -> bool:
    """Whether every output buffer is either an input exactly or disjoint from all inputs (a
    partial overlap would let one block's writes reach another block's inputs)."""
    return all(same_buffer(o, x) or not np.may_share_memory(o, x) for o in outs for x in ins) and \
        all(not np.may_share_memory(a, b) for i, a in enumerate(outs) for b in outs[i + 1:])


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
        forward=_blocked(_kernel),
        gradient=(lambda n: lambda ctx: [None] * n)(len(_args)),
        tdl=(lambda name, a, o: lambda attrs, i, out: multi_elementwise(
            i, out[0], [f"{name}_{x}" for x in o], a, [f"new_{x}" if x != "output" else "output" for x in o]))(
            _name, _args, _outs),
        elementwise=True,
        doc=f"{_name}: MXNet's update; inputs {_args}, outputs {_outs} (only the first is visible).",
    ))
