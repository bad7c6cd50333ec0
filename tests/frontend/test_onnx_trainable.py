"""Which ONNX initializers autotile trains (issue 22): the dynamo exporter stores mask fill
values, zeros and rotary buffers as float initializers; they are constants, the weights train,
and ``trainable=`` overrides the rule. Forward results are checked against onnxruntime and the
weights' gradients against central differences of onnxruntime's outputs."""
import fnmatch

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import autotile as at  # noqa: E402
from autotile.autodiff.graph import constant_names  # noqa: E402
from autotile.errors import Error  # noqa: E402
from autotile.frontend.onnx_trainable import KIND_KEY  # noqa: E402

from onnx_models import make_model, run_ort  # noqa: E402

RNG = np.random.default_rng(3)
SHAPE = (2, 4, 6)


def _model(kinds=None):
    """scores = x @ W + B; masked_fill(x <= 0, -1e9) as a Where; + rotary buffer; a zeros
    fill; a scale lifted as ``_tensor_constant0``; Clip bounds; a float shape cast to int64
    for Reshape."""
    inits = {"W": RNG.standard_normal((6, 6)).astype(np.float32), "B": RNG.standard_normal(6).astype(np.float32),
             "fill": np.array(-1e9, np.float32), "zero": np.array(0.0, np.float32),
             "rotary.cos": RNG.standard_normal((4, 6)).astype(np.float32),
             "zeros": np.zeros(SHAPE, np.float32), "_tensor_constant0": np.array(0.5, np.float32),
             "shape_f": np.array([2, 24], np.float32), "lo": np.array(-50.0, np.float32),
             "hi": np.array(50.0, np.float32)}
    nodes = [helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "B"], ["scores"]),
             helper.make_node("Greater", ["x", "zero"], ["keep"]),
             helper.make_node("Where", ["keep", "scores", "fill"], ["masked"]),
             helper.make_node("Add", ["masked", "rotary.cos"], ["rot"]),
             helper.make_node("Not", ["keep"], ["drop"]),
             helper.make_node("Where", ["drop", "zeros", "rot"], ["cleared"]),
             helper.make_node("Mul", ["cleared", "_tensor_constant0"], ["scaled0"]),
             helper.make_node("Clip", ["scaled0", "lo", "hi"], ["scaled"]),  # the dynamo ReLU6's min_val_cast
             helper.make_node("Cast", ["shape_f"], ["shape"], to=TensorProto.INT64),
             helper.make_node("Reshape", ["scaled", "shape"], ["y"])]
    model = make_model(nodes, {"x": SHAPE}, ["y"], inits)
    for t in model.graph.initializer:  # the dynamo exporter's marks
        kind = (kinds or {}).get(t.name)
        if kind:
            prop = t.metadata_props.add()
            prop.key, prop.value = KIND_KEY, kind
    return model, inits


def _weights(sym):
    """ONNX names of the float parameters autotile trains."""
    const = set(constant_names(sym))
    by_var = {v: k for k, v in sym.onnx_names.items()}
    return {by_var[a] for a in sym.list_arguments() if a in sym.params and a not in const
            and np.asarray(sym.params[a]).dtype.kind == "f"}


def _ort_grad(model, inits, name, feeds, eps=1e-2):
    """d sum(y) / d initializer `name` by central differences of onnxruntime's output."""
    base = inits[name]
    grad = np.zeros(base.shape, np.float64)
    for i in np.ndindex(base.shape):
        total = []
        for sign in (1, -1):
            value = base.copy()
            value[i] += sign * eps
            m = onnx.ModelProto()
            m.CopyFrom(model)
            for t in m.graph.initializer:
                if t.name == name:
                    t.CopyFrom(onnx.numpy_helper.from_array(value, name))
            total.append(float(np.sum(run_ort(m, feeds)[0], dtype=np.float64)))
        grad[i] = (total[0] - total[1]) / (2 * eps)
    return grad


def test_fill_values_shapes_buffers_and_lifted_constants_are_not_trained():
    model, inits = _model(kinds={"rotary.cos": "BUFFER"})
    sym = at.onnx.load(model)
    assert _weights(sym) == {"W", "B"}
    feeds = {"x": RNG.standard_normal(SHAPE).astype(np.float32)}
    res = at.backend.run(sym, inputs={sym.onnx_names["x"]: feeds["x"]}, train=True,
                         optimizer_args={"lr": 0.1})
    np.testing.assert_allclose(res.outputs[0], run_ort(model, feeds)[0], rtol=1e-5, atol=1e-5)
    names = {sym.onnx_names[n]: n for n in ("W", "B")}
    assert set(res.grads) == set(names)
    for var, onnx_name in names.items():
        want = _ort_grad(model, inits, onnx_name, feeds)
        if onnx_name == "W":  # MatMul by a constant is FullyConnected: autotile trains W's transpose
            assert np.array_equal(sym.params[var], inits["W"].T)
            want = want.T
        np.testing.assert_allclose(res.grads[var], want, rtol=2e-2, atol=2e-2)
        np.testing.assert_allclose(res.params[var], sym.params[var] - 0.1 * res.grads[var], rtol=1e-5, atol=1e-6)


def test_the_exporters_parameter_mark_trains_and_buffer_mark_freezes():
    model, _ = _model(kinds={"fill": "PARAMETER", "B": "BUFFER"})
    assert _weights(at.onnx.load(model)) == {"W", "fill", "rotary.cos"}


def test_a_where_branch_that_is_not_uniform_is_a_weight():
    """Only a uniform branch is a fill value: a learned table selected by a mask trains."""
    inits = {"zero": np.array(0.0, np.float32), "table": RNG.standard_normal(SHAPE).astype(np.float32)}
    nodes = [helper.make_node("Greater", ["x", "zero"], ["keep"]),
             helper.make_node("Where", ["keep", "x", "table"], ["y"])]
    assert _weights(at.onnx.load(make_model(nodes, {"x": SHAPE}, ["y"], inits))) == {"table"}


@pytest.mark.parametrize("trainable,want", [(["W", "fil?"], {"W", "fill"}), ("B", {"B"}),
                                            (["W", "B", "rotary.*"], {"W", "B", "rotary.cos"})])
def test_trainable_names_and_patterns_pick_the_weights(trainable, want):
    model, inits = _model(kinds={"rotary.cos": "BUFFER"})
    sym = at.onnx.load(model, trainable=trainable)
    assert _weights(sym) == want
    x = RNG.standard_normal(SHAPE).astype(np.float32)
    res = at.backend.run(sym, inputs={sym.onnx_names["x"]: x}, train=True)
    assert set(res.grads) == {sym.onnx_names[n] for n in want}


def test_backend_run_takes_trainable_with_an_onnx_path(tmp_path):
    model, _ = _model()
    path = str(tmp_path / "masked.onnx")
    onnx.save(model, path)
    x = RNG.standard_normal(SHAPE).astype(np.float32)
    res = at.backend.run(path, inputs={"x": x}, train=True, trainable=["B"])
    assert list(res.grads) == [at.onnx.load(path).onnx_names["B"]]
    with pytest.raises(Error, match="trainable=.*at.onnx.load"):
        at.backend.run(at.onnx.load(path), inputs={"x": x}, train=True, trainable=["B"])


def test_trainable_errors_name_the_pattern():
    model, inits = _model()
    with pytest.raises(Error, match="'Wq'.*matches no initializer.*W"):
        at.onnx.load(model, trainable=["W", "Wq"])
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.array([1, 2], np.int64), "ids"))
    with pytest.raises(Error, match="'ids'.*int64.*only float"):
        at.onnx.load(model, trainable="ids")
    with pytest.raises(Error, match="trainable= takes"):
        at.onnx.load(model, trainable=3)
    assert all(fnmatch.fnmatchcase(n, "*") for n in inits)
