"""Mixture-of-experts routing ops (issue 31, section 5): OneHot and ScatterElements have static
shapes and import (OneHot as comparisons with a constant range, ScatterElements as ScatterND of
full index tuples), equal to onnxruntime and trained on 2 devices as on 1; TopK on run-time
values and NonZero (an output shape that depends on the data) are refused with an Error that
names the node and op, says that data-dependent routing is not supported, and what is (a
dense mixture of experts). On constants they still fold."""
import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("autotile._core")

from onnx import TensorProto, helper  # noqa: E402

import autotile as at  # noqa: E402
from autotile.errors import Error  # noqa: E402
from k_device_arbiter import assert_same_float64_step  # noqa: E402
from onnx_models import assert_matches_ort, make_model, run_ort  # noqa: E402

RNG = np.random.default_rng(31)
mk = helper.make_node
I64 = TensorProto.INT64


def _i(*v):
    return np.array(v, np.int64)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot_of_run_time_indices_equals_onnxruntime(axis):
    """Negative indices count from the end; those outside [-depth, depth) give all off values."""
    ids = _i(0, 4, -1, 2, -5, 7, 3, -6).reshape(2, 4)
    nodes = [mk("OneHot", ["ids", "depth", "values"], ["y"], axis=axis)]
    model = make_model(nodes, {"ids": (2, 4)}, ["y"], {"depth": _i(5), "values": np.array([-0.5, 2.0], np.float32)},
                       dtypes={"ids": I64})
    assert_matches_ort(model, {"ids": ids})


@pytest.mark.parametrize("dtype,elem", [(np.int32, TensorProto.INT32), (np.float32, TensorProto.FLOAT)])
def test_one_hot_of_int32_and_float_indices_equals_onnxruntime(dtype, elem):
    ids = np.array([[0, 4, -1], [2, -5, 3]], dtype)
    nodes = [mk("OneHot", ["ids", "depth", "values"], ["y"], axis=1)]
    # onnxruntime's kernels: (int32 ids, int32 depth), (float ids, float depth), float values
    model = make_model(nodes, {"ids": (2, 3)}, ["y"], {"depth": np.array([5], dtype),
                                                       "values": np.array([1.0, -3.0], np.float32)},
                       dtypes={"ids": elem})
    assert_matches_ort(model, {"ids": ids})


def _routing_model():
    """Tokens x (N, D) routed by a given expert id per token: y = sum_e onehot(e)[n, e] *
    (x W_e)[n, :], written as Einsum-free MatMuls: gate (N, E) = OneHot(ids); h (E, N, H) =
    x . W (E, D, H); y = sum_e gate^T[e, n, None] * h[e]."""
    n, d, e, h = 6, 4, 3, 5
    inits = {"W": (RNG.standard_normal((e, d, h)) * 0.5).astype(np.float32), "depth": _i(e),
             "values": np.array([0.0, 1.0], np.float32), "perm": _i(1, 0)}
    nodes = [mk("OneHot", ["ids", "depth", "values"], ["gate"], axis=0),  # (E, N)
             mk("Unsqueeze", ["gate", "last"], ["g3"]),  # (E, N, 1)
             mk("MatMul", ["x", "W"], ["hx"]),  # (E, N, H)
             mk("Mul", ["g3", "hx"], ["weighted"]),
             mk("ReduceSum", ["weighted", "zero"], ["y"], keepdims=0)]
    inits.update({"last": _i(2), "zero": _i(0)})
    del inits["perm"]
    return make_model(nodes, {"x": (n, d), "ids": (n,)}, ["y"], inits, dtypes={"ids": I64}), n, d, e


def test_one_hot_routing_trains_on_2_devices_as_on_1():
    model, n, d, e = _routing_model()
    x = RNG.standard_normal((n, d)).astype(np.float32)
    ids = RNG.integers(0, e, n).astype(np.int64)
    assert_matches_ort(model, {"x": x, "ids": ids})
    sym = at.onnx.load(model)
    params = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in sym.params.items()}
    inputs = {sym.onnx_names["x"]: x.astype(np.float64), sym.onnx_names["ids"]: ids}
    ref = at.backend.run(sym, inputs=inputs, params=params, train=True)
    res = at.backend.run(sym, devices=2, inputs=inputs, params=params, train=True)
    (w,) = [k for k in ref.grads if ref.grads[k].shape == (e, d, 5)]
    # d sum(y) / d W[e] = x[ids == e]^T . ones: experts no token chose get no gradient
    want = np.stack([np.outer(x[ids == k].astype(np.float64).sum(0), np.ones(5)) for k in range(e)])
    np.testing.assert_allclose(ref.grads[w], want, rtol=1e-12, atol=1e-12)
    assert_same_float64_step(ref, res)


@pytest.mark.parametrize("axis,reduction,const", [(0, "none", False), (1, "none", False), (1, "add", False),
                                                  (-1, "add", True), (0, "none", True)])
def test_scatter_elements_equals_onnxruntime(axis, reduction, const):
    data = RNG.standard_normal((4, 6)).astype(np.float32)
    shape = (2, 6) if axis == 0 else (4, 3)
    size = data.shape[axis]
    if reduction == "none":  # distinct targets: ONNX leaves the order of duplicates open
        idx = np.stack([RNG.permutation(size)[:shape[axis]] for _ in range(shape[1 - axis])], axis=1 - axis)
        idx = idx.reshape(shape)
    else:
        idx = RNG.integers(-size, size, shape)
    idx = idx.astype(np.int64)
    upd = RNG.standard_normal(shape).astype(np.float32)
    nodes = [mk("ScatterElements", ["data", "idx", "upd"], ["y"], axis=axis, reduction=reduction)]
    inputs = {"data": data.shape, "upd": shape}
    inits = {"idx": idx} if const else None
    if not const:
        inputs["idx"] = shape
    model = make_model(nodes, inputs, ["y"], inits, opset=16, dtypes={"idx": I64})
    feeds = {"data": data, "upd": upd} if const else {"data": data, "upd": upd, "idx": idx}
    assert_matches_ort(model, feeds)


def test_scatter_elements_trains_on_2_devices_as_on_1():
    """Gradients reach the data (not where overwritten) and the updates (gathered)."""
    idx = _i(2, 0, 1, 3, 0, 2).reshape(2, 3)
    nodes = [mk("MatMul", ["x", "W"], ["data"]), mk("Mul", ["x2", "V"], ["upd"]),
             mk("ScatterElements", ["data", "idx", "upd"], ["s"], axis=1), mk("Tanh", ["s"], ["y"])]
    inits = {"W": RNG.standard_normal((3, 4)).astype(np.float32), "V": RNG.standard_normal((2, 3)).astype(np.float32)}
    model = make_model(nodes, {"x": (2, 3), "x2": (2, 3), "idx": (2, 3)}, ["y"], inits, opset=13,
                       dtypes={"idx": I64})
    feeds = {"x": RNG.standard_normal((2, 3)).astype(np.float32), "x2": RNG.standard_normal((2, 3)).astype(np.float32),
             "idx": idx}
    assert_matches_ort(model, feeds)
    sym = at.onnx.load(model)
    params = {k: v.astype(np.float64) for k, v in sym.params.items()}
    inputs = {sym.onnx_names[k]: (v.astype(np.float64) if v.dtype.kind == "f" else v) for k, v in feeds.items()}
    ref = at.backend.run(sym, inputs=inputs, params=params, train=True)
    # oracle: NumPy's put_along_axis and the chain rule by hand
    x, x2 = feeds["x"].astype(np.float64), feeds["x2"].astype(np.float64)
    w, v = inits["W"].astype(np.float64), inits["V"].astype(np.float64)
    s = x @ w
    np.put_along_axis(s, idx, x2 * v, axis=1)
    ds = 1.0 - np.tanh(s) ** 2
    kept = np.ones_like(s)
    np.put_along_axis(kept, idx, 0.0, axis=1)
    np.testing.assert_allclose(ref.outputs[0], np.tanh(s), rtol=1e-12)
    (gw,) = [k for k in ref.grads if ref.grads[k].shape in ((3, 4), (4, 3))]
    want_w = x.T @ (ds * kept)
    got_w = ref.grads[gw] if ref.grads[gw].shape == (3, 4) else ref.grads[gw].T
    np.testing.assert_allclose(got_w, want_w, rtol=1e-10, atol=1e-12)
    (gv,) = [k for k in ref.grads if ref.grads[k].shape == (2, 3)]
    np.testing.assert_allclose(ref.grads[gv], x2 * np.take_along_axis(ds, idx, axis=1), rtol=1e-10, atol=1e-12)
    res = at.backend.run(sym, devices=2, inputs=inputs, params=params, train=True)
    assert_same_float64_step(ref, res)


@pytest.mark.parametrize("k,axis,largest", [(2, -1, 1), (3, 0, 0), (5, 1, 1)])
def test_top_k_equals_onnxruntime(k, axis, largest):
    """Ties (small integers) come out lower index first, as in onnxruntime."""
    x = RNG.integers(-3, 4, (4, 5)).astype(np.float32)
    nodes = [mk("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)]
    model = make_model(nodes, {"x": (4, 5)}, ["v", "i"], {"k": _i(k)}, opset=11, dtypes={"i": I64})
    assert_matches_ort(model, {"x": x})


N, D, E, H = 6, 4, 3, 5


def _top2_moe():
    """Top-2 routing in its static form: logits = x . Wg; (vals, experts) = TopK(logits, 2);
    gates = softmax(vals); weight (N, E) = sum_k OneHot(experts)[n, k, :] * gates[n, k]; every
    expert runs on every token, h (E, N, H) = x . W; y = sum_e weight^T[e, n] * h[e, n, :]."""
    inits = {"Wg": RNG.standard_normal((D, E)).astype(np.float32), "W": (RNG.standard_normal((E, D, H)) * 0.5).astype(
        np.float32), "k": _i(2), "depth": _i(E), "values": np.array([0.0, 1.0], np.float32), "ax1": _i(1),
        "ax0": _i(0), "last": _i(-1)}
    nodes = [mk("MatMul", ["x", "Wg"], ["logits"]), mk("TopK", ["logits", "k"], ["vals", "experts"], axis=-1),
             mk("Softmax", ["vals"], ["gates"], axis=-1), mk("OneHot", ["experts", "depth", "values"], ["oh"], axis=-1),
             mk("Unsqueeze", ["gates", "last"], ["g3"]), mk("Mul", ["oh", "g3"], ["ohg"]),
             mk("ReduceSum", ["ohg", "ax1"], ["weight"], keepdims=0), mk("Transpose", ["weight"], ["wt"], perm=[1, 0]),
             mk("Unsqueeze", ["wt", "last"], ["wt3"]), mk("MatMul", ["x", "W"], ["h"]), mk("Mul", ["wt3", "h"], ["hw"]),
             mk("ReduceSum", ["hw", "ax0"], ["y"], keepdims=0)]
    return make_model(nodes, {"x": (N, D)}, ["y"], inits, opset=13), inits


def _numpy_top2(x, wg, w):
    logits = x @ wg
    experts = np.argsort(-logits, axis=1, kind="stable")[:, :2]
    vals = np.take_along_axis(logits, experts, 1)
    gates = np.exp(vals - vals.max(1, keepdims=True))
    gates /= gates.sum(1, keepdims=True)
    weight = np.zeros((N, E))
    np.put_along_axis(weight, experts, gates, 1)
    return np.einsum("ne,end->nd", weight, np.einsum("nd,edh->enh", x, w))


def test_top2_routing_trains_on_2_devices_as_on_1():
    model, inits = _top2_moe()
    x = RNG.standard_normal((N, D)).astype(np.float32)
    assert_matches_ort(model, {"x": x})
    sym = at.onnx.load(model)
    params = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in sym.params.items()}
    inputs = {sym.onnx_names["x"]: x.astype(np.float64)}
    ref = at.backend.run(sym, inputs=inputs, params=params, train=True)
    x64, wg, w = x.astype(np.float64), inits["Wg"].astype(np.float64), inits["W"].astype(np.float64)
    np.testing.assert_allclose(ref.outputs[0], _numpy_top2(x64, wg, w), rtol=1e-12, atol=1e-12)
    # the gate's gradient flows through TopK's values: central differences of the NumPy copy
    (gname,) = [k for k in ref.grads if ref.grads[k].shape in ((D, E), (E, D))]
    got = ref.grads[gname] if ref.grads[gname].shape == (D, E) else ref.grads[gname].T
    fd, eps = np.zeros((D, E)), 1e-6
    for idx in np.ndindex(D, E):
        step = np.zeros((D, E))
        step[idx] = eps
        fd[idx] = (_numpy_top2(x64, wg + step, w).sum() - _numpy_top2(x64, wg - step, w).sum()) / (2 * eps)
    assert np.abs(fd).max() > 1e-3
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-8)
    res = at.backend.run(sym, devices=2, inputs=inputs, params=params, train=True)
    assert_same_float64_step(ref, res)


def test_top_k_with_a_run_time_k_is_refused_saying_what_is_supported():
    """K read from the data: the output shape would depend on it."""
    nodes = [mk("Shape", ["x"], ["shape"]), mk("Gather", ["shape", "one"], ["cols"]),
             mk("Cast", ["n"], ["kn"], to=TensorProto.INT64),
             mk("TopK", ["x", "kn"], ["v", "i"], axis=-1, name="router_topk")]
    model = make_model(nodes, {"x": (6, 4), "n": (1,)}, ["v", "i"], {"one": _i(1)}, dtypes={"i": I64})
    with pytest.raises(Error) as e:
        at.onnx.load(model)
    msg = str(e.value)
    for word in ("router_topk", "TopK", "kn", "data-dependent", "not supported", "dense"):
        assert word in msg, msg


@pytest.mark.parametrize("op", ["NonZero", "Compress", "Unique"])
def test_data_dependent_shapes_are_refused(op):
    inputs = {"x": (4, 6)}
    nodes = [mk("Greater", ["x", "zero"], ["mask"])]
    if op == "NonZero":
        nodes.append(mk("NonZero", ["mask"], ["y"], name="where_routed"))
    elif op == "Compress":
        nodes += [mk("ReduceMax", ["x"], ["rm"], axes=[1], keepdims=0), mk("Greater", ["rm", "zero"], ["rows"]),
                  mk("Compress", ["x", "rows"], ["y"], axis=0, name="where_routed")]
    else:
        nodes.append(mk("Unique", ["x"], ["y"], name="where_routed"))
    model = make_model(nodes, inputs, ["y"], {"zero": np.array(0.0, np.float32)})
    with pytest.raises(Error) as e:
        at.onnx.load(model)
    msg = str(e.value)
    for word in ("where_routed", op, "depends on the data", "not supported", "dense"):
        assert word in msg, msg


def test_top_k_and_non_zero_of_constants_still_fold():
    c = RNG.standard_normal((4, 6)).astype(np.float32)
    nodes = [mk("TopK", ["c", "k"], ["v", "i"], axis=1), mk("NonZero", ["c"], ["nz"]), mk("Cast", ["nz"], ["f"], to=1),
             mk("ReduceSum", ["f"], ["s"], keepdims=1), mk("Add", ["v", "x"], ["a"]), mk("Mul", ["a", "s"], ["y"])]
    model = make_model(nodes, {"x": (4, 2)}, ["y"], {"c": c, "k": _i(2)})
    assert_matches_ort(model, {"x": RNG.standard_normal((4, 2)).astype(np.float32)})


def _switch_with_capacity(n, d, e, h, capacity, seed):
    """Top-1 routing with expert capacity in GShard's static form: the token's slot in its
    expert is a CumSum of the one-hot routing mask; tokens past the capacity are dropped; a
    (N, E, C) dispatch tensor (OneHot of expert and slot) gathers each expert's (C, D) batch
    with an Einsum, the experts run as one batched MatMul, and the combine tensor (dispatch
    times the gate) scatters their outputs back."""
    rng = np.random.default_rng(seed)
    inits = {"Wg": rng.standard_normal((d, e)).astype(np.float32),
             "W": (rng.standard_normal((e, d, h)) * 0.5).astype(np.float32), "k": _i(1), "E": _i(e), "C": _i(capacity),
             "onoff": np.array([0.0, 1.0], np.float32), "ax0": _i(0), "ax1": _i(1), "ax2": _i(2),
             "one": np.array(1.0, np.float32), "cap": np.array(capacity, np.float32)}
    nodes = [mk("MatMul", ["x", "Wg"], ["logits"]), mk("Softmax", ["logits"], ["probs"], axis=-1),
             mk("TopK", ["probs", "k"], ["gate1", "expert1"], axis=-1), mk("Squeeze", ["expert1", "ax1"], ["expert"]),
             mk("OneHot", ["expert", "E", "onoff"], ["mask"], axis=-1), mk("CumSum", ["mask", "ax0"], ["csum"]),
             mk("Sub", ["csum", "one"], ["pos_f"]), mk("Mul", ["pos_f", "mask"], ["pos_m"]),
             mk("Less", ["pos_m", "cap"], ["fits"]), mk("Cast", ["fits"], ["fits_f"], to=TensorProto.FLOAT),
             mk("Mul", ["mask", "fits_f"], ["kept"]), mk("ReduceSum", ["pos_m", "ax1"], ["pos_tok"], keepdims=0),
             mk("Cast", ["pos_tok"], ["pos_i"], to=I64), mk("OneHot", ["pos_i", "C", "onoff"], ["slot"], axis=-1),
             mk("Unsqueeze", ["kept", "ax2"], ["kept3"]), mk("Unsqueeze", ["slot", "ax1"], ["slot3"]),
             mk("Mul", ["kept3", "slot3"], ["dispatch"]), mk("Unsqueeze", ["gate1", "ax2"], ["gate3"]),
             mk("Mul", ["dispatch", "gate3"], ["combine"]),
             mk("Einsum", ["dispatch", "x"], ["xin"], equation="nec,nd->ecd"), mk("MatMul", ["xin", "W"], ["eo"]),
             mk("Einsum", ["combine", "eo"], ["y"], equation="nec,ech->nh")]
    return make_model(nodes, {"x": (n, d)}, ["y"], inits, opset=13), inits


def test_top1_routing_with_capacity_trains_on_4_devices_as_on_1():
    n, d, e, h, capacity = 8, 4, 3, 5, 3
    model, inits = _switch_with_capacity(n, d, e, h, capacity, seed=0)
    x = np.random.default_rng(1).standard_normal((n, d)).astype(np.float32)
    counts = np.bincount(np.argmax(x @ inits["Wg"], axis=1), minlength=e)
    assert counts.max() > capacity  # the capacity drops tokens in this case
    assert_matches_ort(model, {"x": x})
    sym = at.onnx.load(model)
    params = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in sym.params.items()}
    inputs = {sym.onnx_names["x"]: x.astype(np.float64)}
    ref = at.backend.run(sym, inputs=inputs, params=params, train=True)
    res = at.backend.run(sym, devices=4, inputs=inputs, params=params, train=True)
    assert len(ref.grads) == 2  # the gate and the experts train
    assert_same_float64_step(ref, res)
