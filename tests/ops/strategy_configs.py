"""Generated attribute configurations for the strategy validator (strategy_validator.py).

One list of :class:`Case` per op family, built by small generators over the attribute axes
that change how an op can be tiled: groups 1, 2 and depthwise; stride 1 and 2; dilation;
padding; kernel 1 and 3; sizes a split does not divide evenly (odd inputs behind an even
output, halos of different widths); broadcasting; keepdims; every axis. Shapes are picked
so that 2-way, 3-way and nested 2x2 cuts all find strategies (dims of 4, 6 and 12).

`CASES` holds them all (the slow sweep); `SAMPLE` (the CI sample) is one or two per op, the
regression cases, and as few more as it takes to reach every (op, TDL variable, cut) that any
case reaches at the CI's cuts (the strategy rows read from the TDL analysis: seconds, no step).
Known bugs in files this change does not own are marked `xfail` with the failing case's
message, so the sweep keeps running them and reports when they start to pass.
"""
from __future__ import annotations

import itertools
from typing import List

from strategy_configs_resample import resample_cases
from strategy_validator import Case, In, covering

def _e(op, shape=(4, 6), kind="normal", **attrs) -> Case:
    return Case(op, attrs, [In(shape, kind)])


# --------------------------------------------------------------------------- element-wise
UNARY = {  # op -> input kind
    "relu": "nonzero", "sigmoid": "normal", "tanh": "normal", "exp": "normal", "log": "positive",
    "sqrt": "positive", "reciprocal": "nonzero", "abs": "nonzero", "square": "normal", "erf": "normal",
    "gelu": "normal", "silu": "normal", "mish": "normal", "hard_sigmoid": "normal", "hard_swish": "normal",
    "negative": "normal", "sign": "nonzero", "floor": "normal", "ceil": "normal", "isnan": "normal",
    "logical_not": "binary", "_copy": "normal", "ones_like": "normal", "zeros_like": "normal",
    "BlockGrad": "normal", "sin": "normal", "cos": "normal",
}


def elementwise_cases() -> List[Case]:
    cases = [_e(op, kind=kind) for op, kind in UNARY.items()]
    cases += [_e("relu", (3, 4, 5), "nonzero"), _e("sigmoid", (12, 5))]
    cases += [_e("gelu", approximate="tanh"), _e("clip", kind="normal", a_min=-0.5, a_max=0.5),
              _e("Cast", dtype="float64"), _e("hard_sigmoid", alpha=0.3, beta=0.4)]
    cases += [_e("Activation", act_type=t, kind="nonzero") for t in ("relu", "sigmoid", "tanh", "softrelu", "softsign")]
    cases += [_e("LeakyReLU", act_type=t, kind="nonzero") for t in ("leaky", "elu", "selu", "gelu")]
    cases += [Case("LeakyReLU", {"act_type": "prelu"}, [In((4, 6, 2), "nonzero"), In((6,), "positive")]),
              _e("LeakyReLU", act_type="rrelu", kind="nonzero")]
    scalars = {"_plus_scalar": 1.5, "_minus_scalar": 1.5, "_rminus_scalar": 1.5, "_mul_scalar": 1.5,
               "_div_scalar": 1.5, "_maximum_scalar": 0.3, "_minimum_scalar": 0.3, "_power_scalar": 2.5,
               "_rpower_scalar": 2.0}
    cases += [_e(op, kind="positive" if op == "_power_scalar" else "normal", scalar=s) for op, s in scalars.items()]
    cases += [_e("_rdiv_scalar", kind="nonzero", scalar=2.0)]
    cases += [Case(op, {}, [In((4, 6)), In((4, 6), "nonzero" if op == "elemwise_div" else "normal")])
              for op in ("elemwise_add", "elemwise_sub", "elemwise_mul", "elemwise_div")]
    cases += [Case("add_n", {"num_args": 3}, [In((4, 6))] * 3)]
    cases += [Case("where", {}, [In((4, 6), "binary", data=True), In((4, 6)), In((4, 6))])]
    cases += [_e("Dropout", (4, 6), p=0.5), _e("Dropout", (4, 6, 2), p=0.3, axes=(1,))]
    return cases


BROADCAST = {  # op -> (lhs kind, rhs kind)
    "broadcast_add": ("normal", "normal"), "broadcast_sub": ("normal", "normal"),
    "broadcast_mul": ("normal", "normal"), "broadcast_div": ("normal", "nonzero"),
    "broadcast_maximum": ("normal", "normal"), "broadcast_minimum": ("normal", "normal"),
    "broadcast_power": ("positive", "normal"), "broadcast_mod": ("positive", "positive"),
    "broadcast_equal": ("binary", "binary"), "broadcast_not_equal": ("binary", "binary"),
    "broadcast_greater": ("normal", "normal"), "broadcast_greater_equal": ("binary", "binary"),
    "broadcast_lesser": ("normal", "normal"), "broadcast_lesser_equal": ("binary", "binary"),
    "broadcast_logical_and": ("binary", "binary"), "broadcast_logical_or": ("binary", "binary"),
    "broadcast_logical_xor": ("binary", "binary"),
}
#: operand shapes: same shape, a broadcast row, both broadcast (outer), a middle axis of 3-D
BROADCAST_SHAPES = [((4, 6), (4, 6)), ((4, 6), (1, 6)), ((4, 1), (1, 6)), ((2, 3, 4), (2, 1, 4))]


def broadcast_cases() -> List[Case]:
    cases = []
    for op, (lk, rk) in BROADCAST.items():
        shapes = BROADCAST_SHAPES if op in ("broadcast_add", "broadcast_mul", "broadcast_div",
                                            "broadcast_maximum", "broadcast_power") else BROADCAST_SHAPES[1:2]
        cases += [Case(op, {}, [In(a, lk), In(b, rk)]) for a, b in shapes]
    cases += [Case("broadcast_to", {"shape": (4, 6)}, [In((1, 6))]),
              Case("broadcast_to", {"shape": (4, 3, 6)}, [In((4, 1, 1))]),
              Case("broadcast_like", {}, [In((1, 6)), In((4, 6))]),
              Case("broadcast_like", {"lhs_axes": (0,), "rhs_axes": (1,)}, [In((1, 6)), In((2, 4))])]
    return cases


# --------------------------------------------------------------------------- reductions
def reduce_cases() -> List[Case]:
    cases = []
    for op in ("sum", "mean", "max", "min", "prod"):
        kind = "positive" if op == "prod" else "normal"
        axes = [None, 0, 1, 2, (0, 2)] if op in ("sum", "mean") else [1, None, (0, 2)]
        for axis in axes:
            attrs = {} if axis is None else {"axis": axis if isinstance(axis, tuple) else (axis,)}
            cases.append(Case(op, attrs, [In((4, 6, 3), kind)]))
        cases.append(Case(op, {"axis": (1,), "keepdims": True}, [In((4, 6, 3), kind)]))
        cases.append(Case(op, {"axis": (1,), "exclude": True}, [In((4, 6, 3), kind)]))
    cases += [Case("cumsum", {"axis": a, "exclusive": ex, "reverse": rev}, [In((4, 6))])
              for a, ex, rev in [(0, False, False), (1, False, False), (1, True, False), (0, False, True)]]
    cases += [Case("softmax", {"axis": a}, [In((4, 6, 3))]) for a in (-1, 1, 0)]
    cases += [Case("softmax", {"temperature": 2.0}, [In((4, 6))])]
    cases += [Case("log_softmax", {"axis": a}, [In((4, 6, 3))]) for a in (-1, 1)]
    cases += [Case("SoftmaxActivation", {"mode": m}, [In((4, 6, 3))]) for m in ("instance", "channel")]
    return cases


# --------------------------------------------------------------------------- losses
def loss_cases() -> List[Case]:
    lab = In((6,), "label:4")
    cases = [Case("SoftmaxOutput", {"normalization": n}, [In((6, 4)), lab]) for n in ("null", "batch", "valid")]
    cases += [Case("SoftmaxOutput", {"use_ignore": True, "ignore_label": 2, "normalization": "valid"},
                   [In((6, 4)), lab]),
              Case("SoftmaxOutput", {"multi_output": True}, [In((4, 3, 6)), In((4, 6), "label:3")]),
              Case("SoftmaxOutput", {"preserve_shape": True}, [In((4, 6)), In((4,), "label:6")]),
              Case("SoftmaxOutput", {"smooth_alpha": 0.1, "grad_scale": 2.0}, [In((6, 4)), lab])]
    for op in ("LinearRegressionOutput", "LogisticRegressionOutput", "MAERegressionOutput"):
        cases.append(Case(op, {"grad_scale": 2.0}, [In((4, 6)), In((4, 6), data=True)]))
    cases += [Case("MakeLoss", {"normalization": n}, [In((4, 6))]) for n in ("null", "batch")]
    cases += [Case("MakeLoss", {"normalization": "valid", "valid_thresh": 0.1}, [In((4, 6))])]
    return cases


# --------------------------------------------------------------------------- shapes/indexing
def shape_cases() -> List[Case]:
    x = [In((4, 6))]
    return [
        Case("Reshape", {"shape": (2, 2, 6)}, x), Case("Reshape", {"shape": (6, 4)}, x),
        Case("Reshape", {"shape": (-1,)}, [In((2, 6, 2))]), Case("Reshape", {"shape": (0, -1)}, [In((4, 3, 2))]),
        Case("Flatten", {}, [In((4, 2, 3))]), Case("squeeze", {}, [In((4, 1, 6))]),
        Case("squeeze", {"axis": (1,)}, [In((4, 1, 6, 1))]),
        *[Case("expand_dims", {"axis": a}, x) for a in (0, 1, 2)],
        Case("reshape_like", {}, [In((4, 6)), In((2, 12))]),
        Case("transpose", {"axes": (1, 0)}, x), Case("transpose", {"axes": (2, 0, 1)}, [In((4, 6, 3))]),
        Case("transpose", {}, [In((4, 6, 2))]),
        Case("SwapAxis", {"dim1": 0, "dim2": 2}, [In((4, 6, 2))]),
        Case("SwapAxis", {"dim1": 1, "dim2": 2}, [In((4, 6, 2))]),
        Case("slice", {"begin": (1, 0), "end": (5, 6), "step": (1, 2)}, [In((6, 6))]),
        Case("slice", {"begin": (None, 5), "end": (None, None), "step": (1, -2)}, [In((4, 6))]),
        Case("slice", {"begin": (0, 1), "end": (4, 5)}, [In((4, 6))]),
        Case("slice_axis", {"axis": 1, "begin": 1, "end": 5}, [In((4, 6))]),
        Case("slice_axis", {"axis": 0, "begin": 0, "end": 4}, [In((6, 6))]),
        Case("SliceChannel", {"num_outputs": 2, "axis": 1}, [In((4, 12))]),
        Case("SliceChannel", {"num_outputs": 3, "axis": 0, "squeeze_axis": True}, [In((3, 4, 2))]),
        Case("Concat", {"dim": 1, "num_args": 2}, [In((4, 2)), In((4, 4))]),
        Case("Concat", {"dim": 0, "num_args": 3}, [In((2, 6)), In((4, 6)), In((6, 6))]),
        Case("pad", {"mode": "constant", "pad_width": (0, 0, 0, 0, 1, 2, 0, 1), "constant_value": 0.5},
             [In((2, 4, 5, 6))]),
        Case("pad", {"mode": "edge", "pad_width": (0, 0, 0, 0, 1, 1, 2, 0)}, [In((2, 4, 6, 4))]),
        Case("pad", {"mode": "reflect", "pad_width": (0, 0, 0, 0, 1, 1, 1, 1)}, [In((2, 4, 6, 4))]),
        Case("tile", {"reps": (2, 3)}, [In((2, 2))]), Case("tile", {"reps": (1, 2, 1)}, [In((4, 3, 6))]),
        Case("trilu", {"upper": True, "k": 0}, [In((4, 6))]), Case("trilu", {"upper": False, "k": 1}, [In((2, 4, 6))]),
        Case("take", {"axis": 0}, [In((6, 4)), In((4, 3), "index:6", data=True)]),
        Case("take", {"axis": 1, "mode": "wrap"}, [In((4, 6)), In((2, 3), "index:9", data=True)]),
        Case("Embedding", {"input_dim": 6, "output_dim": 4, "dtype": "float64"},
             [In((4, 3), "index:6", data=True), In((6, 4))]),
        Case("Embedding", {"input_dim": 6, "output_dim": 4}, [In((4, 3), "index:6", data=True), In((6, 4))]),
        Case("gather_nd", {}, [In((4, 6)), In((2, 6), "index:4", data=True)]),
        Case("gather_elements", {"axis": 0}, [In((4, 6)), In((4, 6), "index:4", data=True)]),
        Case("gather_elements", {"axis": 1}, [In((4, 6)), In((4, 3), "index:6", data=True)]),
    ]


# --------------------------------------------------------------------------- dense
def dense_cases() -> List[Case]:
    return [
        Case("FullyConnected", {"num_hidden": 4}, [In((6, 4)), In((4, 4)), In((4,))]),
        Case("FullyConnected", {"num_hidden": 6, "no_bias": True}, [In((4, 2, 3)), In((6, 6))]),
        Case("FullyConnected", {"num_hidden": 4}, [In((2, 6, 4)), In((4, 24)), In((4,))]),
        Case("FullyConnected", {"num_hidden": 4, "flatten": False}, [In((4, 3, 6)), In((4, 6)), In((4,))]),
        Case("FullyConnected", {"num_hidden": 4}, [In((6, 4)), In((4, 4)), In((4,))], optimizer="adam"),
        Case("FullyConnected", {"num_hidden": 4}, [In((6, 4)), In((4, 4)), In((4,))], optimizer="momentum",
             optimizer_args={"momentum": 0.9}),
        Case("dot", {}, [In((4, 6)), In((6, 4))]), Case("dot", {"transpose_a": True}, [In((6, 4)), In((6, 4))]),
        Case("dot", {"transpose_b": True}, [In((4, 6)), In((2, 6))]),
        Case("dot", {}, [In((2, 3, 4)), In((4, 6))]),
        Case("batch_dot", {}, [In((2, 4, 6)), In((2, 6, 3))]),
        Case("batch_dot", {"transpose_a": True, "transpose_b": True}, [In((2, 6, 4)), In((2, 3, 6))]),
    ]


# --------------------------------------------------------------------------- normalization
def norm_cases() -> List[Case]:
    g = lambda c: [In((c,), "positive"), In((c,))]  # noqa: E731
    return [
        Case("BatchNorm", {"fix_gamma": False}, [In((4, 6, 2, 2)), *g(6)]),
        Case("BatchNorm", {"fix_gamma": True, "momentum": 0.8}, [In((4, 6, 3)), *g(6)]),
        Case("BatchNorm", {"fix_gamma": False}, [In((12, 4)), *g(4)]),
        Case("BatchNorm", {"fix_gamma": False, "use_global_stats": True}, [In((4, 6, 2)), *g(6)]),
        Case("BatchNorm", {"fix_gamma": False, "axis": -1}, [In((4, 3, 6)), *g(6)]),
        Case("LayerNorm", {}, [In((4, 6)), *g(6)]), Case("LayerNorm", {"axis": 1}, [In((4, 6, 2)), *g(6)]),
        Case("GroupNorm", {"num_groups": 2}, [In((4, 6, 2, 2)), *g(6)]),
        Case("GroupNorm", {"num_groups": 3}, [In((2, 6, 4)), *g(6)]),
        Case("InstanceNorm", {}, [In((4, 6, 2, 2)), *g(6)]), Case("InstanceNorm", {}, [In((2, 4, 6)), *g(4)]),
        Case("RMSNorm", {}, [In((4, 6)), In((6,), "positive")]),
        Case("RMSNorm", {"axis": 1}, [In((4, 6, 2)), In((6,), "positive")]),
        Case("LRN", {"nsize": 3}, [In((2, 6, 4, 4))]), Case("LRN", {"nsize": 5, "alpha": 0.01}, [In((2, 12, 2, 2))]),
    ]


# --------------------------------------------------------------------------- convolution/pooling
def conv_cases() -> List[Case]:
    """Groups 1, 2 and depthwise x kernel 1/3 x stride 1/2 x pad x dilation, 1-D and 2-D, with
    input sizes (9, 7) a 2-way split of the output does not divide evenly."""
    cases = []
    for (c, group), k, stride, pad, dil in itertools.product(
            [(4, 1), (4, 2), (4, 4)], [1, 3], [1, 2], [0, 1], [1, 2]):
        if k == 1 and (pad or dil > 1):
            continue
        size = 8 if stride == 1 else 9
        attrs = {"kernel": (k, k), "num_filter": 4, "num_group": group, "stride": (stride, stride),
                 "pad": (pad, pad), "dilate": (dil, dil)}
        cases.append(Case("Convolution", attrs, [In((2, c, size, size)), In((4, c // group, k, k)), In((4,))]))
    cases += [Case("Convolution", {"kernel": (3,), "num_filter": 6, "pad": (1,)},
                   [In((4, 2, 12)), In((6, 2, 3)), In((6,))]),
              Case("Convolution", {"kernel": (3,), "num_filter": 4, "dilate": (2,), "no_bias": True},
                   [In((2, 4, 10)), In((4, 4, 3))]),
              Case("Convolution", {"kernel": (3, 1), "num_filter": 4, "stride": (2, 1), "pad": (1, 0)},
                   [In((2, 2, 7, 6)), In((4, 2, 3, 1)), In((4,))])]
    return cases


def pool_cases() -> List[Case]:
    cases = []
    for ptype in ("max", "avg", "sum"):
        cases += [Case("Pooling", {"kernel": (2, 2), "stride": (2, 2), "pool_type": ptype}, [In((2, 4, 8, 8))]),
                  Case("Pooling", {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": ptype},
                       [In((2, 4, 8, 8))]),
                  Case("Pooling", {"kernel": (1, 1), "global_pool": True, "pool_type": ptype}, [In((2, 4, 6, 6))])]
    cases += [Case("Pooling", {"kernel": (3, 3), "stride": (1, 1), "pad": (1, 1), "pool_type": "avg",
                               "count_include_pad": False}, [In((2, 4, 6, 6))]),
              Case("Pooling", {"kernel": (3, 3), "stride": (2, 2), "pool_type": "max", "pooling_convention": "full"},
                   [In((2, 4, 8, 8))]),
              Case("Pooling", {"kernel": (4, 4), "pool_type": "avg"}, [In((2, 4, 4, 4))]),
              Case("Pooling", {"kernel": (3,), "stride": (2,), "pool_type": "max"}, [In((4, 2, 9))]),
]
    return cases


# --------------------------------------------------------------------------- more axes and sizes
def axis_cases() -> List[Case]:
    """Negative and last axes, odd sizes, 3-D/4-D variants and optimizer attributes."""
    return [
        Case("sum", {"axis": (-1,), "keepdims": True}, [In((4, 6, 3))]),
        Case("mean", {"axis": (0, 1, 2)}, [In((4, 6, 2))]),
        Case("max", {"axis": (0,), "keepdims": True}, [In((4, 6, 3))]),
        Case("min", {"axis": (2,)}, [In((4, 6, 3))]),
        Case("prod", {"axis": (-1,), "keepdims": True}, [In((4, 6, 3), "positive")]),
        Case("log_softmax", {"axis": 0}, [In((4, 6))]),
        Case("softmax", {"axis": -2}, [In((2, 6, 4))]),
        Case("cumsum", {"axis": 2, "exclusive": True, "reverse": True}, [In((2, 4, 6))]),
        Case("trilu", {"upper": True, "k": -1}, [In((6, 4))]),
        Case("relu", {}, [In((12, 5), "nonzero")]), Case("square", {}, [In((2, 6, 4, 2))]),
        Case("Activation", {"act_type": "tanh"}, [In((4, 3, 6))]),
        Case("Cast", {"dtype": "float32"}, [In((4, 6))]),
        Case("Dropout", {"p": 0.5, "mode": "always"}, [In((4, 6))]),
        Case("Dropout", {"p": 0.0}, [In((4, 6))]),
        Case("slice", {"begin": (-3, 1), "end": (None, -1)}, [In((6, 6))]),
        Case("slice", {"begin": (0, 0, 1), "end": (4, 6, 3), "step": (2, 1, 1)}, [In((4, 6, 3))]),
        Case("slice_axis", {"axis": -1, "begin": -4, "end": None}, [In((4, 6))]),
        Case("SliceChannel", {"num_outputs": 2, "axis": -1}, [In((4, 3, 4))]),
        Case("Concat", {"dim": 2, "num_args": 2}, [In((2, 4, 3)), In((2, 4, 3))]),
        Case("Concat", {"dim": -1, "num_args": 2}, [In((4, 5)), In((4, 1))]),
        Case("transpose", {"axes": (0, 2, 3, 1)}, [In((2, 4, 6, 2))]),
        Case("pad", {"mode": "constant", "pad_width": (0, 0, 0, 0, 2, 1)}, [In((4, 2, 6))]),
        Case("take", {"axis": 0, "mode": "clip"}, [In((6, 4)), In((4, 3), "index:9", data=True)]),
        Case("take", {"axis": -1}, [In((2, 3, 6)), In((4,), "index:6", data=True)]),
        Case("gather_nd", {}, [In((4, 6, 2)), In((2, 3), "index:4", data=True)]),
        Case("SoftmaxOutput", {"multi_output": True, "use_ignore": True, "ignore_label": 1,
                               "normalization": "valid"}, [In((4, 3, 6)), In((4, 6), "label:3")]),
        Case("LayerNorm", {"axis": 0}, [In((4, 6)), In((4,), "positive"), In((4,))]),
        Case("GroupNorm", {"num_groups": 1}, [In((2, 6, 4)), In((6,), "positive"), In((6,))]),
        Case("GroupNorm", {"num_groups": 6}, [In((4, 6, 2)), In((6,), "positive"), In((6,))]),
        Case("BatchNorm", {"fix_gamma": False, "axis": 3}, [In((4, 2, 2, 6)), In((6,), "positive"), In((6,))]),
        Case("BatchNorm", {"fix_gamma": False, "output_mean_var": True}, [In((4, 6)), In((6,), "positive"), In((6,))]),
        Case("Convolution", {"kernel": (3, 3), "num_filter": 6, "num_group": 3, "stride": (2, 2)},
             [In((2, 6, 9, 9)), In((6, 2, 3, 3)), In((6,))]),
        Case("Convolution", {"kernel": (3, 3), "num_filter": 12, "num_group": 6, "pad": (1, 1)},
             [In((2, 6, 6, 6)), In((12, 1, 3, 3)), In((12,))]),
        Case("Convolution", {"kernel": (3, 3, 3), "num_filter": 2, "pad": (1, 1, 1), "stride": (2, 2, 2)},
             [In((2, 2, 5, 4, 4)), In((2, 2, 3, 3, 3)), In((2,))]),
        Case("Pooling", {"kernel": (3, 3), "stride": (2, 2), "pool_type": "avg"}, [In((2, 4, 9, 9))]),
        Case("Pooling", {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": "max",
                         "pooling_convention": "full"}, [In((2, 4, 7, 8))]),
        Case("Pooling", {"kernel": (2, 2, 2), "stride": (2, 2, 2), "pool_type": "avg"}, [In((2, 2, 4, 4, 4))]),
        Case("FullyConnected", {"num_hidden": 4}, [In((6, 4)), In((4, 4)), In((4,))], optimizer="adam",
             optimizer_args={"wd": 0.01, "clip_gradient": 0.5, "rescale_grad": 0.5}),
        Case("FullyConnected", {"num_hidden": 4}, [In((6, 4)), In((4, 4)), In((4,))], optimizer="momentum",
             optimizer_args={"momentum": 0.9, "wd": 0.01, "clip_gradient": 0.3}),
        Case("FullyConnected", {"num_hidden": 4}, [In((6, 4)), In((4, 4)), In((4,))],
             optimizer_args={"wd": 0.01, "clip_gradient": 0.3, "rescale_grad": 2.0}),
        Case("dot", {"transpose_b": True}, [In((2, 3, 4)), In((6, 4))]),
    ]


#: the cases of the bugs this validator found (issue 22 and since): each fails on the code
#: before its fix, and runs in the CI sample
REGRESSIONS: List[Case] = [
    # depthwise conv's data gradient split along channels kept num_group (fixed in 501133c)
    Case("Convolution", {"kernel": (3, 3), "num_filter": 4, "num_group": 4, "stride": (2, 2), "pad": (1, 1)},
         [In((2, 4, 9, 9)), In((4, 1, 3, 3)), In((4,))]),
    # global average pooling's backward split along a spatial axis: k times the gradient (501133c)
    Case("Pooling", {"kernel": (1, 1), "global_pool": True, "pool_type": "avg"}, [In((2, 4, 6, 6))]),
    # a 4x4 average pool's backward split along ix: kernel larger than the slab (501133c)
    Case("Pooling", {"kernel": (4, 4), "pool_type": "avg"}, [In((2, 4, 4, 4))]),
    # max/min/prod split along a reduced axis: partial maxima were summed
    Case("max", {"axis": (1,)}, [In((4, 6, 3))]),
    Case("prod", {}, [In((4, 6, 3), "positive")]),
    # rrelu drew its slopes per tile from the step's generator: other slopes than one device
    _e("LeakyReLU", act_type="rrelu", kind="nonzero"),
    # FullyConnected over (4, 2, 3) split 3 ways along k1 (strided weight columns), and its
    # weight gradient's kk slabs that cut through a row of data's leading dim
    Case("FullyConnected", {"num_hidden": 6, "no_bias": True}, [In((4, 2, 3)), In((6, 6))]),
    Case("FullyConnected", {"num_hidden": 4}, [In((2, 6, 4)), In((4, 24)), In((4,))]),
]


def all_cases() -> List[Case]:
    cases = (elementwise_cases() + broadcast_cases() + reduce_cases() + loss_cases() + shape_cases()
             + dense_cases() + norm_cases() + conv_cases() + pool_cases() + axis_cases() + resample_cases())
    ids = {c.id for c in cases}
    return cases + [c for c in REGRESSIONS if c.id not in ids]


CASES: List[Case] = all_cases()


#: cases the CI sample takes beyond each op's first, so it reaches every registered op:
#: (op, attributes it must have, optimizer)
SAMPLE_ALSO = [
    ("LeakyReLU", {"act_type": "prelu"}, "sgd"),  # _backward_LeakyReLU_gamma
    ("MakeLoss", {"normalization": "valid"}, "sgd"),  # _backward_MakeLoss_valid_count
    ("SoftmaxOutput", {"normalization": "valid"}, "sgd"),  # _backward_SoftmaxOutput_valid_count
    ("BatchNorm", {"use_global_stats": True}, "sgd"),  # BatchNorm itself (not expanded) and its backward
    ("FullyConnected", {}, "adam"), ("FullyConnected", {}, "momentum"),  # adam_update, sgd_mom_update
]


def sample(cases: List[Case] = CASES) -> List[Case]:
    """The CI sample: the first case of each op, the first matching each SAMPLE_ALSO entry,
    every case with a known bug, the regression cases, then (strategy_validator.covering) the
    cases that reach the (op, variable, cut) keys those do not, so that every strategy any
    configuration reaches at the CI's cuts runs in the sample (an average-pool divisor and a
    _backward_Concat bug at the tile origin passed a one-case-per-op sample)."""
    seen, out = set(), []
    regress = {c.id for c in REGRESSIONS}
    also = list(SAMPLE_ALSO)
    for c in cases:
        hit = next((a for a in also if a[0] == c.op and a[2] == c.optimizer
                    and all(c.attrs.get(k) == v for k, v in a[1].items())), None)
        if hit:
            also.remove(hit)
        if c.op not in seen or c.xfail or c.id in regress or hit:
            seen.add(c.op)
            out.append(c)
    return out + covering(cases, out)


SAMPLE: List[Case] = sample()
