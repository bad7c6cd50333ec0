import math

import numpy as np
import pytest

import autotile as at
from fixtures_ew import case, cases
from gradcheck import analytic_gradient, forward, single_op

SO_CASES = [c for c in cases("so_") if c != "so_out_grad"]  # out_grad: see test_out_grad_* below


def _run(op, values, attrs, head):
    sym = single_op(op, list(values), **attrs)
    (y,) = forward(sym, values)
    grads = analytic_gradient(sym, values, [head])
    return y, grads


@pytest.mark.parametrize("name", SO_CASES)
def test_softmax_output_matches_mxnet(name):
    attrs, arr = case(name)
    attrs.pop("op")
    y, (gd, gl) = _run("SoftmaxOutput", {"data": arr["data"], "label": arr["label"]}, attrs, arr["head"])
    np.testing.assert_allclose(y, arr["output"], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gd, arr["grad"], rtol=1e-6, atol=1e-8)
    assert gl is None  # labels get no gradient


def _cross_entropy(x, label):
    """sum_i -log softmax(x_i)[label_i] by explicit loops."""
    total = 0.0
    for row, c in zip(x, label):
        total -= row[int(c)] - math.log(sum(math.exp(v) for v in row))
    return total


@pytest.mark.parametrize("normalization,scale", [("null", 1.0), ("batch", 1 / 4), ("valid", 1 / 4)])
def test_softmax_output_gradient_is_cross_entropy_gradient(normalization, scale):
    rng = np.random.default_rng(0)
    x, label = rng.standard_normal((4, 3)), np.array([0.0, 2.0, 1.0, 2.0])
    attrs = {"normalization": normalization, "grad_scale": 1.5}
    _, (g, _) = _run("SoftmaxOutput", {"data": x, "label": label}, attrs, rng.standard_normal((4, 3)))
    numeric = np.zeros_like(x)
    eps = 1e-6
    for idx in np.ndindex(*x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += eps
        xm[idx] -= eps
        numeric[idx] = (_cross_entropy(xp, label) - _cross_entropy(xm, label)) / (2 * eps)
    np.testing.assert_allclose(g, numeric * 1.5 * scale, rtol=1e-6, atol=1e-8)


def test_softmax_output_ignore_label_formula():
    rng = np.random.default_rng(1)
    x, label = rng.standard_normal((5, 4)), np.array([3.0, -1.0, 0.0, -1.0, 2.0])
    attrs = {"use_ignore": True, "ignore_label": -1, "normalization": "valid", "grad_scale": 2.0}
    _, (g, _) = _run("SoftmaxOutput", {"data": x, "label": label}, attrs, np.ones((5, 4)))
    want = np.zeros((5, 4))
    for i in range(5):
        if label[i] == -1:
            continue
        e = np.exp(x[i]) / np.exp(x[i]).sum()
        e[int(label[i])] -= 1
        want[i] = e * 2.0 / 3  # 3 labels are not ignored
    np.testing.assert_allclose(g, want, rtol=1e-12)


def test_softmax_output_multi_output_formula():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 2, 2))
    label = rng.integers(0, 3, (2, 2, 2)).astype(np.float64)
    y, (g, _) = _run("SoftmaxOutput", {"data": x, "label": label}, {"multi_output": True}, np.ones(x.shape))
    want_y, want_g = np.zeros_like(x), np.zeros_like(x)
    for n, h, w in np.ndindex(2, 2, 2):
        e = np.exp(x[n, :, h, w]) / np.exp(x[n, :, h, w]).sum()
        want_y[n, :, h, w] = e
        e = e.copy()
        e[int(label[n, h, w])] -= 1
        want_g[n, :, h, w] = e / 4  # MXNet's null normalization divides by the spatial size
    np.testing.assert_allclose(y, want_y, rtol=1e-12)
    np.testing.assert_allclose(g, want_g, rtol=1e-12)


def test_out_grad_multiplies_by_head_gradient():
    # Documented semantics (MXNet 1.x docs and the pre-1.6 kernel). MXNet 1.9.1 itself
    # multiplies by the softmax output instead, so there is no fixture for this case.
    attrs, arr = case("so_out_grad")
    x, label, head = arr["data"], arr["label"], arr["head"]
    _, (g, _) = _run("SoftmaxOutput", {"data": x, "label": label}, {"out_grad": True, "normalization": "batch"}, head)
    p = np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)
    want = (p - np.eye(5)[label.astype(int)]) / 4 * head
    np.testing.assert_allclose(g, want, rtol=1e-12)


def test_softmax_output_label_shape_inferred_and_checked():
    x, lab = at.sym.Variable("x"), at.sym.Variable("lab")
    net = at.sym.SoftmaxOutput(x, name="sm")
    assert net.list_arguments() == ["x", "sm_label"]
    assert net.infer_shape(x=(8, 10))[0] == [(8, 10), (8,)]
    multi = at.sym.SoftmaxOutput(x, lab, multi_output=True, name="smm")
    assert multi.infer_shape(x=(2, 3, 4, 5))[0][1] == (2, 20)
    assert multi.infer_shape(x=(2, 3, 4, 5), lab=(2, 4, 5))[0][1] == (2, 4, 5)
    with pytest.raises(at.Error) as e:
        at.sym.SoftmaxOutput(x, lab, name="bad").infer_shape(x=(8, 10), lab=(7,))
    msg = str(e.value)
    assert "bad" in msg and "SoftmaxOutput" in msg and "(7,)" in msg and "(8, 10)" in msg


def test_softmax_output_label_out_of_range_names_node():
    sym = single_op("SoftmaxOutput", ["data", "label"])
    with pytest.raises(at.Error) as e:
        analytic_gradient(sym, {"data": np.zeros((2, 3)), "label": np.array([1.0, 3.0])}, [np.ones((2, 3))])
    assert "label 3" in str(e.value) and "[0, 3)" in str(e.value)


def test_softmax_alias():
    assert at.ops.get("Softmax") is at.ops.get("SoftmaxOutput")


@pytest.mark.parametrize("name", ["linreg", "logreg", "maereg", "linreg_col"])
def test_regression_outputs_match_mxnet(name):
    attrs, arr = case(name)
    op = attrs.pop("op")
    y, (gd, gl) = _run(op, {"data": arr["data"], "label": arr["label"]}, attrs, arr["head"])
    np.testing.assert_allclose(y, arr["output"], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gd, arr["grad"], rtol=1e-6, atol=1e-8)
    assert gl is None


def test_linear_regression_gradient_formula_and_label_shape():
    rng = np.random.default_rng(3)
    x, t = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    _, (g, _) = _run("LinearRegressionOutput", {"data": x, "label": t}, {"grad_scale": 3.0}, np.zeros((4, 3)))
    np.testing.assert_allclose(g, (x - t) * 3.0 / 3)  # divided by the number of outputs per example
    v = at.sym.Variable("v")
    assert at.sym.LinearRegressionOutput(v, name="lr").infer_shape(v=(6, 1))[0][1] == (6,)
    with pytest.raises(at.Error) as e:
        at.sym.LinearRegressionOutput(v, at.sym.Variable("t"), name="lr").infer_shape(v=(6, 2), t=(5, 2))
    assert "lr" in str(e.value) and "(5, 2)" in str(e.value) and "(6, 2)" in str(e.value)


@pytest.mark.parametrize("name", ["makeloss_null", "makeloss_batch", "makeloss_valid"])
def test_make_loss_matches_mxnet(name):
    attrs, arr = case(name)
    attrs.pop("op")
    sym = single_op("MakeLoss", ["data"], **attrs)
    (y,) = forward(sym, {"data": arr["data"]})
    (g,) = analytic_gradient(sym, {"data": arr["data"]}, [arr["head"]])
    np.testing.assert_allclose(y, arr["output"])
    np.testing.assert_allclose(g, arr["grad"], rtol=1e-6)


def test_make_loss_heads_a_training_step():
    # loss = MakeLoss((x * w)^2, batch normalization): dL/dw = sum_i 2 (x_i w) x_i * grad_scale / n,
    # then sgd_update; the head gradient of the loss output is ignored.
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((4, 3)), rng.standard_normal(3)
    X, W = at.sym.Variable("x"), at.sym.Variable("w")
    net = at.sym.MakeLoss(at.sym.square(at.sym.broadcast_mul(X, W)), grad_scale=0.5, normalization="batch")
    res = at.backend.training_step(net, {"x": x, "w": w}, ["w"], optimizer="sgd", optimizer_args={"lr": 0.1})
    want = np.zeros(3)
    for i in range(4):
        for j in range(3):
            want[j] += 2 * x[i, j] * w[j] * x[i, j] * 0.5 / 4
    np.testing.assert_allclose(res.grads["w"], want, rtol=1e-12)
    np.testing.assert_allclose(res.params["w"], w - 0.1 * want, rtol=1e-12)
    np.testing.assert_allclose(res.outputs[0], (x * w) ** 2)


@pytest.mark.parametrize("op,attrs,dshape,lshape", [
    ("SoftmaxOutput", {"normalization": "batch", "grad_scale": 0.5}, (4, 3), (4,)),
    ("SoftmaxOutput", {"normalization": "valid", "use_ignore": True, "ignore_label": 1}, (4, 3), (4,)),
    ("SoftmaxOutput", {"multi_output": True}, (2, 3, 2, 2), (2, 2, 2)),
    ("SoftmaxOutput", {"multi_output": True, "normalization": "batch"}, (2, 3, 4), (2, 4)),
    ("LinearRegressionOutput", {"grad_scale": 3.0}, (4, 2, 3), (4, 2, 3)),
    ("MAERegressionOutput", {}, (5, 1), (5,)),
    ("MakeLoss", {"normalization": "batch"}, (4, 3), None),
    ("MakeLoss", {"normalization": "valid", "valid_thresh": 0.1}, (4, 3), None),
])
def test_gradient_without_shapes_in_context_is_the_same(op, attrs, dshape, lshape):
    # training graphs built without shapes (planner, execution graph) fix no divisor at
    # gradient time; their backward ops derive it from whole inputs instead
    from autotile.backend.reference import execute
    from autotile.ops.grad import GradContext

    rng = np.random.default_rng(5)
    values = {"data": rng.standard_normal(dshape)}
    if lshape is not None:
        values["label"] = rng.integers(0, 3, lshape).astype(np.float64) if op == "SoftmaxOutput" \
            else rng.standard_normal(lshape)
    sym = single_op(op, list(values), **attrs)
    with_shapes = analytic_gradient(sym, values, [np.ones(dshape)])[0]
    node = sym.entries[0][0]
    ctx = GradContext(name="op", attrs=node.parsed_attrs(), raw_attrs=node.attrs,
                      inputs=[at.sym.Variable(n) for n in values], outputs=[sym], out_grads=[at.sym.Variable("dy")])
    g = node.opdef().gradient(ctx)[0]
    feed = dict(values, dy=np.ones(dshape))
    (without,) = execute(g, {k: v for k, v in feed.items() if k in g.list_inputs()})[0]
    np.testing.assert_allclose(without, with_shapes, rtol=1e-12)
