"""Loss heads, MXNet 1.x semantics: SoftmaxOutput (alias Softmax), LinearRegressionOutput,
LogisticRegressionOutput, MAERegressionOutput and MakeLoss.

A loss head's gradient does not use the incoming head gradient (MXNet ignores it: the loss
is the end of the graph), except SoftmaxOutput with out_grad=True, which multiplies by it.
Labels get no gradient. Labels are float class indices (SoftmaxOutput) or targets."""
from __future__ import annotations

import numpy as np

from ..errors import Error
from ._ew_util import cast, fmt, multi_elementwise
from .registry import OpDef, Param, alias, register
from .softmax import softmax_np
from .tdl_helpers import access, header, index_vars

# ============================================================================= SoftmaxOutput

_SO_PARAMS = {
    "grad_scale": Param("float", 1.0),
    "ignore_label": Param("float", -1.0),
    "multi_output": Param("bool", False),
    "use_ignore": Param("bool", False),
    "preserve_shape": Param("bool", False),
    "normalization": Param("str", "null", choices=("null", "batch", "valid")),
    "out_grad": Param("bool", False),
    "smooth_alpha": Param("float", 0.0),
}


def _so_label_shapes(attrs, data):
    """Label shapes SoftmaxOutput accepts for `data` (first = the one it infers)."""
    data = tuple(data)
    if attrs["multi_output"]:
        n, k = data[0], data[1]
        rest = int(np.prod(data[2:])) if len(data) > 2 else 1
        return [(n, rest), (n,) + data[2:], (n, 1) + data[2:]]
    return [data[:-1]]


def _so_shape(attrs, in_shapes):
    data, label = in_shapes
    if data is None:
        return [data, label], [None]
    data = tuple(data)
    if attrs["multi_output"] and len(data) < 2:
        raise Error(f"SoftmaxOutput multi_output=True needs data of rank >= 2, got shape {fmt(data)}")
    if len(data) < 1 or (len(data) == 1 and not attrs["multi_output"]):
        raise Error(f"SoftmaxOutput needs data of rank >= 2 (batch, classes), got shape {fmt(data)}")
    allowed = _so_label_shapes(attrs, data)
    if label is None:
        label = allowed[0]
    elif tuple(label) != data and tuple(label) not in allowed:
        want = " or ".join(fmt(s) for s in allowed + [data])
        raise Error(f"SoftmaxOutput: label has shape {fmt(label)} but data of shape {fmt(data)} needs {want}")
    return [data, tuple(label)], [data]


def _so_forward(attrs, ins, ctx):
    x = ins[0]
    if attrs["multi_output"]:
        return [cast(softmax_np(x, 1), x)]
    if attrs["preserve_shape"]:
        return [cast(softmax_np(x, -1), x)]
    return [cast(softmax_np(x.reshape(x.shape[0], -1), 1).reshape(x.shape), x)]


def _so_gradient(ctx):
    args = [ctx.outputs[0], ctx.inputs[1]] + ([ctx.out_grads[0]] if ctx.attrs["out_grad"] else [])
    return [ctx.op("_backward_SoftmaxOutput", *args, **{k: ctx.attrs[k] for k in _SO_PARAMS}), None]


def _class_targets(labels, k: int, alpha: float, op: str):
    """One-hot (label-smoothed) targets of shape labels.shape + (k,) for float class indices."""
    idx = labels.astype(np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= k):
        bad = idx[(idx < 0) | (idx >= k)][0]
        raise ValueError(f"{op}: label {bad} is out of range [0, {k})")
    onehot = np.arange(k) == idx[..., None]
    if alpha == 0.0:
        return onehot.astype(np.float64)
    return np.where(onehot, 1.0 - alpha, alpha / max(k - 1, 1))


def softmax_output_grad(attrs, out, label, dy=None):
    """Gradient of SoftmaxOutput w.r.t. its data from the forward output, as MXNet 1.x
    computes it (softmax_output-inl.h): (out - target) * grad_scale / norm, rows with
    ignore_label zeroed when use_ignore; probability labels (same shape as data) skip
    ignoring and normalization."""
    scale = attrs["grad_scale"]
    if tuple(label.shape) == tuple(out.shape):  # probability labels
        grad = (out - label) * scale
        return grad * dy if dy is not None else grad
    ignore = int(attrs["ignore_label"])
    norm = attrs["normalization"]
    flat = label.reshape(-1)
    ignored_count = int(np.sum(flat.astype(np.int64) == ignore))
    if attrs["multi_output"]:
        n, k = out.shape[0], out.shape[1]
        s = out.size // (n * k)
        o = out.reshape(n, k, s)
        lab = flat.reshape(n, s)
        target = np.moveaxis(_class_targets_safe(attrs, lab, k), -1, 1)  # (n, k, s)
        grad = o - target
        if attrs["use_ignore"]:
            grad = grad * (lab.astype(np.int64) != ignore)[:, None, :]
        count = {"batch": n, "valid": max(flat.size - ignored_count, 1), "null": 1}[norm]
        grad = grad * (scale / (1 if norm == "valid" else s) / count)
    else:
        k = out.shape[-1] if attrs["preserve_shape"] else out.size // out.shape[0]
        o = out.reshape(-1, k)
        lab = flat[:o.shape[0]]  # MXNet reads one label per row of the 2-D view
        grad = o - _class_targets_safe(attrs, lab, k)
        if attrs["use_ignore"]:
            grad = grad * (lab.astype(np.int64) != ignore)[:, None]
        count = {"batch": flat.size, "valid": max(flat.size - ignored_count, 1), "null": 1}[norm]
        grad = grad * (scale / count)
    grad = grad.reshape(out.shape)
    return grad * dy if dy is not None else grad


def _class_targets_safe(attrs, lab, k):
    """Targets where ignored rows (use_ignore) may carry any label value, even out of range."""
    if attrs["use_ignore"]:
        lab = np.where(lab.astype(np.int64) == int(attrs["ignore_label"]), 0, lab)
    return _class_targets(lab, k, attrs["smooth_alpha"], "SoftmaxOutput")


def _so_row_index(attrs, data_shape, label_shape, ov):
    """Index of the label element that output element `ov` uses, or None when it is no
    affine function of `ov` (MXNet's odd N-d case without preserve_shape/multi_output)."""
    data_shape, label_shape = tuple(data_shape), tuple(label_shape)
    if label_shape == data_shape:
        return list(ov)
    if attrs["multi_output"]:
        spatial = data_shape[2:]
        if label_shape == (data_shape[0],) + spatial:
            return [ov[0]] + list(ov[2:])
        if label_shape == (data_shape[0], 1) + spatial:
            return [ov[0], "0"] + list(ov[2:])
        strides = [int(np.prod(spatial[d + 1:])) for d in range(len(spatial))]
        flat = " + ".join(f"{st}*{v}" if st != 1 else v for st, v in zip(strides, ov[2:])) or "0"
        return [ov[0], flat]
    if attrs["preserve_shape"] or len(data_shape) == 2:
        return list(ov[:-1])
    return None


def _so_tdl(attrs, in_shapes, out_shapes):
    data, label = in_shapes
    ov = index_vars(len(data))
    if attrs["multi_output"]:
        axes = [1]
    elif attrs["preserve_shape"]:
        axes = [len(data) - 1]
    else:
        axes = list(range(1, len(data)))
    row = [f"k{d}" if d in axes else ov[d] for d in range(len(data))]
    red = ", ".join(f"k{d}" for d in axes)
    body = f"exp({access('data', ov)}) / sum({red}) {{ exp({access('data', row)}) }}"
    lidx = _so_row_index(attrs, data, label, ov)
    # The forward never reads the label; "0 * label[row]" keeps it aligned with its rows
    # instead of forcing every worker to hold all of it.
    if lidx is not None:
        body += f" + 0 * {access('label', lidx)}"
    return f"{header(['data', 'label'], ['out'])}: {access('out', ov)} = {body}"


register(OpDef(
    name="SoftmaxOutput",
    params=_SO_PARAMS,
    arguments=lambda attrs: ["data", "label"],
    infer_shape=_so_shape,
    forward=_so_forward,
    gradient=_so_gradient,
    tdl=_so_tdl,
    doc="Softmax forward; backward gives the cross-entropy gradient (softmax - one_hot(label)) "
        "* grad_scale / norm, ignoring the head gradient (MXNet's SoftmaxOutput).",
))
alias("Softmax", "SoftmaxOutput")


def _so_bwd_args(attrs):
    return ["output", "label"] + (["dy"] if attrs["out_grad"] else [])


def _so_bwd_shape(attrs, in_shapes):
    (out, label), _ = _so_shape(attrs, in_shapes[:2])
    return [out, label] + ([out] if attrs["out_grad"] else []), [out]


def _so_bwd_tdl(attrs, in_shapes, out_shapes):
    out, label = in_shapes[0], in_shapes[1]
    ov = index_vars(len(out))
    lidx = _so_row_index(attrs, out, label, ov)
    reads = [access("output", ov), access("label", lidx) if lidx is not None
             else access("label", [":"] * len(label))]
    if attrs["out_grad"]:
        reads.append(access("dy", ov))
    body = f"softmax_ce_grad({', '.join(reads)})"
    if tuple(label) != tuple(out) and attrs["normalization"] == "valid":
        red = index_vars(len(label), "m")
        body += f" / sum({', '.join(red)}) {{ valid({access('label', red)}) }}"  # count of non-ignored labels
    return f"{header(_so_bwd_args(attrs), ['dx'])}: {access('dx', ov)} = {body}"


register(OpDef(
    name="_backward_SoftmaxOutput",
    params=_SO_PARAMS,
    arguments=_so_bwd_args,
    infer_shape=_so_bwd_shape,
    forward=lambda attrs, ins, ctx: [cast(softmax_output_grad(attrs, ins[0], ins[1], ins[2] if len(ins) > 2 else None),
                                          ins[0])],
    tdl=_so_bwd_tdl,
))

# ============================================================================= regression heads

_REG_PARAMS = {"grad_scale": Param("float", 1.0)}


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


# op -> (backward op name, forward transform, gradient of (out - label))
_REGRESSION = {
    "LinearRegressionOutput": ("_backward_linear_reg_out", lambda x: x, lambda d: d),
    "LogisticRegressionOutput": ("_backward_logistic_reg_out", _sigmoid, lambda d: d),
    "MAERegressionOutput": ("_backward_mae_reg_out", lambda x: x, np.sign),
}


def _reg_shape(name):
    def infer(attrs, in_shapes):
        data, label = in_shapes
        if data is None:
            return [data, label], [None]
        data = tuple(data)
        if label is None:
            # MXNet's convention: a (n, 1) output takes a 1-D label
            label = (data[0],) if len(data) == 2 and data[1] == 1 else data
        elif not label or label[0] != data[0] or int(np.prod(label)) != int(np.prod(data)):
            raise Error(f"{name}: label has shape {fmt(label)} which does not match data of shape {fmt(data)} "
                        f"(same batch size and number of elements needed)")
        return [data, tuple(label)], [data]

    return infer


def _reg_tdl(fn):
    def tdl(attrs, in_shapes, out_shapes):
        data, label = in_shapes
        ov = index_vars(len(data))
        if tuple(label) == tuple(data):
            lab = access("label", ov)
        elif len(label) == 1:
            lab = access("label", ov[:1])
        else:
            lab = access("label", [":"] * len(label))
        # label is not read by the forward; "0 * label" keeps it aligned with data
        return f"data, label -> out: {access('out', ov)} = {fn}({access('data', ov)}) + 0 * {lab}"

    return tdl


def _reg_bwd_tdl(fn):
    def tdl(attrs, in_shapes, out_shapes):
        out, label = in_shapes
        ov = index_vars(len(out))
        if tuple(label) == tuple(out):
            lab = access("label", ov)
        elif len(label) == 1:
            lab = access("label", ov[:1])
        else:
            lab = access("label", [":"] * len(label))
        return f"output, label -> dx: {access('dx', ov)} = {fn}({access('output', ov)}, {lab})"

    return tdl


def _reg_bwd_forward(grad_fn):
    def forward(attrs, ins, ctx):
        out, label = ins
        num_output = label.size // label.shape[0] if label.ndim else 1
        d = grad_fn(out - label.reshape(out.shape))
        return [cast(d * (attrs["grad_scale"] / num_output), out)]

    return forward


for _name, (_bwd, _fwd, _gfn) in _REGRESSION.items():
    register(OpDef(
        name=_name,
        params=_REG_PARAMS,
        arguments=lambda attrs: ["data", "label"],
        infer_shape=_reg_shape(_name),
        forward=(lambda f: lambda attrs, ins, ctx: [cast(f(ins[0]), ins[0])])(_fwd),
        gradient=(lambda b: lambda ctx: [ctx.op(b, ctx.outputs[0], ctx.inputs[1],
                                                grad_scale=ctx.attrs["grad_scale"]), None])(_bwd),
        tdl=_reg_tdl(_name),
        doc=f"{_name}: forward {'sigmoid(data)' if 'Logistic' in _name else 'data'}; backward "
            f"grad_scale / num_output * {'sign(out - label)' if 'MAE' in _name else '(out - label)'}.",
    ))
    register(OpDef(
        name=_bwd,
        params=_REG_PARAMS,
        arguments=lambda attrs: ["output", "label"],
        infer_shape=(lambda n: lambda attrs, s: (_reg_shape(n)(attrs, s)[0], [s[0]]))(_bwd),
        forward=_reg_bwd_forward(_gfn),
        tdl=_reg_bwd_tdl(_bwd[1:]),
        elementwise=False,
    ))

# ============================================================================= MakeLoss

_ML_PARAMS = {
    "grad_scale": Param("float", 1.0),
    "valid_thresh": Param("float", 0.0),
    "normalization": Param("str", "null", choices=("batch", "null", "valid")),
}


def _ml_bwd_forward(attrs, ins, ctx):
    out = ins[0]
    norm = attrs["normalization"]
    if norm == "batch":
        count = out.shape[0] if out.ndim else 1
    elif norm == "valid":
        count = max(int(np.sum(out > attrs["valid_thresh"])), 1)
    else:
        count = 1
    return [np.full_like(out, attrs["grad_scale"] / count)]


def _ml_bwd_tdl(attrs, in_shapes, out_shapes):
    shape = in_shapes[0]
    ov = index_vars(len(shape))
    body = f"make_loss_grad({access('output', ov)})"
    if attrs["normalization"] == "valid":
        red = index_vars(len(shape), "m")
        body += f" / sum({', '.join(red)}) {{ valid({access('output', red)}) }}"
    return f"output -> dx: {access('dx', ov)} = {body}"


register(OpDef(
    name="MakeLoss",
    params=_ML_PARAMS,
    infer_shape=lambda attrs, s: ([s[0]], [s[0]]),
    forward=lambda attrs, ins, ctx: [ins[0].copy()],
    gradient=lambda ctx: [ctx.op("_backward_MakeLoss", ctx.outputs[0],
                                 **{k: ctx.attrs[k] for k in _ML_PARAMS})],
    tdl=lambda attrs, i, o: multi_elementwise(i, o[0], ["identity"], ["data"], ["out"]),
    elementwise=True,
    doc="Marks data as a loss: forward identity; backward grad_scale / norm everywhere (head gradient ignored).",
))
alias("make_loss", "MakeLoss")

register(OpDef(
    name="_backward_MakeLoss",
    params=_ML_PARAMS,
    arguments=lambda attrs: ["output"],
    infer_shape=lambda attrs, s: ([s[0]], [s[0]]),
    forward=_ml_bwd_forward,
    tdl=_ml_bwd_tdl,
))
