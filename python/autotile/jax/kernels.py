"""Kernels the JAX step needs where the registry's kernel is NumPy-only (it calls ``np.``
functions, which a traced ``jax.numpy`` array refuses). Each has the registry signature
``forward(attrs, inputs, ctx)`` and takes its array module from ``ctx.xp``, so it also runs
on NumPy; the step tries this table first, then the array-module-generic kernels of the GPU
runtime (backend/gpu_kernels.py), then the registry's own kernel with ``ctx.xp`` set."""
from __future__ import annotations

from ..ops.loss import _so_norm_scale


def _softmax(xp, x, axis):
    z = x - x.max(axis=axis, keepdims=True)
    e = xp.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_output(attrs, inputs, ctx):
    """SoftmaxOutput's forward: the softmax of each row (MXNet's 2-D view unless
    multi_output or preserve_shape), as ops/loss.py computes it."""
    x = inputs[0]
    if attrs["multi_output"]:
        y = _softmax(ctx.xp, x, 1)
    elif attrs["preserve_shape"]:
        y = _softmax(ctx.xp, x, -1)
    else:
        y = _softmax(ctx.xp, x.reshape(x.shape[0], -1), 1).reshape(x.shape)
    return [y.astype(x.dtype)]


def _targets(xp, attrs, lab, k):
    """One-hot (label-smoothed) targets of shape lab.shape + (k,); ignored rows' labels (any
    value) are mapped to class 0 first, as ops/loss.py's _class_targets_safe does."""
    idx = lab.astype(xp.int32)
    if attrs["use_ignore"]:
        idx = xp.where(idx == int(attrs["ignore_label"]), 0, idx)
    onehot = xp.arange(k) == idx[..., None]
    alpha = attrs["smooth_alpha"]
    if alpha == 0.0:
        return onehot.astype(lab.dtype)
    return xp.where(onehot, 1.0 - alpha, alpha / max(k - 1, 1)).astype(lab.dtype)


def softmax_output_backward(attrs, inputs, ctx):
    """_backward_SoftmaxOutput: (out - target) * grad_scale / norm (ops/loss.py's
    softmax_output_grad, written against the array API: labels are not range-checked here,
    the single-device step checks them)."""
    xp = ctx.xp
    out, label = inputs[0], inputs[1]
    rest = list(inputs[2:])
    count = rest.pop(0) if attrs["with_count"] else None
    dy = rest.pop(0) if attrs["out_grad"] else None
    scale = attrs.get("norm_scale")
    if tuple(label.shape) == tuple(out.shape):  # probability labels
        grad = (out - label) * (attrs["grad_scale"] if scale is None else scale)
    else:
        if scale is None and attrs["normalization"] != "valid":
            scale = _so_norm_scale(attrs, out.shape, label.shape)
        flat = label.reshape(-1)
        ignore = int(attrs["ignore_label"])
        if attrs["multi_output"]:
            n, k = out.shape[0], out.shape[1]
            lab = flat.reshape(n, out.size // (n * k))
            grad = out.reshape(n, k, -1) - xp.moveaxis(_targets(xp, attrs, lab, k), -1, 1)
            keep = (lab.astype(xp.int32) != ignore)[:, None, :]
        else:
            k = out.shape[-1] if attrs["preserve_shape"] else out.size // out.shape[0]
            o = out.reshape(-1, k)
            lab = flat[:o.shape[0]]
            grad = o - _targets(xp, attrs, lab, k)
            keep = (lab.astype(xp.int32) != ignore)[:, None]
        if attrs["use_ignore"]:
            grad = grad * keep
        if attrs["normalization"] == "valid":
            valid = (flat.astype(xp.int32) != ignore).sum() if count is None else count.reshape(-1)[0]
            scale = attrs["grad_scale"] / xp.maximum(xp.round(valid), 1)
        grad = (grad * scale).reshape(out.shape)
    if dy is not None:
        grad = grad * dy
    return [grad.astype(out.dtype)]


#: op name -> kernel for the JAX step (ahead of backend/gpu_kernels.KERNELS)
KERNELS = {
    "SoftmaxOutput": softmax_output,
    "Softmax": softmax_output,
    "_backward_SoftmaxOutput": softmax_output_backward,
}
