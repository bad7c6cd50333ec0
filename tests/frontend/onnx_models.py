"""Helpers for the ONNX importer tests: build small models with onnx.helper and run them on
onnxruntime (the oracle) and on autotile's reference executor."""
from __future__ import annotations

import importlib
import sys
import warnings
from typing import Dict, List, Optional, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import autotile as at


def ir_version_for(opset: int) -> int:
    """The IR version that introduced `opset` (onnxruntime rejects newer IR than it knows)."""
    return 7 if opset <= 13 else 8 if opset <= 18 else 9 if opset <= 20 else 10


def make_model(nodes: Sequence[onnx.NodeProto], inputs: Dict[str, tuple], outputs: Sequence[str],
               initializers: Optional[Dict[str, np.ndarray]] = None, opset: int = 13,
               dtypes: Optional[Dict[str, int]] = None, initializers_as_inputs: bool = False) -> onnx.ModelProto:
    """A model from nodes; `inputs` maps data input names to shapes (None entries or strings
    are symbolic dims); outputs have unknown shapes (ORT and autotile infer them)."""
    dtypes = dtypes or {}
    inits = {k: np.asarray(v) for k, v in (initializers or {}).items()}
    graph_inputs = [helper.make_tensor_value_info(n, dtypes.get(n, TensorProto.FLOAT), list(s))
                    for n, s in inputs.items()]
    if initializers_as_inputs:  # IR < 4 style: every initializer is also a graph input
        graph_inputs += [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
                         for n, v in inits.items()]
    graph = helper.make_graph(
        list(nodes), "test", graph_inputs,
        [helper.make_tensor_value_info(n, dtypes.get(n, TensorProto.FLOAT), None) for n in outputs],
        [numpy_helper.from_array(v, name=k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version_for(opset))


def run_ort(model: onnx.ModelProto, feeds: Dict[str, np.ndarray]) -> List[np.ndarray]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3  # no warnings about initializers listed as inputs
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def run_autotile(model, feeds: Dict[str, np.ndarray], batch_size=None) -> List[np.ndarray]:
    sym = at.onnx.load(model, batch_size=batch_size)
    inputs = {sym.onnx_names[k]: v for k, v in feeds.items()}
    return at.backend.run(sym, inputs=inputs).outputs


def assert_matches_ort(model, feeds, rtol=1e-4, atol=1e-5):
    """Import `model`, run it on autotile and onnxruntime, compare every output."""
    want = run_ort(model, feeds)
    got = run_autotile(model, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def randomize_weights(model: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """A copy of `model` whose ConstantOfShape weights (the onnx "light" zoo models fill every
    weight with 0.02, so their outputs are uniform) become random initializers, and whose
    final Softmax input (the logits) is an extra graph output. Makes the zoo models a
    discriminating test against onnxruntime."""
    rng = np.random.default_rng(seed)
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    keep = []
    for node in g.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in inits:
            shape = tuple(int(d) for d in inits[node.input[0]])
            if len(shape) >= 2:  # conv / fc weight: He-style scale keeps activations O(1)
                fan_in = int(np.prod(shape[1:]))
                value = rng.standard_normal(shape, dtype=np.float32) * np.float32(np.sqrt(2.0 / fan_in))
            else:  # biases and BatchNorm parameters: positive, so variances stay valid
                value = rng.uniform(0.5, 1.5, shape).astype(np.float32)
            g.initializer.append(numpy_helper.from_array(value, node.output[0]))
        else:
            keep.append(node)
    del g.node[:]
    g.node.extend(keep)
    softmax = [n for n in g.node if n.op_type == "Softmax"]
    if softmax:
        g.output.append(helper.make_tensor_value_info(softmax[-1].input[0], TensorProto.FLOAT, None))
    return m


#: family -> the node cases its module generated (filled by node_cases)
_FAMILY_CASES: Dict[str, list] = {}


def node_cases(families: Sequence[str]) -> dict:
    """{name: case} of the onnx wheel's backend node tests of exactly `families` (module names
    under onnx.backend.test.case.node), whatever other test files imported before.

    onnx generates a module's cases when the module is first imported, appending them to one
    process-wide list (node._NodeTestCases); reading that whole list, as test_onnx.py did, gave
    it test_onnx_resample.py's Resize/Upsample/ConvTranspose cases whenever that file was
    collected first (29 failures: cases that need other feeds). Here a family imported now keeps
    the slice its import appended; one imported earlier by someone else is generated again into a
    private list. NumPy's global generator, which the generators reseed, is restored."""
    import onnx.backend.test.case.node as node
    from onnx.backend.test.case.base import Base

    state = np.random.get_state()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for family in families:
                if family not in _FAMILY_CASES:
                    _FAMILY_CASES[family] = _generate_family(node, Base, f"{node.__name__}.{family}")
    finally:
        np.random.set_state(state)
    return {case.name: case for family in families for case in _FAMILY_CASES[family]}


def _generate_family(node, base, module_name: str) -> list:
    """The cases of one onnx node-case module (see node_cases)."""
    if module_name not in sys.modules:
        before = len(node._NodeTestCases)
        importlib.import_module(module_name)
        return node._NodeTestCases[before:]
    module = sys.modules[module_name]
    saved = node._NodeTestCases, node._existing_names  # expect() refuses a name it has seen
    node._NodeTestCases, node._existing_names = [], {}
    try:
        for cls in vars(module).values():
            if isinstance(cls, type) and issubclass(cls, base) and cls.__module__ == module_name:
                for key in vars(cls):
                    if key.startswith("export"):
                        np.random.seed(0)  # as onnx's _Exporter does before each export
                        getattr(cls, key)()
        return node._NodeTestCases
    finally:
        node._NodeTestCases, node._existing_names = saved


def node_case_feeds(case, constant_inputs: Sequence[str] = ()):
    """An onnx backend node case's model with attribute-like inputs (integer or bool tensors,
    scalars such as Dropout's ratio, and the inputs named in `constant_inputs`) turned into
    initializers, as autotile needs them at import time: (model, feeds, expected outputs)."""
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    inputs, outputs = case.data_sets[0]
    feeds = {}
    for vi, value in zip(list(model.graph.input), inputs):
        value = np.asarray(value)
        if value.dtype.kind in "iub" or value.ndim == 0 or vi.name in constant_inputs:
            model.graph.initializer.append(numpy_helper.from_array(value, vi.name))
            model.graph.input.remove(vi)
        else:
            feeds[vi.name] = value
    return model, feeds, [np.asarray(o) for o in outputs]
