"""Export holes of the coverage table, each failing on the code before its fix:

- ``nn.TransformerEncoderLayer``: the TorchScript exporter appended ``is_causal=False`` to
  the traced arguments as a tensor, which ``scaled_dot_product_attention`` refused.
- A Hugging Face ``LlamaForCausalLM`` with grouped-query attention: "conversion of
  scaled_dot_product_attention not implemented if enable_gqa is True".
- CLIP's ``logit_scale.exp() * logits``: a 0-d weight's Exp was expanded to rank 3 against
  a matrix ("transpose: axes=(1, 0) must list each of the 3 axes").

Oracles: the plain module's own output (the exported graph run by onnxruntime must give it);
onnxruntime on a hand-built ONNX graph (autotile's import must give its output)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'autotile[torch]')")
onnx = pytest.importorskip("onnx", reason="onnx is not installed (pip install 'autotile[torch]')")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import autotile as at  # noqa: E402
import autotile.torch as att  # noqa: E402
from autotile.torch.families import build  # noqa: E402
from autotile.torch.names import forward_arg_names, onnx_export  # noqa: E402


def _ort(model, feeds):
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _export_matches_module(module, inputs):
    names = forward_arg_names(module, len(inputs))
    model = onnx_export(module, inputs, names)
    with torch.no_grad():
        want = module.eval()(*inputs).numpy()
    got = _ort(model, {n: x.numpy() for n, x in zip(names, inputs)})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    return model


def test_transformer_encoder_layer_exports_with_its_defaulted_arguments():
    torch.manual_seed(0)
    m = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    x = torch.randn(4, 8, 16)
    model = _export_matches_module(m, (x,))
    assert [i.name for i in model.graph.input][0] == "src"  # is_causal is not a graph input
    sym = att.export(m, x)
    assert {"self_attn.in_proj_weight", "linear1.weight", "norm2.bias"} <= set(sym.torch_map.params.values())
    assert "forward" not in m.__dict__  # the module is left as it was


def test_llama_with_grouped_query_attention_exports():
    pytest.importorskip("transformers")
    m, (ids,) = build("LLaMA (GQA)")
    attn = m.model.model.layers[0].self_attn
    assert m.model.config.num_key_value_heads < m.model.config.num_attention_heads
    assert attn.k_proj.weight.shape[0] < attn.q_proj.weight.shape[0]
    _export_matches_module(m, (ids,))
    assert F.scaled_dot_product_attention.__name__ == "scaled_dot_product_attention"  # restored
    q, k = torch.randn(2, 4, 5, 8), torch.randn(2, 2, 5, 8)
    with pytest.raises(Exception):  # the plain function still checks its heads
        F.scaled_dot_product_attention(q, k, k)


def test_a_zero_d_weight_broadcasts_as_a_scalar():
    from onnx import TensorProto, helper, numpy_helper

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    w = np.array(0.5, dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("Exp", ["w"], ["e"]), helper.make_node("Mul", ["x", "e"], ["m"]),
         helper.make_node("Transpose", ["m"], ["y"], perm=[1, 0])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    want = _ort(model, {"x": x})[0]
    sym = at.onnx.load(model, trainable=["w"])
    got = at.backend.run(sym, inputs={sym.onnx_names["x"]: x}).outputs[0]
    assert got.shape == want.shape == (3, 2)
    np.testing.assert_allclose(got, want, rtol=1e-6)
