"""take, gather_nd, gather_elements: forwards against loops and onnxruntime (Gather,
GatherND, GatherElements), index modes and errors, scatter-add gradients against finite
differences and loops, the TDL (a vocabulary split of a table gives partial outputs, run on
tiles with the hooks), and an embedding + attention-style graph on virtual devices."""
import numpy as np
import pytest

import autotile as at
from autotile import _core
from autotile.errors import Error
from device_checks import check_planned_step, check_random_plans
from gradcheck import analytic_gradient, check_gradient, forward, single_op
from tdl_op_checks import check_tdl

RNG = np.random.default_rng(0)


def _run(op, names, values, **attrs):
    return forward(single_op(op, names, **attrs), values)[0]


def _ints(high, low=0):
    """A perturb generator of valid integer indices (as floats, MXNet's index dtype)."""
    return lambda rng, shape: rng.integers(low, high, shape).astype(float)


# ----------------------------------------------------------------------------- take

def naive_take(a, idx, axis, mode):
    n = a.shape[axis]
    out = np.empty(a.shape[:axis] + idx.shape + a.shape[axis + 1:])
    for p in np.ndindex(*a.shape[:axis]):
        for q in np.ndindex(*idx.shape):
            i = int(idx[q])
            i = min(max(i, 0), n - 1) if mode == "clip" else (i % n if mode == "wrap" else (i + n if i < 0 else i))
            out[p + q] = a[p + (i,)]
    return out


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("mode", ["clip", "wrap", "raise"])
@pytest.mark.parametrize("idx_shape", [(), (4,), (2, 3)])
def test_take_matches_loops(axis, mode, idx_shape):
    a = RNG.standard_normal((3, 4, 5))
    n = a.shape[axis]
    lo, hi = (-n, n) if mode == "raise" else (-2 * n, 2 * n)
    idx = RNG.integers(lo, hi, idx_shape).astype(np.float32)
    got = _run("take", ["a", "indices"], {"a": a, "indices": idx}, axis=axis, mode=mode)
    np.testing.assert_array_equal(got, naive_take(a, idx, axis % 3, mode))


def test_take_mxnet_doc_examples():
    # MXNet's take documentation: x = [4. 5. 6.]; take(x, [[0,1],[1,2]]) = [[4,5],[5,6]]
    x = np.array([4.0, 5.0, 6.0])
    np.testing.assert_array_equal(_run("take", ["a", "indices"], {"a": x, "indices": np.array([[0.0, 1], [1, 2]])}),
                                  [[4, 5], [5, 6]])
    y = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    np.testing.assert_array_equal(_run("take", ["a", "indices"], {"a": y, "indices": np.array([[0.0, 1], [1, 2]])}),
                                  [[[1, 2], [3, 4]], [[3, 4], [5, 6]]])
    np.testing.assert_array_equal(_run("take", ["a", "indices"], {"a": y, "indices": np.array([-1.0, 3])},
                                       mode="wrap"), [[5, 6], [1, 2]])


def test_take_raise_names_the_index():
    with pytest.raises(Error, match=r"take: index 3 is out of range for axis of size 3"):
        _run("take", ["a", "indices"], {"a": np.ones((3, 2)), "indices": np.array([0, 3])}, mode="raise")


def test_take_shape_inference_and_errors():
    t = at.sym.take(at.sym.Variable("w"), at.sym.Variable("ids"), axis=1, name="tk")
    args, outs, _ = t.infer_shape(w=(5, 7, 2), ids=(3, 4))
    assert args == [(5, 7, 2), (3, 4)] and outs == [(5, 3, 4, 2)]
    with pytest.raises(Error, match=r"tk.*axis=3 is out of range"):
        at.sym.take(at.sym.Variable("w"), at.sym.Variable("ids"), axis=3, name="tk").infer_shape(w=(5, 7), ids=(3,))
    with pytest.raises(Error, match=r"tk.*mode"):
        at.sym.take(at.sym.Variable("w"), at.sym.Variable("ids"), mode="fill", name="tk")
    assert t.infer_type(w="float16", ids="int64")[0] == ["float16", "int64"]
    assert t.infer_type(w="float16")[1] == ["float16"]


@pytest.mark.parametrize("axis", [0, 1])
def test_take_gradient(axis):
    idx = np.array([[2.0, 0.0, 2.0], [1.0, 2.0, 5.0]])  # repeats, and 5 clipped to the last row
    check_gradient("take", {"a": RNG.standard_normal((3, 3, 2)), "indices": idx}, {"axis": axis}, wrt=["a"])


def test_take_gradient_scatter_adds_repeats_and_none_for_indices():
    a = RNG.standard_normal((4, 3))
    idx = np.array([[1.0, 3.0, 1.0], [1.0, 0.0, -7.0]])
    dy = RNG.standard_normal((2, 3, 3))
    g_a, g_idx = analytic_gradient(single_op("take", ["a", "indices"], mode="wrap"), {"a": a, "indices": idx}, [dy])
    assert g_idx is None
    want = np.zeros_like(a)
    for q in np.ndindex(2, 3):
        want[int(idx[q]) % 4] += dy[q]
    np.testing.assert_allclose(g_a, want, rtol=1e-12)


# ----------------------------------------------------------------------------- gather_nd

@pytest.mark.parametrize("data_shape, idx_shape", [((4, 3), (1, 5)), ((4, 3, 2), (2, 2, 3)), ((3, 4), (2,)),
                                                   ((2, 3, 4), (3, 2))])
def test_gather_nd_matches_loops(data_shape, idx_shape):
    data = RNG.standard_normal(data_shape)
    m = idx_shape[0]
    idx = np.stack([RNG.integers(-data_shape[d], data_shape[d], idx_shape[1:]) for d in range(m)]).astype(float)
    got = _run("gather_nd", ["data", "indices"], {"data": data, "indices": idx})
    want = np.empty(idx_shape[1:] + data_shape[m:])
    for y in np.ndindex(*idx_shape[1:]):
        want[y] = data[tuple(int(idx[(d,) + y]) for d in range(m))]
    np.testing.assert_array_equal(got, want)


def test_gather_nd_mxnet_doc_example():
    # MXNet's gather_nd documentation: data = [[0, 1], [2, 3]], indices = [[1, 1, 0], [0, 1, 0]] -> [2, 3, 0]
    got = _run("gather_nd", ["data", "indices"], {"data": np.array([[0.0, 1], [2, 3]]),
                                                  "indices": np.array([[1.0, 1, 0], [0, 1, 0]])})
    np.testing.assert_array_equal(got, [2, 3, 0])


def test_gather_nd_errors():
    with pytest.raises(Error, match=r"gnd.*first dim M in \[1, 2\]"):
        at.sym.gather_nd(at.sym.Variable("d"), at.sym.Variable("i"), name="gnd").infer_shape(d=(3, 4), i=(3, 2))
    with pytest.raises(Error, match=r"gather_nd: index 4 is out of range for dim 1 of data of size 4"):
        _run("gather_nd", ["data", "indices"], {"data": np.ones((3, 4)), "indices": np.array([[0.0], [4.0]])})


def test_gather_nd_gradient():
    idx = np.array([[0.0, 2.0, 0.0, -1.0], [1.0, 0.0, 1.0, 0.0]])  # (0, 1) twice
    check_gradient("gather_nd", {"data": RNG.standard_normal((3, 2, 2)), "indices": idx}, wrt=["data"])


# ----------------------------------------------------------------------------- gather_elements

@pytest.mark.parametrize("data_shape, idx_shape, axis", [((3, 4), (3, 4), 0), ((3, 4), (2, 6), 1),
                                                         ((2, 3, 4), (2, 2, 4), -1), ((5,), (7,), 0)])
def test_gather_elements_matches_loops(data_shape, idx_shape, axis):
    data = RNG.standard_normal(data_shape)
    ax = axis % len(data_shape)
    idx = RNG.integers(-data_shape[ax], data_shape[ax], idx_shape)
    got = _run("gather_elements", ["data", "indices"], {"data": data, "indices": idx}, axis=axis)
    want = np.empty(idx_shape)
    for i in np.ndindex(*idx_shape):
        src = list(i)
        src[ax] = int(idx[i])
        want[i] = data[tuple(src)]
    np.testing.assert_array_equal(got, want)


def test_gather_elements_onnx_doc_example():
    # ONNX GatherElements, example 1: axis = 1
    got = _run("gather_elements", ["data", "indices"], {"data": np.array([[1.0, 2], [3, 4]]),
                                                        "indices": np.array([[0, 0], [1, 0]])}, axis=1)
    np.testing.assert_array_equal(got, [[1, 1], [4, 3]])


def test_gather_elements_errors():
    ge = at.sym.gather_elements(at.sym.Variable("d"), at.sym.Variable("i"), axis=1, name="ge")
    with pytest.raises(Error, match=r"ge.*exceed data \(3, 4\) along dim 0"):
        ge.infer_shape(d=(3, 4), i=(4, 2))
    with pytest.raises(Error, match=r"ge.*rank of data"):
        ge.infer_shape(d=(3, 4), i=(3,))
    with pytest.raises(Error, match=r"gather_elements: index -5 is out of range for axis 1 of data of size 4"):
        _run("gather_elements", ["data", "indices"], {"data": np.ones((3, 4)), "indices": np.full((3, 4), -5)},
             axis=1)


@pytest.mark.parametrize("axis", [0, 1])
def test_gather_elements_gradient(axis):
    idx = np.array([[0, 2, 1], [2, 2, -1]])
    check_gradient("gather_elements", {"data": RNG.standard_normal((3, 4)), "indices": idx}, {"axis": axis},
                   wrt=["data"])


# ----------------------------------------------------------------------------- onnxruntime

def _ort(op_type, data, idx, **attrs):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    node = helper.make_node(op_type, ["data", "indices"], ["out"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("data", TensorProto.FLOAT, data.shape),
                                            helper.make_tensor_value_info("indices", TensorProto.INT64, idx.shape)],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"data": data, "indices": idx})[0]


def test_against_onnxruntime():
    data = RNG.standard_normal((4, 5, 3)).astype(np.float32)
    idx = RNG.integers(-5, 5, (2, 6)).astype(np.int64)
    np.testing.assert_array_equal(_run("take", ["a", "indices"], {"a": data, "indices": idx}, axis=1, mode="raise"),
                                  _ort("Gather", data, idx, axis=1))
    el = RNG.integers(-4, 4, (3, 5, 2)).astype(np.int64)
    np.testing.assert_array_equal(_run("gather_elements", ["data", "indices"], {"data": data, "indices": el}),
                                  _ort("GatherElements", data, el, axis=0))
    nd = np.stack([RNG.integers(0, 4, (2, 3)), RNG.integers(-5, 5, (2, 3))], axis=-1).astype(np.int64)  # ONNX: last dim
    np.testing.assert_array_equal(_run("gather_nd", ["data", "indices"], {"data": data,
                                                                          "indices": np.moveaxis(nd, -1, 0)}),
                                  _ort("GatherND", data, nd))


# ----------------------------------------------------------------------------- TDL

@pytest.mark.parametrize("a_shape, idx_shape, axis", [((6, 4), (2, 3), 0), ((2, 6, 3), (4,), 1), ((6, 2), (), 0)])
@pytest.mark.parametrize("mode", ["clip", "wrap"])
def test_take_tdl(a_shape, idx_shape, axis, mode):
    n = a_shape[axis]
    gen = _ints(2 * n, -n)  # out-of-range too: clip/wrap map with the whole dim's size on every tile
    idx = gen(RNG, idx_shape)
    attrs = {"axis": axis, "mode": mode}
    check_tdl("take", [RNG.standard_normal(a_shape), idx], attrs, perturb={1: gen})
    dy = RNG.standard_normal(a_shape[:axis] + idx_shape + a_shape[axis + 1:])
    check_tdl("_backward_take", [dy, idx], {**attrs, "axis_size": n}, perturb={1: gen})


def test_take_embedding_strategies():
    # a (vocab, d) table: vocabulary split -> partial output; token split -> table replicated
    ins, outs = [(8, 4), (2, 4)], [(2, 4, 4)]
    op = at.ops.get("take")
    text = op.tdl(at.ops.parse_attrs(op, {}, "t"), ins, outs)
    got = {s["var"]: s for s in _core.analyze_tdl(text, ins, outs, 2)["strategies"]}
    assert set(got) == {"j0", "j1", "i1", "v"}
    assert got["v"]["reduction"] and got["v"]["outputs"][0]["partial"]
    assert got["v"]["inputs"][0]["per_worker"] == [(0, 4), (4, 8)] and got["v"]["inputs"][1]["replicate"]
    assert got["j0"]["inputs"][0]["replicate"] and got["j0"]["inputs"][1]["per_worker"] == [(0, 1), (1, 2)]
    assert got["i1"]["inputs"][0]["per_worker"] == [(0, 2), (2, 4)]


@pytest.mark.parametrize("data_shape, idx_shape", [((6, 4), (1, 2, 3)), ((4, 6, 2), (2, 4)), ((6, 2, 3), (1, 6))])
def test_gather_nd_tdl(data_shape, idx_shape):
    m = idx_shape[0]

    def gen(rng, shape):
        return np.stack([rng.integers(-data_shape[d], data_shape[d], shape[1:]) for d in range(m)]).astype(float)

    idx = gen(RNG, idx_shape)
    check_tdl("gather_nd", [RNG.standard_normal(data_shape), idx], perturb={1: gen})
    dy = RNG.standard_normal(idx_shape[1:] + data_shape[m:])
    check_tdl("_backward_gather_nd", [dy, idx], {"shape": data_shape}, perturb={1: gen})


@pytest.mark.parametrize("data_shape, idx_shape, axis", [((6, 4), (6, 4), 0), ((6, 4), (3, 6), 1),
                                                         ((2, 6, 3), (2, 4, 3), 1)])
def test_gather_elements_tdl(data_shape, idx_shape, axis):
    gen = _ints(data_shape[axis], -data_shape[axis])
    idx = gen(RNG, idx_shape)
    check_tdl("gather_elements", [RNG.standard_normal(data_shape), idx], {"axis": axis}, perturb={1: gen})
    check_tdl("_backward_gather_elements", [RNG.standard_normal(idx_shape), idx],
              {"axis": axis, "shape": data_shape}, perturb={1: gen})


# ----------------------------------------------------------------------------- graphs on devices

def _embedding_net():
    """Token and position lookups into tables, a projection, and a gather_elements pick."""
    ids = at.sym.Variable("data")
    h = at.sym.take(at.sym.Variable("wte", shape=(16, 8)), ids, name="tok")           # (4, 4, 8)
    h = at.sym.broadcast_add(h, at.sym.Variable("wpe", shape=(4, 8)), name="pos")
    h = at.sym.FullyConnected(h, num_hidden=8, flatten=False, name="proj")
    sel = at.sym.Variable("sel_label")  # the planner takes inputs named data / *label as data, others as weights
    picked = at.sym.gather_elements(h, sel, axis=2, name="pick")                     # (4, 4, 2)
    return at.sym.Group([at.sym.tanh(h, name="out"), picked])


def _embedding_values(rng):
    return {"data": rng.integers(0, 16, (4, 4)).astype(np.float32),
            "sel_label": rng.integers(-8, 8, (4, 4, 2)).astype(np.float32),
            "wte": rng.standard_normal((16, 8)).astype(np.float32),
            "wpe": (rng.standard_normal((4, 8)) * 0.1).astype(np.float32),
            "proj_weight": (rng.standard_normal((8, 8)) * 0.3).astype(np.float32),
            "proj_bias": rng.standard_normal(8).astype(np.float32) * 0.1}


SHAPES = {"data": (4, 4), "sel_label": (4, 4, 2)}


@pytest.mark.parametrize("devices", [2, 4])
def test_planned_embedding_net_equals_one_device(devices):
    check_planned_step(_embedding_net(), SHAPES, _embedding_values(np.random.default_rng(1)), devices)


@pytest.mark.parametrize("factors", [[2], [2, 2], [4]])
def test_every_split_of_the_lookups_on_tiles(factors):
    # random plans include the vocabulary split of wte (partial lookups, summed) and its backward by rows
    check_random_plans(_embedding_net(), SHAPES, _embedding_values(np.random.default_rng(2)), factors,
                       seed=80 + sum(factors), n_plans=10)


def test_gather_nd_net_on_tiles():
    x = at.sym.Variable("x", shape=(4, 4, 6))
    net = at.sym.sigmoid(at.sym.gather_nd(at.sym.elemwise_mul(x, x, name="sq"), at.sym.Variable("data"),
                                          name="gnd"), name="out")
    rng = np.random.default_rng(3)
    vals = {"x": rng.standard_normal((4, 4, 6)).astype(np.float32),
            "data": np.stack([rng.integers(0, 4, (4, 2)), rng.integers(-4, 4, (4, 2))]).astype(np.float32)}
    check_random_plans(net, {"data": (2, 4, 2)}, vals, [2, 2], seed=90, n_plans=10)
