"""Fuzz the file readers (issue #13 item 13, issue #18 "Readers"): symbol JSON, `.params`,
plan JSON and ONNX, mutated by truncation, bit flips, huge or negative numbers, deep nesting
and values of the wrong type (for ONNX also: dims of initializers and value_info, subgraph
attributes nested deeper than protobuf parses, attributes of the wrong type). Each reader must either read the file or raise autotile.Error;
any other exception, a crash or a runaway allocation fails. The fuzzing runs in a child
process under a 3 GiB address-space limit, so a reader that allocates what a header claims
dies there (and fails this test) instead of taking the machine down."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autotile as at
from autotile.errors import Error
from autotile.planner.plan import Plan

HERE = os.path.dirname(os.path.abspath(__file__))
MEMORY_LIMIT = 3 << 30
EXAMPLES = int(os.environ.get("AUTOTILE_FUZZ_EXAMPLES", "150"))

_ODD_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=True),
                        st.text(max_size=8), st.just([]), st.just({}), st.just([[-1, 0, 0]]),
                        st.just("[" * 50 + "]" * 50), st.just(2 ** 63), st.just(-1))


def _net():
    data = at.sym.Variable("data")
    return at.sym.SoftmaxOutput(at.sym.FullyConnected(data, num_hidden=4, name="fc"), name="softmax")


_SHAPES = {"data": (4, 6), "softmax_label": (4,)}
_SYMBOL = _net().tojson().encode()
_PARAMS = at.nd.dumps({"fc_weight": np.arange(24, dtype=np.float32).reshape(4, 6),
                       "fc_bias": np.zeros(4, np.float64), "step": np.array(3, np.int32)})
_PLAN = at.plan(_net(), devices=2, shapes=_SHAPES).to_json().encode()


def _mutate_bytes(data: bytes, draw) -> bytes:
    kind = draw(st.sampled_from(["truncate", "flip", "overwrite", "splice"]))
    if kind == "truncate":
        return data[:draw(st.integers(0, len(data)))]
    if kind == "flip":
        out = bytearray(data)
        for _ in range(draw(st.integers(1, 8))):
            i = draw(st.integers(0, len(out) - 1))
            out[i] ^= 1 << draw(st.integers(0, 7))
        return bytes(out)
    at_ = draw(st.integers(0, len(data)))
    if kind == "overwrite":  # a huge or negative little-endian integer where a field was
        value = draw(st.sampled_from([2 ** 63 - 1, -1, -2 ** 31, 2 ** 62, 2 ** 32, 0x7FFFFFFF, 33]))
        width = draw(st.sampled_from([4, 8]))
        raw = (value % (1 << (8 * width))).to_bytes(width, "little")
        return data[:at_] + raw + data[at_ + width:]
    return data[:at_] + draw(st.binary(max_size=16)) + data[at_:]


def _paths(doc):
    """Every (container, key) in a parsed JSON document."""
    stack, out = [doc], []
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in items:
            out.append((node, k))
            stack.append(v)
    return out


def _mutate_json(data: bytes, draw) -> bytes:
    kind = draw(st.sampled_from(["bytes", "value", "nest", "drop"]))
    if kind == "bytes":
        return _mutate_bytes(data, draw)
    doc = json.loads(data)
    if kind == "nest":
        depth = draw(st.sampled_from([10, 1000, 100_000]))
        return ('{"nodes": ' + "[" * depth + "]" * depth + ', "heads": [], "format": "autotile-plan-1"}').encode()
    paths = _paths(doc)
    container, key = paths[draw(st.integers(0, len(paths) - 1))]
    if kind == "drop":
        del container[key]
    else:
        container[key] = draw(_ODD_VALUES)
    return json.dumps(doc).encode()


def _only_errors(read, data: bytes):
    try:
        read(data)
    except Error:
        pass


def _read_symbol(data: bytes):
    with tempfile.NamedTemporaryFile("wb", suffix="-symbol.json", delete=False) as f:
        f.write(data)
    try:
        sym = at.sym.load(f.name)
    finally:
        os.unlink(f.name)
    sym.list_arguments()
    sym.infer_shape(data=(4, 6))


def _read_plan(data: bytes):
    plan = Plan.from_json(data.decode("utf-8", errors="replace"))
    plan.summary()
    at.transform(_net(), plan)


FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                suppress_health_check=list(HealthCheck))


def _onnx_models():
    """Small valid ONNX models covering the importer's paths: a CNN (Conv, BatchNormalization,
    pooling, Gemm, with value_info), a folded shape computation feeding Reshape/MatMul, and a
    graph with an If node (subgraph attributes) whose branches shape inference walks."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def init(name, shape, dtype=np.float32):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(dtype), name=name)

    def model(nodes, inputs, outputs, inits, value_info=()):
        graph = helper.make_graph(nodes, "fuzz", inputs, outputs, inits, value_info=list(value_info))
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)

    fl = TensorProto.FLOAT
    cnn = model(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="conv"),
         helper.make_node("BatchNormalization", ["c", "g", "beta", "mean", "var"], ["n"], epsilon=1e-5, name="bn"),
         helper.make_node("Relu", ["n"], ["r"], name="relu"),
         helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
         helper.make_node("Flatten", ["p"], ["f"], axis=1, name="flat"),
         helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1, name="fc")],
        [helper.make_tensor_value_info("x", fl, ["N", 1, 4, 4])],
        [helper.make_tensor_value_info("y", fl, ["N", 3])],
        [init("w", (2, 1, 3, 3)), init("b", (2,)), init("g", (2,)), init("beta", (2,)), init("mean", (2,)),
         numpy_helper.from_array(np.ones(2, np.float32), name="var"), init("fw", (3, 8)), init("fb", (3,))],
        [helper.make_tensor_value_info("c", fl, ["N", 2, 4, 4]), helper.make_tensor_value_info("p", fl, ["N", 2, 2, 2])])
    shape_calc = model(
        [helper.make_node("Shape", ["x"], ["s"], name="shape"),
         helper.make_node("Gather", ["s", "zero"], ["n0"], axis=0, name="gather"),
         helper.make_node("Unsqueeze", ["n0", "ax0"], ["n1"], name="unsq"),
         helper.make_node("Concat", ["n1", "tail"], ["newshape"], axis=0, name="concat"),
         helper.make_node("Reshape", ["x", "newshape"], ["xr"], name="reshape"),
         helper.make_node("MatMul", ["xr", "m"], ["mm"], name="matmul"),
         helper.make_node("ConstantOfShape", ["cshape"], ["ones"], value=numpy_helper.from_array(
             np.ones(1, np.float32)), name="cos"),
         helper.make_node("Add", ["mm", "ones"], ["sum"], name="add"),
         helper.make_node("Slice", ["sum", "starts", "ends", "ax1"], ["sl"], name="slice"),
         helper.make_node("Softmax", ["sl"], ["y"], axis=-1, name="softmax")],
        [helper.make_tensor_value_info("x", fl, [2, 3, 4])],
        [helper.make_tensor_value_info("y", fl, [2, 3])],
        [numpy_helper.from_array(np.array(0, np.int64), "zero"), numpy_helper.from_array(np.array([0], np.int64), "ax0"),
         numpy_helper.from_array(np.array([12], np.int64), "tail"), numpy_helper.from_array(np.array([1, 5], np.int64), "cshape"),
         numpy_helper.from_array(np.array([1], np.int64), "starts"), numpy_helper.from_array(np.array([4], np.int64), "ends"),
         numpy_helper.from_array(np.array([1], np.int64), "ax1"), init("m", (12, 5))])
    branch = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "branch", [],
                               [helper.make_tensor_value_info("t", fl, [2, 3])])
    cond = model(
        [helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch, name="if")],
        [helper.make_tensor_value_info("x", fl, [2, 3])], [helper.make_tensor_value_info("y", fl, [2, 3])],
        [numpy_helper.from_array(np.array(True), "c")])
    for m in (cnn, shape_calc, cond):
        onnx.checker.check_model(m)
    return [cnn, shape_calc, cond]


_ONNX = None


def _onnx_model(draw):
    global _ONNX
    if _ONNX is None:
        _ONNX = _onnx_models()
    from onnx import ModelProto

    m = ModelProto()
    m.CopyFrom(_ONNX[draw(st.integers(0, len(_ONNX) - 1))])
    return m


_HUGE_DIMS = st.sampled_from([2 ** 62, 2 ** 63 - 1, 2 ** 31, -1, -2 ** 40, 0, 7])


def _nest(model, depth: int):
    """Wrap the graph `depth` times in If nodes' then_branch subgraph attributes, built in
    place (onnx.helper copies through protobuf's parser, which stops at depth 100)."""
    from onnx import AttributeProto, GraphProto

    leaf = GraphProto()
    leaf.CopyFrom(model.graph)
    graph = model.graph
    for level in range(depth):
        outputs = [o.name for o in graph.output]
        del graph.node[:]
        node = graph.node.add(op_type="If", name=f"if{level}", input=["c"], output=outputs)
        node.attribute.add(name="else_branch", type=AttributeProto.GRAPH).g.CopyFrom(leaf)
        then = node.attribute.add(name="then_branch", type=AttributeProto.GRAPH)
        graph = then.g
        graph.name = f"g{level}"
        graph.output.extend(leaf.output)
    graph.node.extend(leaf.node)


def _wrong_attribute(node, draw):
    """Give one of the node's attributes another type (and a value of that type), or a type
    field that does not match the value it holds."""
    from onnx import AttributeProto

    if not node.attribute:
        return
    a = node.attribute[draw(st.integers(0, len(node.attribute) - 1))]
    kind = draw(st.sampled_from(["retype", "mislabel", "huge"]))
    if kind == "mislabel":  # the value stays, the declared type changes
        a.type = draw(st.sampled_from([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 0, 99]))
        return
    name = a.name
    a.Clear()
    a.name = name
    if kind == "huge":
        a.type = AttributeProto.INTS
        a.ints.extend(draw(st.lists(_HUGE_DIMS, min_size=0, max_size=4)))
        return
    a.type = draw(st.sampled_from([AttributeProto.FLOAT, AttributeProto.STRING, AttributeProto.FLOATS,
                                   AttributeProto.STRINGS, AttributeProto.INT]))
    if a.type == AttributeProto.FLOAT:
        a.f = draw(st.floats(allow_nan=True, width=32))
    elif a.type == AttributeProto.STRING:
        a.s = draw(st.binary(max_size=8))
    elif a.type == AttributeProto.FLOATS:
        a.floats.extend(draw(st.lists(st.floats(allow_nan=True, width=32), max_size=4)))
    elif a.type == AttributeProto.STRINGS:
        a.strings.extend(draw(st.lists(st.binary(max_size=4), max_size=3)))
    else:
        a.i = draw(_HUGE_DIMS)


def _set_dims(shape, dims):
    del shape.dim[:]
    for d in dims:
        shape.dim.add().dim_value = d


def _mutate_onnx(draw):
    """Bytes of a mutated small ONNX model, or (for nesting beyond protobuf's parse limit) the
    ModelProto itself."""
    model = _onnx_model(draw)
    g = model.graph
    kind = draw(st.sampled_from(["bytes", "init_dims", "value_info", "nest", "attribute", "data_type", "names"]))
    if kind == "bytes":
        return _mutate_bytes(model.SerializeToString(), draw)
    if kind == "init_dims" and g.initializer:
        t = g.initializer[draw(st.integers(0, len(g.initializer) - 1))]
        del t.dims[:]
        t.dims.extend(draw(st.lists(_HUGE_DIMS, min_size=0, max_size=3)))
        if draw(st.booleans()):  # keep no payload: the dims alone claim the size
            t.ClearField("raw_data")
            t.ClearField("float_data")
            t.ClearField("int64_data")
    elif kind == "value_info":
        infos = list(g.input) + list(g.output) + list(g.value_info)
        vi = infos[draw(st.integers(0, len(infos) - 1))]
        _set_dims(vi.type.tensor_type.shape, draw(st.lists(_HUGE_DIMS, min_size=0, max_size=5)))
        if draw(st.booleans()):
            vi.type.tensor_type.elem_type = draw(st.sampled_from([0, 2, 7, 8, 11, 16, 99]))
    elif kind == "nest":
        _nest(model, draw(st.sampled_from([1, 3, 40, 150])))
        if draw(st.booleans()):
            return model
    elif kind == "attribute":
        nodes = [n for n in g.node if n.attribute] or list(g.node)
        _wrong_attribute(nodes[draw(st.integers(0, len(nodes) - 1))], draw)
    elif kind == "data_type" and g.initializer:
        t = g.initializer[draw(st.integers(0, len(g.initializer) - 1))]
        t.data_type = draw(st.sampled_from([0, 2, 3, 6, 7, 8, 9, 10, 11, 16, 17, 99]))
    elif kind == "names":
        node = g.node[draw(st.integers(0, len(g.node) - 1))]
        field = node.input if node.input and draw(st.booleans()) else node.output
        if field:
            field[draw(st.integers(0, len(field) - 1))] = draw(st.sampled_from(["", "x", "y", "missing", "a/b"]))
    return model.SerializeToString()


def _read_onnx(data):
    sym = at.onnx.load(data)
    sym.list_arguments()


@FUZZ
@given(st.data())
def fuzz_onnx(data):
    _only_errors(_read_onnx, _mutate_onnx(data.draw))


@FUZZ
@given(st.data())
def fuzz_symbol_json(data):
    _only_errors(_read_symbol, _mutate_json(_SYMBOL, data.draw))


@FUZZ
@given(st.data())
def fuzz_params(data):
    _only_errors(lambda b: at.nd.loads(b, "fuzz.params"), _mutate_bytes(_PARAMS, data.draw))


@FUZZ
@given(st.data())
def fuzz_plan_json(data):
    _only_errors(_read_plan, _mutate_json(_PLAN, data.draw))


def _child(name: str):
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    globals()[name]()


@pytest.mark.parametrize("target", ["fuzz_symbol_json", "fuzz_params", "fuzz_plan_json", "fuzz_onnx"])
def test_reader_fuzz_raises_only_autotile_error(target):
    code = f"import sys; sys.path.insert(0, {HERE!r}); import test_reader_fuzz as t; t._child({target!r})"
    # the child imports the same autotile as this process (tests/conftest.py sets PYTHONPATH
    # for a dev build; an installed package needs none)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{target} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"


# Regressions the ONNX fuzzing found: each raised a bare ValueError/TypeError/KeyError/DecodeError.

def _cnn():
    from onnx import ModelProto

    m = ModelProto()
    m.CopyFrom(_onnx_models()[0])
    return m


def _attribute(model, node_name, attr_name):
    node = next(n for n in model.graph.node if n.name == node_name)
    return next(a for a in node.attribute if a.name == attr_name)


@pytest.mark.parametrize("node, attr, kind, value", [
    ("conv", "kernel_shape", "FLOAT", 1.0),          # TypeError: 'float' object is not iterable
    ("pool", "kernel_shape", "FLOAT", 1.0),          # TypeError: object of type 'float' has no len()
    ("bn", "epsilon", "STRING", b""),                # ValueError: could not convert string to float
    ("bn", "epsilon", "INTS", []),                   # TypeError: float() argument must be ... not 'list'
    ("conv", "kernel_shape", "STRINGS", [b"\x80"]),  # UnicodeDecodeError
    ("conv", "kernel_shape", "TENSOR", None),        # TypeError: element type UNDEFINED
])
def test_onnx_attribute_of_wrong_type_is_error(node, attr, kind, value):
    from onnx import AttributeProto

    m = _cnn()
    a = _attribute(m, node, attr)
    a.Clear()
    a.name, a.type = attr, getattr(AttributeProto, kind)
    if kind == "FLOAT":
        a.f = value
    elif kind == "STRING":
        a.s = value
    elif kind == "INTS":
        a.ints.extend(value)
    elif kind == "STRINGS":
        a.strings.extend(value)
    with pytest.raises(Error, match=f"'{node}'.*attribute '{attr}' has type {kind}"):
        at.onnx.load(m.SerializeToString())


def test_onnx_undecodable_string_attribute_is_error():
    """A string attribute of the declared type whose bytes are not UTF-8."""
    from onnx import helper

    m = _cnn()
    m.graph.node[0].attribute.append(helper.make_attribute("auto_pad", b"\x80NOTSET"))
    with pytest.raises(Error, match="'conv'.*attribute 'auto_pad' cannot be read"):
        at.onnx.load(m.SerializeToString())


def test_onnx_input_of_unknown_element_type_is_error():
    m = _cnn()
    m.graph.input[0].type.tensor_type.elem_type = 99  # KeyError: 99
    with pytest.raises(Error, match="input 'x' has element type 99"):
        at.onnx.load(m.SerializeToString())


def test_onnx_subgraphs_nested_too_deep_are_error():
    """150 levels of If then_branch: protobuf's parser (bytes) and its copy (a ModelProto)
    both stop at depth 100."""
    from onnx import ModelProto

    m = ModelProto()
    m.CopyFrom(_onnx_models()[2])
    _nest(m, 150)
    for given in (m, m.SerializeToString()):
        with pytest.raises(Error, match="not a valid ONNX model|nested deeper"):
            at.onnx.load(given)


@pytest.mark.parametrize("node, index", [("gather", 0), ("reshape", 0), ("slice", 2)])
def test_onnx_required_input_left_out_is_error(node, index):
    """An input named "" where the schema requires one reached the constant folding as None
    (AttributeError in Gather's folder, TypeError in normalize)."""
    from onnx import ModelProto

    m = ModelProto()
    m.CopyFrom(_onnx_models()[1])
    n = next(x for x in m.graph.node if x.name == node)
    n.input[index] = ""
    with pytest.raises(Error, match=f"'{node}'.*leaves out its input {index}"):
        at.onnx.load(m.SerializeToString())
