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
from .softmax import softmax_forward
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
        n = data[0]
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
        return [softmax_forward(ctx, x, 1)]
    if attrs["preserve_shape"]:
        return [softmax_forward(ctx, x, -1)]
    return [softmax_forward(ctx, x, 1, rows=True)]


def _so_norm_scale(attrs, data_shape, label_shape):
    """grad_scale / divisor of the batch and null normalizations, from the full shapes (a tile
    of a partitioned run must still divide by the whole batch); None for valid (the divisor
    is a count of labels) and unknown shapes."""
    if data_shape is None or label_shape is None:
        return None
    data_shape, label_shape = tuple(data_shape), tuple(label_shape)
    scale, norm = attrs["grad_scale"], attrs["normalization"]
    if label_shape == data_shape:  # probability labels: no normalization
        return scale
    if norm == "valid":
        return None
    if attrs["multi_output"]:
        n = data_shape[0]
        s = int(np.prod(data_shape[2:])) if len(data_shape) > 2 else 1
        return scale / s / (n if norm == "batch" else 1)
    return scale / (int(np.prod(label_shape)) if norm == "batch" else 1)


def _so_uses_count(attrs, data_shape, label_shape):
    return attrs["normalization"] == "valid" and (
        data_shape is None or label_shape is None or tuple(data_shape) != tuple(label_shape))


def _so_gradient(ctx):
    shapes = list(ctx.in_shapes or []) + [None, None]
    data_shape, label_shape = shapes[0], shapes[1]
    out, label = ctx.outputs[0], ctx.inputs[1]
    attrs = {k: ctx.attrs[k] for k in _SO_PARAMS}
    attrs["norm_scale"] = _so_norm_scale(ctx.attrs, data_shape, label_shape)
    args = [out, label]
    if _so_uses_count(ctx.attrs, data_shape, label_shape):
        attrs["with_count"] = True
        args.append(ctx.op("_backward_SoftmaxOutput_valid_count", label, ignore_label=ctx.attrs["ignore_label"]))
    if ctx.attrs["out_grad"]:
        args.append(ctx.out_grads[0])
    return [ctx.op("_backward_SoftmaxOutput", *args, **attrs), None]


def first_label_out_of_range(labels, k: int, ignore=None):
    """The first class label of `labels` outside [0, k) as the gradient reads it (a float label
    truncated to an integer; NaN or an infinity as itself), labels equal to `ignore` exempt;
    None when all lie in range. The kernels' check, and the JAX step's on the host."""
    lab = np.asarray(labels).reshape(-1)
    if lab.dtype.kind == "f":
        odd = ~np.isfinite(lab)
        if odd.any():
            return lab[odd][0].item()
    idx = lab.astype(np.int64)
    bad = (idx < 0) | (idx >= k)
    if ignore is not None:
        bad &= idx != int(ignore)
    return int(idx[bad][0]) if bad.any() else None


def _class_targets(labels, k: int, alpha: float, op: str):
    """One-hot (label-smoothed) targets of shape labels.shape + (k,) for float class indices."""
    bad = first_label_out_of_range(labels, k)
    if bad is not None:
        raise ValueError(f"{op}: label {bad} is out of range [0, {k})")
    idx = labels.astype(np.int64)
    onehot = np.arange(k) == idx[..., None]
    if alpha == 0.0:
        return onehot.astype(np.float64)
    return np.where(onehot, 1.0 - alpha, alpha / max(k - 1, 1))


def _class_targets_safe(attrs, lab, k):
    """Targets where ignored rows (use_ignore) may carry any label value, even out of range."""
    if attrs["use_ignore"]:
        lab = np.where(lab.astype(np.int64) == int(attrs["ignore_label"]), 0, lab)
    return _class_targets(lab, k, attrs["smooth_alpha"], "SoftmaxOutput")


def valid_label_count(labels, ignore_label) -> int:
    """Number of labels that are not ignore_label (compared as integers, as MXNet does)."""
    return int(np.sum(labels.astype(np.int64).reshape(-1) != int(ignore_label)))


def class_labels(attrs, out_shape, label):
    """(labels, k): the class labels SoftmaxOutput's gradient reads from `label` (NumPy or
    jax) for an output of `out_shape`, as MXNet does (one per row of the 2-D view; per row
    and position with multi_output), and the number of classes."""
    size = int(np.prod(out_shape))
    flat = label.reshape(-1)
    if attrs["multi_output"]:
        n, k = out_shape[0], out_shape[1]
        return flat.reshape(n, size // (n * k)), k
    k = out_shape[-1] if attrs["preserve_shape"] else size // out_shape[0]
    return flat[:size // k], k


def softmax_output_grad(attrs, out, label, count=None, dy=None):
    """Gradient of SoftmaxOutput w.r.t. its data from the forward output, as MXNet 1.x
    computes it (softmax_output-inl.h): (out - target) * grad_scale / norm, rows with
    ignore_label zeroed when use_ignore; probability labels (same shape as data) skip
    ignoring and normalization. `out` holds whole rows (all classes) of the rows it covers
    and `label` their labels; the divisor comes from attrs["norm_scale"] (batch, null) or
    `count`, the number of valid labels (valid), else from the shapes seen here."""
    scale = attrs.get("norm_scale")
    if tuple(label.shape) == tuple(out.shape):  # probability labels
        grad = (out - label) * (attrs["grad_scale"] if scale is None else scale)
        return grad * dy if dy is not None else grad
    ignore = int(attrs["ignore_label"])
    norm = attrs["normalization"]
    flat = label.reshape(-1)
    if norm == "valid":
        valid = valid_label_count(flat, ignore) if count is None else int(round(float(np.asarray(count).reshape(-1)[0])))
        scale = attrs["grad_scale"] / max(valid, 1)
    lab, k = class_labels(attrs, out.shape, label)
    if attrs["multi_output"]:
        grad = out.reshape(lab.shape[0], k, lab.shape[1]) - np.moveaxis(_class_targets_safe(attrs, lab, k), -1, 1)
        if attrs["use_ignore"]:
            grad = grad * (lab.astype(np.int64) != ignore)[:, None, :]
        if scale is None:
            scale = _so_norm_scale(attrs, out.shape, label.shape)
    else:
        grad = out.reshape(-1, k) - _class_targets_safe(attrs, lab, k)  # one label per row of the 2-D view
        if attrs["use_ignore"]:
            grad = grad * (lab.astype(np.int64) != ignore)[:, None]
        if scale is None:
            scale = _so_norm_scale(attrs, out.shape, label.shape)
    grad = (grad * scale).reshape(out.shape)
    return grad * dy if dy is not None else grad


def _so_accesses(attrs, data_shape, label_shape, ov):
    """(row, label index): the data/output region one output element's softmax needs (class
    dims as ':') and the label element of its row. Where the label of a row is no box of the
    label (MXNet's N-d case without preserve_shape/multi_output, and flattened multi_output
    labels of several spatial dims) the rows widen until it is."""
    data_shape, label_shape = tuple(data_shape), tuple(label_shape)
    rank = len(data_shape)
    if label_shape == data_shape:
        return list(ov), list(ov)
    if attrs["multi_output"]:
        row = [ov[0], ":"] + list(ov[2:])
        spatial = data_shape[2:]
        if label_shape == (data_shape[0],) + spatial:
            return row, [ov[0]] + list(ov[2:])
        if label_shape == (data_shape[0], 1) + spatial:
            return row, [ov[0], "0"] + list(ov[2:])
        if len(spatial) <= 1:
            return row, [ov[0], ov[2] if spatial else "0"]
        return [ov[0]] + [":"] * (rank - 1), [ov[0], ":"]
    if attrs["preserve_shape"] or rank == 2:
        return list(ov[:-1]) + [":"], list(ov[:-1])
    return [":"] * rank, [":"] * len(label_shape)


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
    _, lidx = _so_accesses(attrs, data, label, ov)
    # The forward never reads the label; "0 * label[row]" keeps it aligned with its rows
    # instead of forcing every worker to hold all of it.
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

_SO_BWD_PARAMS = {
    **_SO_PARAMS,
    # grad_scale / divisor for the whole tensor, fixed when the gradient is built
    "norm_scale": Param("optional_float", None),
    # a third input holds the number of valid labels (normalization='valid')
    "with_count": Param("bool", False),
}


def _so_bwd_args(attrs):
    return ["output", "label"] + (["count"] if attrs["with_count"] else []) + (["dy"] if attrs["out_grad"] else [])


def _so_bwd_shape(attrs, in_shapes):
    (out, label), _ = _so_shape(attrs, in_shapes[:2])
    return [out, label] + ([(1,)] if attrs["with_count"] else []) + ([out] if attrs["out_grad"] else []), [out]


def _so_bwd_forward(attrs, ins, ctx):
    out, label = ins[0], ins[1]
    rest = list(ins[2:])
    count = rest.pop(0) if attrs["with_count"] else None
    dy = rest.pop(0) if attrs["out_grad"] else None
    return [cast(softmax_output_grad(attrs, out, label, count, dy), out)]


def _so_bwd_tdl(attrs, in_shapes, out_shapes):
    out, label = in_shapes[0], in_shapes[1]
    ov = index_vars(len(out))
    row, lidx = _so_accesses(attrs, out, label, ov)
    probability = tuple(out) == tuple(label)
    norm = attrs["normalization"]
    if not probability and attrs["norm_scale"] is None and not attrs["with_count"]:
        # Without the divisor fixed at gradient time the kernel derives it from what it sees:
        # the number of labels (batch), of valid labels (valid) or the spatial size of a row
        # (multi_output): it must see all of them.
        if norm in ("batch", "valid"):
            row, lidx = [":"] * len(out), [":"] * len(label)
        elif attrs["multi_output"]:
            row = [ov[0]] + [":"] * (len(out) - 1)
            lidx = [ov[0]] + [":"] * (len(label) - 1)
    reads = [access("output", row), access("label", lidx)]
    if attrs["with_count"]:
        reads.append("count[0]")
    if attrs["out_grad"]:
        reads.append(access("dy", row))
    return f"{header(_so_bwd_args(attrs), ['dx'])}: {access('dx', ov)} = softmax_ce_grad({', '.join(reads)})"


register(OpDef(
    name="_backward_SoftmaxOutput",
    params=_SO_BWD_PARAMS,
    arguments=_so_bwd_args,
    infer_shape=_so_bwd_shape,
    forward=_so_bwd_forward,
    tdl=_so_bwd_tdl,
))


def _count_tdl(fn):
    def tdl(attrs, in_shapes, out_shapes):
        red = index_vars(len(in_shapes[0]), "m")
        name = "label" if fn == "valid_label" else "output"  # the op's only input
        return f"{name} -> count: count[c] = sum({', '.join(red)}) {{ {fn}({access(name, red)}) }}"

    return tdl


register(OpDef(
    name="_backward_SoftmaxOutput_valid_count",
    params={"ignore_label": Param("float", -1.0)},
    arguments=lambda attrs: ["label"],
    infer_shape=lambda attrs, s: ([s[0]], [(1,)]),
    forward=lambda attrs, ins, ctx: [np.full((1,), valid_label_count(ins[0], attrs["ignore_label"]), dtype=ins[0].dtype)],
    tdl=_count_tdl("valid_label"),
    doc="Number of labels that are not ignore_label, shape (1,) (SoftmaxOutput's valid normalization).",
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


def _reg_accesses(data, label, ov):
    """(data/output index, label index) of one element; a label of another layout than data
    (same size) is read whole, and then so is data, so a tile's kernel sees matching arrays."""
    if tuple(label) == tuple(data):
        return list(ov), list(ov)
    if len(label) == 1:
        return list(ov), list(ov[:1])
    return [":"] * len(data), [":"] * len(label)


def _reg_tdl(fn):
    def tdl(attrs, in_shapes, out_shapes):
        data, label = in_shapes
        ov = index_vars(len(data))
        _, lab = _reg_accesses(data, label, ov)
        # label is not read by the forward; "0 * label" keeps it aligned with data
        return (f"data, label -> out: {access('out', ov)} = {fn}({access('data', ov)}) "
                f"+ 0 * {access('label', lab)}")

    return tdl


def _reg_bwd_tdl(fn):
    def tdl(attrs, in_shapes, out_shapes):
        out, label = in_shapes
        ov = index_vars(len(out))
        idx, lab = _reg_accesses(out, label, ov)
        if attrs["norm_scale"] is None and len(label) > 1 and lab[0] != ":":
            # the kernel divides by the label elements per example it sees: whole examples
            idx = [ov[0]] + [":"] * (len(out) - 1)
            lab = [ov[0]] + [":"] * (len(label) - 1)
        return f"output, label -> dx: {access('dx', ov)} = {fn}({access('output', idx)}, {access('label', lab)})"

    return tdl


def _reg_norm_scale(grad_scale, label_shape):
    """grad_scale / num_output, num_output = label elements per example (whole label)."""
    if not label_shape:
        return grad_scale
    return grad_scale / (int(np.prod(label_shape)) // label_shape[0])


def _reg_bwd_forward(grad_fn):
    def forward(attrs, ins, ctx):
        out, label = ins
        scale = attrs["norm_scale"]
        if scale is None:
            scale = _reg_norm_scale(attrs["grad_scale"], label.shape)
        return [cast(grad_fn(out - label.reshape(out.shape)) * scale, out)]

    return forward


def _reg_gradient(bwd):
    def gradient(ctx):
        shapes = list(ctx.in_shapes or []) + [None, None]
        scale = None if shapes[1] is None else _reg_norm_scale(ctx.attrs["grad_scale"], tuple(shapes[1]))
        return [ctx.op(bwd, ctx.outputs[0], ctx.inputs[1], grad_scale=ctx.attrs["grad_scale"], norm_scale=scale),
                None]

    return gradient


for _name, (_bwd, _fwd, _gfn) in _REGRESSION.items():
    register(OpDef(
        name=_name,
        params=_REG_PARAMS,
        arguments=lambda attrs: ["data", "label"],
        infer_shape=_reg_shape(_name),
        forward=(lambda f: lambda attrs, ins, ctx: [cast(f(ins[0]), ins[0])])(_fwd),
        gradient=_reg_gradient(_bwd),
        tdl=_reg_tdl(_name),
        doc=f"{_name}: forward {'sigmoid(data)' if 'Logistic' in _name else 'data'}; backward "
            f"grad_scale / num_output * {'sign(out - label)' if 'MAE' in _name else '(out - label)'}.",
    ))
    register(OpDef(
        name=_bwd,
        params={**_REG_PARAMS, "norm_scale": Param("optional_float", None)},
        arguments=lambda attrs: ["output", "label"],
        infer_shape=(lambda n: lambda attrs, s: (_reg_shape(n)(attrs, s)[0], [s[0]]))(_bwd),
        forward=_reg_bwd_forward(_gfn),
        tdl=_reg_bwd_tdl(_bwd[1:]),
    ))

# ============================================================================= MakeLoss

_ML_PARAMS = {
    "grad_scale": Param("float", 1.0),
    "valid_thresh": Param("float", 0.0),
    "normalization": Param("str", "null", choices=("batch", "null", "valid")),
}


_ML_BWD_PARAMS = {
    **_ML_PARAMS,
    "norm_scale": Param("optional_float", None),  # grad_scale / batch size, fixed from the whole shape
    "with_count": Param("bool", False),  # a second input holds the number of valid elements
}


def _ml_bwd_forward(attrs, ins, ctx):
    out = ins[0]
    norm = attrs["normalization"]
    if norm == "valid":
        count = float(np.asarray(ins[1]).reshape(-1)[0]) if attrs["with_count"] else \
            float(np.sum(out > attrs["valid_thresh"]))
        scale = attrs["grad_scale"] / max(count, 1.0)
    elif attrs["norm_scale"] is not None:
        scale = attrs["norm_scale"]
    else:
        scale = attrs["grad_scale"] / (out.shape[0] if norm == "batch" and out.ndim else 1)
    return [np.full_like(out, scale)]


def _ml_bwd_tdl(attrs, in_shapes, out_shapes):
    ov = index_vars(len(in_shapes[0]))
    count = ", count[0]" if attrs["with_count"] else ""
    idx = list(ov)
    if attrs["normalization"] == "valid" and not attrs["with_count"]:
        idx = [":"] * len(ov)  # the kernel counts the valid elements over all of output
    elif attrs["normalization"] == "batch" and attrs["norm_scale"] is None and ov:
        idx[0] = ":"  # the kernel divides by the batch size it sees: the whole batch
    return (f"{header(_ml_bwd_args(attrs), ['dx'])}: {access('dx', ov)} = "
            f"make_loss_grad({access('output', idx)}{count})")


def _ml_bwd_args(attrs):
    return ["output"] + (["count"] if attrs["with_count"] else [])


def _ml_gradient(ctx):
    attrs = {k: ctx.attrs[k] for k in _ML_PARAMS}
    args = [ctx.outputs[0]]
    shape = (list(ctx.in_shapes or []) + [None])[0]
    if ctx.attrs["normalization"] == "valid":
        attrs["with_count"] = True
        args.append(ctx.op("_backward_MakeLoss_valid_count", ctx.outputs[0], valid_thresh=ctx.attrs["valid_thresh"]))
    elif shape is not None:
        batch = shape[0] if ctx.attrs["normalization"] == "batch" and len(shape) else 1
        attrs["norm_scale"] = ctx.attrs["grad_scale"] / batch
    return [ctx.op("_backward_MakeLoss", *args, **attrs)]


register(OpDef(
    name="MakeLoss",
    params=_ML_PARAMS,
    infer_shape=lambda attrs, s: ([s[0]], [s[0]]),
    forward=lambda attrs, ins, ctx: [ins[0].copy()],
    gradient=_ml_gradient,
    tdl=lambda attrs, i, o: multi_elementwise(i, o[0], ["identity"], ["data"], ["out"]),
    elementwise=True,
    doc="Marks data as a loss: forward identity; backward grad_scale / norm everywhere (head gradient ignored).",
))
alias("make_loss", "MakeLoss")

register(OpDef(
    name="_backward_MakeLoss",
    params=_ML_BWD_PARAMS,
    arguments=_ml_bwd_args,
    infer_shape=lambda attrs, s: ([s[0]] + ([(1,)] if attrs["with_count"] else []), [s[0]]),
    forward=_ml_bwd_forward,
    tdl=_ml_bwd_tdl,
))

register(OpDef(
    name="_backward_MakeLoss_valid_count",
    params={"valid_thresh": Param("float", 0.0)},
    arguments=lambda attrs: ["output"],
    infer_shape=lambda attrs, s: ([s[0]], [(1,)]),
    forward=lambda attrs, ins, ctx: [np.full((1,), np.sum(ins[0] > attrs["valid_thresh"]), dtype=ins[0].dtype)],
    tdl=_count_tdl("above_valid_thresh"),
    doc="Number of elements above valid_thresh, shape (1,) (MakeLoss's valid normalization).",
))
