"""The kernels the JAX step runs (autotile/jax: the JAX table, the array-generic kernels, and
registry NumPy kernels traced through jax/duck.py), each jitted on one device against the
registry's NumPy kernel on the same inputs (the reference executor's values of a training
step): every op of a CNN's and a Transformer's training graph. And the step's errors."""
import numpy as np
import pytest

import autotile as at

jax = pytest.importorskip("jax", reason="jax is not installed (pip install 'autotile[jax]'; CI installs it)")


def _graph_values(sym, shapes, token_ids):
    from autotile.autodiff import feed_values, training_graph
    from autotile.backend.reference import execute
    from autotile.symbol.infer import infer_entry_shapes

    tg = training_graph(sym, shapes=shapes)
    rng = np.random.default_rng(0)
    entry = infer_entry_shapes(sym, shapes)
    vals = {n.name: (rng.standard_normal(entry[(id(n), 0)]) * 0.1).astype(np.float32)
            for n in sym.topo_nodes() if n.is_variable}
    vals["softmax_label"] = rng.integers(0, 10, shapes["softmax_label"]).astype(np.float32)
    if token_ids:
        vals["data"] = rng.integers(0, 64, shapes["data"]).astype(np.float32)
    _, _, env = execute(tg.symbol, feed_values(tg, vals), is_train=True, keep=True)
    return tg, env


CASES = {
    "cnn": (lambda: at.models.get("cnn-digits", batch=8), {"data": (8, 1, 8, 8), "softmax_label": (8,)}, False),
    "transformer": (lambda: at.models.get("transformer", batch=2, layers=1, d_model=16, heads=2, d_ff=32, seq=8,
                                          vocab=64), {"data": (2, 8), "softmax_label": (2, 8)}, True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_op_kernel_traced_equals_numpy(case):
    import jax.numpy as jnp

    from autotile.jax.step import _kernel
    from autotile.ops.registry import KernelContext, node_key

    build, shapes, token_ids = CASES[case]
    tg, env = _graph_values(build(), shapes, token_ids)
    checked = set()
    for node in tg.symbol.topo_nodes():
        if node.is_variable or node.op in checked:
            continue
        checked.add(node.op)
        op, attrs = node.opdef(), node.parsed_attrs()
        args = [env[(id(s), i)] for s, i in node.inputs]
        kernel = _kernel(node.op, op)

        def run(*a, kernel=kernel, attrs=attrs, name=node.name):
            return kernel(attrs, list(a), KernelContext(is_train=True, xp=jnp, key=node_key(name), out=None))

        got = jax.jit(run)(*args)
        for i, g in enumerate(got):
            want = env[(id(node), i)]
            assert np.shape(g) == np.shape(want), node.name
            np.testing.assert_allclose(np.asarray(g), want, rtol=1e-5, atol=1e-6, err_msg=f"{node.name} ({node.op})")
    assert len(checked) >= (12 if case == "cnn" else 25)


#: (op, attrs, inputs(rng)) of kernels a fresh export needs that the two graphs above lack:
#: GELU's erf (scipy.special's ufunc, traced through jax.scipy.special), GatherND (Gemma's
#: dynamo export) and GatherElements (RoBERTa's position ids) with their gradients, whole and
#: as a tile of a split data
_GATHER_IDX = np.array([[[0, 3], [2, 1]], [[1, 0], [2, 2]]], np.int64)  # (M=2, 2, 2): 4 slices of data[:4, :3]
_EL_IDX = np.array([[2, 0, 3], [1, 1, 0]], np.int64)  # (2, 3) rows of data (4, 3) along axis 0
EXTRA_OPS = [
    ("gather_elements", {"axis": 0}, lambda rng: [rng.standard_normal((4, 3)).astype(np.float32), _EL_IDX]),
    ("gather_elements", {"axis": 0, "row_begin": 2, "axis_size": 4},
     lambda rng: [rng.standard_normal((2, 3)).astype(np.float32), _EL_IDX]),
    ("_backward_gather_elements", {"axis": 0, "shape": (4, 3)},
     lambda rng: [rng.standard_normal((2, 3)).astype(np.float32), _EL_IDX]),
    ("_backward_gather_elements", {"axis": 0, "shape": (2, 3), "row_begin": 2, "axis_size": 4},
     lambda rng: [rng.standard_normal((2, 3)).astype(np.float32), _EL_IDX]),
    ("erf", {}, lambda rng: [rng.standard_normal((4, 5)).astype(np.float32)]),
    ("gelu", {}, lambda rng: [rng.standard_normal((4, 5)).astype(np.float32)]),
    ("gather_nd", {}, lambda rng: [rng.standard_normal((4, 3, 5)).astype(np.float32), _GATHER_IDX]),
    ("gather_nd", {"tile_begin": (2, 0), "full_shape": (4, 3)},
     lambda rng: [rng.standard_normal((2, 3, 5)).astype(np.float32), _GATHER_IDX]),
    ("_backward_gather_nd", {"shape": (4, 3, 5)},
     lambda rng: [rng.standard_normal((2, 2, 5)).astype(np.float32), _GATHER_IDX]),
    ("_backward_gather_nd", {"shape": (2, 3, 5), "tile_begin": (2, 0), "full_shape": (4, 3)},
     lambda rng: [rng.standard_normal((2, 2, 5)).astype(np.float32), _GATHER_IDX]),
]


def _extra_id(op, attrs):
    return op + ("_tile" if {"tile_begin", "row_begin"} & set(attrs) else "")


@pytest.mark.parametrize("op,attrs,make", EXTRA_OPS, ids=[_extra_id(o, a) for o, a, _ in EXTRA_OPS])
def test_fresh_export_kernels_traced_equal_numpy(op, attrs, make):
    from autotile.ops import registry

    opdef = registry.get(op)
    parsed = registry.parse_attrs(opdef, {k: str(v) for k, v in attrs.items()})
    _traced_equals_numpy(op, parsed, make(np.random.default_rng(0)), tol=1e-6)


def _traced_equals_numpy(op, attrs, inputs, tol):
    """Op `op`'s JAX kernel, jitted, against the registry's NumPy kernel on the same inputs
    and attributes; returns the outputs (checked already)."""
    import jax.numpy as jnp

    from autotile.jax.step import _kernel
    from autotile.ops import registry
    from autotile.ops.registry import KernelContext

    opdef = registry.get(op)
    want = opdef.forward(attrs, inputs, KernelContext(is_train=True, xp=np, key=None, out=None))
    kernel = _kernel(op, opdef)
    got = jax.jit(lambda *a: kernel(attrs, list(a), KernelContext(is_train=True, xp=jnp, key=None, out=None)))(
        *inputs)
    for g, w in zip(got, want):
        assert np.shape(g) == np.shape(w), op
        np.testing.assert_allclose(np.asarray(g), w, rtol=tol, atol=tol, err_msg=f"{op} {attrs.get('tile_pad', '')}")
    return got


#: convolution-family tiles of a spatial split (rows [4, 8) of an 8-row output and the data
#: rows they read) and whole tensors: (op, node attrs, input shapes and boxes, output shape and box)
_CONV = {"kernel": (3, 3), "stride": (1, 1), "pad": (1, 1), "num_filter": 3, "num_group": 1, "no_bias": True}
_DECONV = {"kernel": (4, 4), "stride": (2, 2), "pad": (1, 1), "adj": (0, 0), "num_filter": 3, "num_group": 1,
           "no_bias": False}
_MAXPOOL = {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": "max"}
_AVGPOOL = dict(_MAXPOOL, pool_type="avg", count_include_pad=False)
_GAP = {"kernel": (1, 1), "global_pool": True, "pool_type": "avg"}
CONV_TILES = [
    ("Convolution", _CONV, [((1, 2, 8, 8), (0, 0, 3, 0), (1, 2, 8, 8)), ((3, 2, 3, 3), (0,) * 4, (3, 2, 3, 3))],
     ((1, 3, 8, 8), (0, 0, 4, 0), (1, 3, 8, 8))),
    ("Convolution", _CONV, [((1, 2, 8, 8), (0, 0, 0, 0), (1, 2, 5, 8)), ((3, 2, 3, 3), (0,) * 4, (3, 2, 3, 3))],
     ((1, 3, 8, 8), (0, 0, 0, 0), (1, 3, 4, 8))),
    ("_backward_Convolution_data", _CONV,
     [((1, 3, 8, 8), (0, 0, 3, 0), (1, 3, 8, 8)), ((3, 2, 3, 3), (0,) * 4, (3, 2, 3, 3)),
      ((1, 2, 8, 8), (0, 0, 4, 0), (1, 2, 8, 8))], ((1, 2, 8, 8), (0, 0, 4, 0), (1, 2, 8, 8))),
    ("_backward_Convolution_weight", _CONV,
     [((1, 3, 8, 8), (0, 0, 4, 0), (1, 3, 8, 8)), ((1, 2, 8, 8), (0, 0, 3, 0), (1, 2, 8, 8))],
     ((3, 2, 3, 3), (0,) * 4, (3, 2, 3, 3))),
    ("Deconvolution", _DECONV, [((1, 2, 4, 4), (0,) * 4, (1, 2, 4, 4)), ((2, 3, 4, 4), (0,) * 4, (2, 3, 4, 4)),
                                ((3,), (0,), (3,))], ((1, 3, 8, 8), (0,) * 4, (1, 3, 8, 8))),
    ("Deconvolution", _DECONV, [((1, 2, 4, 4), (0, 0, 1, 0), (1, 2, 4, 4)), ((2, 3, 4, 4), (0,) * 4, (2, 3, 4, 4)),
                                ((3,), (0,), (3,))], ((1, 3, 8, 8), (0, 0, 4, 0), (1, 3, 8, 8))),
    ("Pooling", _MAXPOOL, [((1, 2, 8, 8), (0, 0, 3, 0), (1, 2, 8, 8))], ((1, 2, 4, 4), (0, 0, 2, 0), (1, 2, 4, 4))),
    ("Pooling", _AVGPOOL, [((1, 2, 8, 8), (0, 0, 0, 0), (1, 2, 5, 8))], ((1, 2, 4, 4), (0, 0, 0, 0), (1, 2, 2, 4))),
    ("_backward_Pooling", _AVGPOOL, [((1, 2, 4, 4), (0, 0, 2, 0), (1, 2, 4, 4)), ((1, 2, 8, 8), (0,) * 4, (1, 2, 8, 8))],
     ((1, 2, 8, 8), (0, 0, 4, 0), (1, 2, 8, 8))),
    ("_backward_Pooling", _MAXPOOL, [((1, 2, 4, 4), (0,) * 4, (1, 2, 4, 4)), ((1, 2, 8, 8), (0,) * 4, (1, 2, 8, 8))],
     ((1, 2, 8, 8), (0, 0, 4, 0), (1, 2, 8, 8))),
    # RegNetY's squeeze-excitation: a global average pool's gradient split along the rows of dx
    ("_backward_Pooling", _GAP, [((2, 4, 1, 1), (0,) * 4, (2, 4, 1, 1)), ((2, 4, 6, 6), (0,) * 4, (2, 4, 6, 6))],
     ((2, 4, 6, 6), (0, 0, 3, 0), (2, 4, 6, 6))),
]


@pytest.mark.parametrize("case", range(len(CONV_TILES)))
def test_convolution_family_tiles_traced_equal_numpy(case):
    """A spatial tile of a convolution, its gradients, a deconvolution and a pooling runs with
    the attributes its halo gives (the ops' tile hooks: tile_pad; pooling's frame): the JAX
    kernels honour them as the NumPy kernels do (they padded convolutions symmetrically by
    `pad` and pooled a tile as a whole tensor, wrong on any split row range; the
    deconvolution traced through jax/duck.py was wrong on whole tensors too)."""
    from autotile.execgraph.tile_attrs import tile_attrs
    from autotile.ops import registry

    op, raw, ins, (out_shape, olo, ohi) = CONV_TILES[case]
    opdef = registry.get(op)
    attrs = registry.parse_attrs(opdef, {k: str(v) for k, v in raw.items() if k in opdef.params})
    rng = np.random.default_rng(case)
    whole = [rng.standard_normal(shape) for shape, _, _ in ins]
    in_boxes = [(lo, hi) for _, lo, hi in ins]
    attrs = tile_attrs(op, attrs, in_boxes, [(olo, ohi)], [shape for shape, _, _ in ins], [out_shape])
    tiles = [w[tuple(slice(a, b) for a, b in zip(lo, hi))] for w, (lo, hi) in zip(whole, in_boxes)]
    got = _traced_equals_numpy(op, attrs, tiles, tol=1e-5)[0]
    assert np.shape(got) == tuple(h - l for l, h in zip(olo, ohi))


def _mlp_step():
    from autotile.bench.engines import readme_mlp

    net, shapes = readme_mlp()
    plan = at.plan(net, devices=1, shapes=shapes)
    return net, plan


def test_step_errors_name_what_is_wrong():
    import autotile.jax as atj

    net, plan = _mlp_step()
    step = atj.training_step(net, plan)
    params = {n: np.zeros(plan.tensor_shapes[n], np.float32) for n in step.param_names}
    inputs = {n: np.zeros(plan.tensor_shapes[n], np.float32) for n in step.data_names}
    with pytest.raises(at.Error, match=r"params lacks \['fc2_bias'\]"):
        step({k: v for k, v in params.items() if k != "fc2_bias"}, inputs)
    with pytest.raises(at.Error, match=r"inputs names \['label'\]"):
        step(params, {**inputs, "label": inputs["softmax_label"]})
    with pytest.raises(at.Error, match=r"'data' has shape \(2, 784\), but the plan was made for \(256, 784\)"):
        step(params, {**inputs, "data": np.zeros((2, 784), np.float32)})
    with pytest.raises(at.Error, match="unconstrained names 'fc9_output'"):
        atj.training_step(net, plan, unconstrained=["fc9_output"])
    with pytest.raises(at.Error, match="needs a training plan"):
        atj.training_step(net, at.plan(net, devices=1, shapes={"data": (256, 784), "softmax_label": (256,)},
                                       train=False))
    outputs, new_params = step(params, inputs)
    assert list(outputs) == ["softmax_output"] and sorted(new_params) == sorted(params)


@pytest.mark.parametrize("optimizer,args,tol", [("momentum", {"lr": 0.1, "momentum": 0.9}, 1e-6),
                                                # epsilon well above the gradients' rounding:
                                                # g / (|g| + eps) is ill-conditioned where g ~ eps
                                                ("adam", {"lr": 0.1, "epsilon": 1e-3}, 1e-4)])
def test_stateful_optimizers_first_step_equals_backend_run(optimizer, args, tol):
    import autotile.jax as atj
    from autotile.bench.engines import readme_mlp, values

    net, shapes = readme_mlp()
    vals = values(net, shapes, np.random.default_rng(0))
    plan = at.plan(net, devices=1, shapes=shapes, optimizer=optimizer)
    step = atj.training_step(net, plan, optimizer_args=args)
    params = {n: vals[n] for n in step.param_names}
    inputs = {n: vals[n] for n in step.data_names}
    _, new_params = step(params, inputs)
    ref = at.backend.run(net, inputs=inputs, params=params, train=True, optimizer=optimizer, optimizer_args=args)
    for k in params:
        np.testing.assert_allclose(np.asarray(new_params[k]), ref.params[k], rtol=0, atol=tol, err_msg=k)
