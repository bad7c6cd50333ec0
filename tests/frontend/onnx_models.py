"""Helpers for the ONNX importer tests: build small models with onnx.helper and run them on
onnxruntime (the oracle) and on autotile's reference executor."""
from __future__ import annotations

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

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
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
