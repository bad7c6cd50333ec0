"""TDL descriptions of the element-wise, broadcast, LeakyReLU, softmax, loss and optimizer ops:
every one parses in the C++ core (analyze_tdl), ops flagged element-wise are element-wise
for the analysis, every description covers what the kernel reads (tdl_interp oracle), and
the exact ones evaluate to the kernel's output."""
import numpy as np
import pytest

import autotile as at
from autotile.ops.registry import format_value
from tdl_interp import check_op_tdl

_core = pytest.importorskip("autotile._core")
# the oracle re-randomizes elements outside the described regions, e.g. log of negatives there
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
rng = np.random.default_rng(0)


def N(*shape):
    return rng.standard_normal(shape)


def P(*shape):
    return rng.uniform(0.5, 2.0, shape)


def labels(k, *shape):
    return rng.integers(0, k, shape).astype(np.float64)


def _label_perturb(k):
    return {"label": lambda r, shape: r.integers(0, k, shape).astype(np.float64)}


# (op, inputs, attrs, perturb)
CASES = []
for op in ["negative", "exp", "square", "abs", "sigmoid", "tanh", "relu", "zeros_like", "ones_like", "_copy",
           "BlockGrad"]:
    CASES.append((op, [N(3, 4)], {}, None))
CASES += [(op, [P(3, 4)], {}, None) for op in ["log", "sqrt", "reciprocal"]]
CASES.append(("clip", [N(3, 4)], {"a_min": -0.5, "a_max": 0.5}, None))
CASES += [(op, [N(2, 3), P(2, 3)], {}, None) for op in ["_backward_sqrt", "_backward_square", "_backward_abs",
                                                        "_backward_sigmoid", "_backward_tanh", "_backward_relu",
                                                        "_backward_reciprocal"]]
CASES.append(("_backward_clip", [N(2, 3), N(2, 3)], {"a_min": -0.5, "a_max": 0.5}, None))
CASES += [(op, [N(2, 3), P(2, 3)], {}, None) for op in ["elemwise_add", "elemwise_sub", "elemwise_mul",
                                                        "elemwise_div"]]
CASES.append(("_backward_div_rhs", [N(2, 3), N(2, 3), P(2, 3)], {}, None))
CASES.append(("add_n", [N(2, 3), N(2, 3), N(2, 3)], {"num_args": 3}, None))
CASES += [(op, [P(2, 3)], {"scalar": 1.5}, None) for op in
          ["_plus_scalar", "_minus_scalar", "_rminus_scalar", "_mul_scalar", "_div_scalar", "_rdiv_scalar",
           "_power_scalar", "_rpower_scalar", "_maximum_scalar", "_minimum_scalar"]]
CASES += [(op, [N(2, 3), P(2, 3)], {"scalar": 1.5}, None) for op in
          ["_backward_rdiv_scalar", "_backward_power_scalar", "_backward_rpower_scalar", "_backward_maximum_scalar",
           "_backward_minimum_scalar"]]
for op in ["broadcast_add", "broadcast_sub", "broadcast_mul", "broadcast_div", "broadcast_maximum",
           "broadcast_minimum", "broadcast_power"]:
    CASES.append((op, [P(2, 3, 4), P(3, 1)], {}, None))
    CASES.append((op, [P(2, 3), P(2, 3)], {}, None))
for op in ["_backward_broadcast_div_rhs", "_backward_broadcast_maximum_lhs", "_backward_broadcast_maximum_rhs",
           "_backward_broadcast_minimum_lhs", "_backward_broadcast_minimum_rhs", "_backward_broadcast_power_lhs",
           "_backward_broadcast_power_rhs"]:
    CASES.append((op, [N(2, 3, 4), P(2, 3, 1), P(4)], {}, None))
CASES.append(("_backward_broadcast_reduce", [N(2, 3, 4)], {"shape": (3, 1)}, None))
CASES.append(("_backward_broadcast_reduce", [N(2, 3, 4), N(4)], {}, None))
for act in ["leaky", "elu", "selu", "gelu", "rrelu"]:
    CASES.append(("LeakyReLU", [N(2, 3, 4)], {"act_type": act}, None))
    CASES.append(("_backward_LeakyReLU", [N(2, 3, 4), N(2, 3, 4)] + ([P(2, 3, 4)] if act == "rrelu" else []),
                  {"act_type": act}, None))
CASES.append(("LeakyReLU", [N(2, 3, 4), N(3)], {"act_type": "prelu"}, None))
CASES.append(("LeakyReLU", [N(2, 3, 4), N(1)], {"act_type": "prelu"}, None))
CASES.append(("_backward_LeakyReLU", [N(2, 3, 4), N(2, 3, 4), N(3)], {"act_type": "prelu"}, None))
CASES.append(("_backward_LeakyReLU_gamma", [N(2, 3, 4), N(2, 3, 4), N(3)], {"act_type": "prelu"}, None))
CASES.append(("_backward_LeakyReLU_gamma", [N(2, 3, 4), N(2, 3, 4), N(1)], {"act_type": "prelu"}, None))
for op in ["softmax", "log_softmax"]:
    for axis in (0, 1, -1):
        CASES.append((op, [N(2, 3, 4)], {"axis": axis, "temperature": 2.0}, None))
        CASES.append((f"_backward_{op}", [N(2, 3, 4), P(2, 3, 4) / 4], {"axis": axis}, None))
for mode, shape in [("instance", (2, 3, 2)), ("channel", (2, 3, 2))]:
    CASES.append(("SoftmaxActivation", [N(*shape)], {"mode": mode}, None))
    CASES.append(("_backward_SoftmaxActivation", [N(*shape), P(*shape) / 4], {"mode": mode}, None))
SO = [
    ((4, 5), (4,), {}),
    ((4, 5), (4,), {"normalization": "valid", "use_ignore": True, "ignore_label": 1}),
    ((4, 5), (4, 5), {"normalization": "batch"}),
    ((2, 3, 4), (2, 3), {"preserve_shape": True, "normalization": "batch"}),
    ((2, 3, 2, 2), (2, 4), {"multi_output": True}),
    ((2, 3, 2, 2), (2, 2, 2), {"multi_output": True, "normalization": "valid"}),
    ((2, 3, 2, 2), (2, 1, 2, 2), {"multi_output": True}),
    ((3, 2, 2), (3, 2), {}),
]
for dshape, lshape, attrs in SO:
    k = dshape[1] if attrs.get("multi_output") else (dshape[-1] if attrs.get("preserve_shape") or len(dshape) == 2
                                                     else int(np.prod(dshape[1:])))
    lab = P(*lshape) if lshape == dshape else labels(min(k, 2), *lshape)
    pert = None if lshape == dshape else _label_perturb(min(k, 2))
    CASES.append(("SoftmaxOutput", [N(*dshape), lab], attrs, pert))
    out = P(*dshape)
    CASES.append(("_backward_SoftmaxOutput", [out, lab], attrs, pert))
    if attrs.get("normalization") == "valid":
        CASES.append(("_backward_SoftmaxOutput", [out, lab, np.array([3.0])], dict(attrs, with_count=True), pert))
        CASES.append(("_backward_SoftmaxOutput_valid_count", [lab], {"ignore_label": 1}, None))
    else:
        CASES.append(("_backward_SoftmaxOutput", [out, lab], dict(attrs, norm_scale=0.25), pert))
CASES.append(("_backward_SoftmaxOutput", [P(4, 5), labels(5, 4), N(4, 5)], {"out_grad": True}, _label_perturb(5)))
for op, bwd in [("LinearRegressionOutput", "_backward_linear_reg_out"),
                ("LogisticRegressionOutput", "_backward_logistic_reg_out"),
                ("MAERegressionOutput", "_backward_mae_reg_out")]:
    CASES.append((op, [N(4, 3), N(4, 3)], {}, None))
    CASES.append((op, [N(4, 1), N(4)], {}, None))
    CASES.append((bwd, [N(4, 3), N(4, 3)], {"grad_scale": 2.0}, None))
    CASES.append((bwd, [N(4, 1), N(4)], {}, None))
    CASES.append((bwd, [N(4, 6), N(4, 2, 3)], {"norm_scale": 0.5}, None))
for norm in ["null", "batch", "valid"]:
    CASES.append(("MakeLoss", [N(3, 4)], {"normalization": norm}, None))
    CASES.append(("_backward_MakeLoss", [N(3, 4)], {"normalization": norm}, None))
CASES.append(("_backward_MakeLoss", [N(3, 4), np.array([5.0])], {"normalization": "valid", "with_count": True}, None))
CASES.append(("_backward_MakeLoss", [N(3, 4)], {"normalization": "batch", "norm_scale": 0.1}, None))
CASES.append(("_backward_MakeLoss_valid_count", [N(3, 4)], {"valid_thresh": 0.1}, None))
CASES.append(("sgd_update", [N(3, 4), N(3, 4)], {"lr": 0.1}, None))
CASES.append(("sgd_mom_update", [N(3, 4), N(3, 4), N(3, 4)], {"lr": 0.1, "momentum": 0.9}, None))
CASES.append(("adam_update", [N(3, 4), N(3, 4), N(3, 4), P(3, 4)], {"lr": 0.1}, None))

_IDS = [f"{c[0]}-{i}" for i, c in enumerate(CASES)]


def _shapes(op_name, inputs, attrs):
    op = at.ops.get(op_name)
    parsed = at.ops.parse_attrs(op, {k: format_value(v) for k, v in attrs.items()}, "op")
    in_shapes, out_shapes = op.infer_shape(parsed, [tuple(x.shape) for x in inputs])[:2]
    return op, parsed, in_shapes, out_shapes


@pytest.mark.parametrize("op_name,inputs,attrs,perturb", CASES, ids=_IDS)
def test_tdl_parses_in_core_and_covers_the_kernel(op_name, inputs, attrs, perturb):
    op, parsed, in_shapes, out_shapes = _shapes(op_name, inputs, attrs)
    text = op.tdl(parsed, in_shapes, out_shapes)
    result = _core.analyze_tdl(text, in_shapes, out_shapes, 2)
    if op.elementwise:
        assert result["elementwise"], f"{op_name} is flagged element-wise but its TDL is not: {text}"
    assert result["strategies"], f"{op_name}: no partition strategy at all for {text}"
    check_op_tdl(op_name, inputs, attrs, perturb=perturb, samples=12)


def test_every_op_of_these_families_has_a_case():
    import autotile.ops.broadcast_binary as bb
    import autotile.ops.elemwise as ew
    import autotile.ops.leaky_relu as lr
    import autotile.ops.loss as lo
    import autotile.ops.optimizer as opt
    import autotile.ops.scalar as sc
    import autotile.ops.softmax as sm
    import autotile.ops.unary as un

    modules = {m.__name__ for m in (bb, ew, lr, lo, opt, sc, sm, un)}
    mine = {name for name, op in at.ops.all_ops().items()
            if op.forward is not None and getattr(op.forward, "__module__", "") in modules and name == op.name}
    covered = {c[0] for c in CASES}
    assert mine and mine <= covered, f"ops without a TDL case: {sorted(mine - covered)}"


@pytest.mark.parametrize("op_name", ["elemwise_add", "broadcast_add", "broadcast_mul", "add_n"])
def test_elementwise_same_shape_descriptions_are_elementwise(op_name):
    n = 3 if op_name == "add_n" else 2
    attrs = {"num_args": 3} if op_name == "add_n" else {}
    op, parsed, in_shapes, out_shapes = _shapes(op_name, [N(4, 6)] * n, attrs)
    result = _core.analyze_tdl(op.tdl(parsed, in_shapes, out_shapes), in_shapes, out_shapes, 2)
    assert result["elementwise"]
    assert {s["var"] for s in result["strategies"]} == {"i0", "i1"}


def test_exact_descriptions_evaluate_to_the_kernel():
    fns = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "exp": np.exp,
           "identity": lambda x: x}
    check_op_tdl("elemwise_sub", [N(2, 3), N(2, 3)], exact=True, fns=fns)
    check_op_tdl("broadcast_mul", [N(2, 3, 2), N(3, 1)], exact=True, fns=fns)
    check_op_tdl("_backward_broadcast_reduce", [N(2, 3, 4)], {"shape": (1, 3, 1)}, exact=True)
    check_op_tdl("softmax", [N(2, 3)], {"axis": 0}, exact=True, fns=fns)
    check_op_tdl("MakeLoss", [N(2, 3)], exact=True, fns=fns)


def test_softmax_rows_stay_whole():
    # Tofu's softmax example (docs/tdl.md): splitting the batch halves data; splitting the
    # class dim needs every worker to read whole rows.
    op, parsed, in_shapes, out_shapes = _shapes("softmax", [N(4, 6)], {"axis": 1})
    result = _core.analyze_tdl(op.tdl(parsed, in_shapes, out_shapes), in_shapes, out_shapes, 2)
    by_var = {s["var"]: s for s in result["strategies"]}
    assert not result["elementwise"] and not any(s["reduction"] for s in result["strategies"])
    assert [tuple(iv) for iv in by_var["i0"]["inputs"][0]["per_worker"]] == [(0, 2), (2, 4)]
    assert [tuple(iv) for iv in by_var["i1"]["inputs"][0]["per_worker"]] == [(0, 6), (0, 6)]
