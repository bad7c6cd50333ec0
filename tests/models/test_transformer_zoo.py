"""Transformer zoo: parameter counts equal the published ones (arithmetic written out), tiny
configurations match a NumPy reference forward pass, infer shapes, plan on 8 devices, and
their training step on 2 and 4 devices equals the single-device step."""
import math

import numpy as np
import pytest

import autotile as at
from autotile import models
from autotile.autodiff.graph import default_data_names
from autotile.models.attention import ROTARY_NAMES, rotary_tables
from autotile.models.transformer import MESH_TF_TABLE2


def _param_count(sym):
    """Trainable weights: every argument that is not data, a label or a marked input."""
    data = set(default_data_names(sym))
    arg_shapes, _, _ = sym.infer_shape()
    return sum(int(np.prod(s)) for n, s in zip(sym.list_arguments(), arg_shapes) if n not in data)


def _pre_ln_layer(d, d_ff):
    """A GPT-2/ViT/BERT layer: q, k, v, o (d x d + d each), fc1 (d x d_ff + d_ff), fc2
    (d_ff x d + d), two LayerNorms (2 d each)."""
    return 4 * (d * d + d) + (d * d_ff + d_ff) + (d_ff * d + d) + 2 * 2 * d


# ----------------------------------------------------------------------------- published counts

@pytest.mark.parametrize("size,layers,d,published", [
    ("small", 12, 768, 124_439_808), ("medium", 24, 1024, 354_823_168),
    ("large", 36, 1280, 774_030_080), ("xl", 48, 1600, 1_557_611_200),
])
def test_gpt2_parameter_count(size, layers, d, published):
    # Hugging Face GPT2LMHeadModel: token table 50257 x d (tied with the output layer, so
    # counted once), 1024 learned positions, `layers` layers with d_ff = 4 d, final LayerNorm.
    formula = 50257 * d + 1024 * d + layers * _pre_ln_layer(d, 4 * d) + 2 * d
    assert formula == published
    assert _param_count(models.get(f"gpt2-{size}", batch=1, seq=16)) == published


def test_gpt2_small_is_124m_with_tied_embeddings():
    sym = models.get("gpt2-small", batch=1, seq=16)
    assert "lm_head_weight" not in sym.list_arguments()  # the output layer uses embed_weight
    # 38,597,376 + 786,432 + 12 x 7,087,872 + 1,536
    assert 50257 * 768 + 1024 * 768 + 12 * 7_087_872 + 1536 == 124_439_808 == _param_count(sym)


@pytest.mark.parametrize("size,layers,d,d_ff,published", [
    ("7b", 32, 4096, 11008, 6_738_415_616), ("13b", 40, 5120, 13824, 13_015_864_320),
])
def test_llama_parameter_count(size, layers, d, d_ff, published):
    # Input and output tables 32000 x d each; per layer q, k, v, o (d x d, no biases), gate, up
    # (d_ff x d) and down (d x d_ff), two RMSNorm gains (d each); a final RMSNorm gain.
    # The rotary cos/sin tables are inputs, not parameters (Hugging Face's buffers).
    per_layer = 4 * d * d + 3 * d * d_ff + 2 * d
    assert 2 * 32000 * d + layers * per_layer + d == published
    sym = models.get(f"llama-{size}", batch=1, seq=16)
    assert set(ROTARY_NAMES) <= set(sym.list_arguments())
    assert _param_count(sym) == published


@pytest.mark.parametrize("size,layers,d,published,card", [
    ("base", 12, 768, 109_482_240, "110M"), ("large", 24, 1024, 335_141_888, "340M"),
])
def test_bert_parameter_count(size, layers, d, published, card):
    # BertModel as the model card counts it (bert-base-uncased: "110M parameters"): word
    # (30522), position (512) and token-type (2) tables, embedding LayerNorm, `layers` layers,
    # pooler (d x d + d). The zoo's classifier adds d x classes + classes.
    embeddings = 30522 * d + 512 * d + 2 * d + 2 * d
    backbone = embeddings + layers * _pre_ln_layer(d, 4 * d) + d * d + d
    assert backbone == published
    assert round(published / 1e6, -1) == int(card[:-1])
    classes = 2
    assert _param_count(models.get(f"bert-{size}", batch=1, seq=16)) == published + d * classes + classes


@pytest.mark.parametrize("size,layers,d,patch,published", [
    ("base", 12, 768, 16, 86_567_656), ("large", 24, 1024, 16, 304_326_632),
])
def test_vit_parameter_count(size, layers, d, patch, published):
    # timm vit_{base,large}_patch16_224: patch convolution (d x 3 x 16 x 16 + d), class token
    # (d), 197 learned positions (196 patches + class token), layers, final LayerNorm, head
    # (1000 classes).
    formula = d * 3 * patch * patch + d + d + 197 * d + layers * _pre_ln_layer(d, 4 * d) + 2 * d + d * 1000 + 1000
    assert formula == published
    assert _param_count(models.get(f"vit-{size}", batch=1)) == published


@pytest.mark.parametrize("d_ff,heads", sorted(MESH_TF_TABLE2))
def test_mesh_tf_table2_parameter_count(d_ff, heads):
    # Mesh-TF Table 2 (d_model 1024, d_k = d_v = 256, Billion-Word, 256-token sequences):
    # 6 layers of q, k, v, o (1024 x heads*256, no biases), two feed-forward weights
    # (1024 x d_ff) and two LayerNorms (2 x 1024 each), separate input and output tables
    # of 32768 x 1024, 256 learned positions, final LayerNorm.
    d, d_k, vocab = 1024, 256, 32768
    formula = 6 * (4 * d * heads * d_k + 2 * d * d_ff + 4 * d) + 2 * vocab * d + 256 * d + 2 * d
    sym = models.get(f"transformer-{d_ff}-{heads}", batch=1, seq=16)
    assert _param_count(sym) == formula
    assert round(formula / 1e9, 2) == MESH_TF_TABLE2[(d_ff, heads)]


def test_mesh_tf_default_is_table2_first_row():
    assert _param_count(models.get("transformer", batch=1, seq=16)) == _param_count(
        models.get("transformer-4096-4", batch=1, seq=16))


# ----------------------------------------------------------------------------- tiny configurations

TINY = {
    "transformer": dict(batch=4, layers=2, d_model=16, heads=4, d_ff=32, seq=8, vocab=24),
    "gpt2": dict(batch=4, seq=8, layers=2, d_model=16, heads=4, vocab=24, positions=16),
    "bert": dict(batch=4, seq=8, layers=2, d_model=16, heads=4, vocab=24, positions=16),
    "llama": dict(batch=4, seq=8, layers=2, d_model=16, heads=4, d_ff=32, vocab=24),
    "vit": dict(batch=4, image=8, patch=4, layers=2, d_model=16, heads=4, d_ff=32, classes=10),
}


def _values(sym, classes, seed=0):
    """Token ids / images, labels in range, rotary tables, random weights (norm gains near 1)."""
    rng = np.random.default_rng(seed)
    data = set(default_data_names(sym))
    arg_shapes, _, _ = sym.infer_shape()
    inputs, params = {}, {}
    for name, shape in zip(sym.list_arguments(), arg_shapes):
        if name in ROTARY_NAMES:
            inputs[name] = rotary_tables(shape[2], shape[3])[ROTARY_NAMES.index(name)]
        elif name.endswith("label") or (name == "data" and len(shape) == 2):
            inputs[name] = rng.integers(0, classes, size=shape).astype(np.float32)
        elif name in data:
            inputs[name] = rng.standard_normal(shape).astype(np.float32)
        else:
            params[name] = (rng.standard_normal(shape) * 0.3 + (name.endswith("gamma"))).astype(np.float32)
    return inputs, params


def _classes(name):
    return {"bert": 2, "vit": 10}.get(name, 24)


@pytest.mark.parametrize("name", sorted(TINY))
def test_tiny_models_infer_and_plan_on_8_devices(name):
    sym = models.get(name, **TINY[name])
    _, out_shapes, _ = sym.infer_shape()
    b = TINY[name]["batch"]
    assert out_shapes == [(b, 8, 24) if name in ("transformer", "gpt2", "llama") else (b, _classes(name))]
    plan = at.plan(sym, devices=8)
    assert plan.devices == 8 and plan.comm_bytes > 0
    assert set(plan.param_names) == set(sym.list_arguments()) - set(default_data_names(sym))


@pytest.mark.parametrize("name", sorted(TINY))
def test_tiny_training_step_on_2_and_4_devices_equals_1(name):
    sym = models.get(name, **TINY[name])
    inputs, params = _values(sym, _classes(name))
    ref = at.backend.run(sym, inputs=inputs, params=params, train=True)
    assert set(ref.grads) == set(params)
    assert all(np.abs(g).max() > 0 for g in ref.grads.values())  # every weight takes part
    for devices in (2, 4):
        res = at.backend.run(sym, devices=devices, inputs=inputs, params=params, train=True)
        what = f"{name} on {devices} devices"
        for got, want in zip(res.outputs, ref.outputs):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"{what}: output")
        for p in ref.grads:
            np.testing.assert_allclose(res.grads[p], ref.grads[p], rtol=1e-4, atol=1e-5, err_msg=f"{what}: grad {p}")
            np.testing.assert_allclose(res.params[p], ref.params[p], rtol=1e-4, atol=1e-5,
                                       err_msg=f"{what}: update {p}")


# ----------------------------------------------------------------------------- NumPy reference

def _ln(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * g + b


def _rms(x, g, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def _reference_decoder(kind, p, tokens, cfg):
    """The next-token distribution of a GPT-2 / LLaMA / Mesh-TF decoder, written directly:
    (batch, seq, vocab) probabilities."""
    b, s = tokens.shape
    d, h = cfg["d_model"], cfg["heads"]
    dk = d // h
    x = p["embed_weight"][tokens.astype(int)].astype(np.float64)
    if kind != "llama":
        x = x + p["pos_embed_weight"][:s]
    pos = np.arange(s)
    inv = 10000.0 ** (-np.arange(0, dk, 2) / dk)
    ang = np.concatenate([np.outer(pos, inv)] * 2, axis=1)

    def lin(v, n, bias=True):
        out = v @ p[f"{n}_weight"].T
        return out + p[f"{n}_bias"] if bias and f"{n}_bias" in p else out

    def nrm(v, n):
        return _rms(v, p[f"{n}_gamma"], 1e-6) if kind == "llama" else _ln(v, p[f"{n}_gamma"], p[f"{n}_beta"], 1e-5)

    def rope(v):  # v (b, h, s, dk)
        rot = np.concatenate([-v[..., dk // 2:], v[..., :dk // 2]], axis=-1)
        return v * np.cos(ang) + rot * np.sin(ang)

    for layer in range(cfg["layers"]):
        n = f"layer{layer}"
        a = nrm(x, f"{n}_ln1")
        q, k, v = (lin(a, f"{n}_attn_{c}").reshape(b, s, h, dk).transpose(0, 2, 1, 3) for c in "qkv")
        if kind == "llama":
            q, k = rope(q), rope(k)
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dk)
        scores = np.where(np.tril(np.ones((s, s), bool)), scores, -np.inf)
        ctx = (_softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(b, s, d)
        x = x + lin(ctx, f"{n}_attn_o")
        a = nrm(x, f"{n}_ln2")
        if kind == "llama":
            silu = lin(a, f"{n}_ffn_gate")
            hid = silu / (1 + np.exp(-silu)) * lin(a, f"{n}_ffn_up")
            x = x + lin(hid, f"{n}_ffn_down")
        else:
            act = _gelu_tanh if kind == "gpt2" else (lambda t: np.maximum(t, 0))
            x = x + lin(act(lin(a, f"{n}_ffn_fc1")), f"{n}_ffn_fc2")
    x = nrm(x, "ln_f")
    out = p["embed_weight"] if kind == "gpt2" else p["lm_head_weight"]
    return _softmax(x @ out.T)


@pytest.mark.parametrize("name", ["gpt2", "llama", "transformer"])
def test_decoder_forward_matches_numpy_reference(name):
    cfg = TINY[name]
    sym = models.get(name, **cfg)
    inputs, params = _values(sym, 24, seed=3)
    got = at.backend.run(sym, inputs=inputs, params=params).outputs[0]
    want = _reference_decoder(name, {k: v.astype(np.float64) for k, v in params.items()}, inputs["data"], cfg)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    # causal: changing the last token changes no earlier position's distribution
    later = dict(inputs, data=inputs["data"].copy())
    later["data"][:, -1] = (later["data"][:, -1] + 1) % 24
    moved = at.backend.run(sym, inputs=later, params=params).outputs[0]
    np.testing.assert_array_equal(moved[:, :-1], got[:, :-1])
    assert not np.allclose(moved[:, -1], got[:, -1])


def test_tiny_gpt2_inference_on_4_devices_equals_1():
    sym = models.get("gpt2", **TINY["gpt2"])
    inputs, params = _values(sym, 24, seed=1)
    ref = at.backend.run(sym, inputs=inputs, params=params)
    res = at.backend.run(sym, devices=4, inputs=inputs, params=params)
    np.testing.assert_allclose(res.outputs[0], ref.outputs[0], rtol=1e-4, atol=1e-6)


# ----------------------------------------------------------------------------- named dimensions

MESH_TF_SEC9 = [("batch", "rows"), ("vocab", "cols"), ("d_ff", "cols"), ("heads", "cols")]


def test_mesh_tf_layout_rules_fix_the_named_dimensions():
    sym = models.get("transformer", **TINY["transformer"])
    plan = at.plan(sym, mesh={"rows": 2, "cols": 4}, layout=MESH_TF_SEC9)
    axes = {name: plan.tensor_tilings[name] for name in ("data", "embed_weight", "lm_head_weight",
                                                          "layer0_ffn_fc1_weight", "layer0_ffn_fc2_weight",
                                                          "layer0_attn_q_weight", "layer0_attn_o_weight",
                                                          "layer1_ln2_gamma")}
    # cuts: rows (2), cols (2), cols (2)
    assert axes["data"] == ["split(0)", "replicate", "replicate"]
    for name in ("embed_weight", "lm_head_weight", "layer0_ffn_fc1_weight", "layer0_attn_q_weight"):
        assert axes[name] == ["replicate", "split(0)", "split(0)"], name
    for name in ("layer0_ffn_fc2_weight", "layer0_attn_o_weight"):
        assert axes[name] == ["replicate", "split(1)", "split(1)"], name
    assert axes["layer1_ln2_gamma"] == ["replicate"] * 3
    free = at.plan(sym, mesh={"rows": 2, "cols": 4})
    assert free.comm_bytes <= plan.comm_bytes


def test_every_parameter_declares_dimension_names():
    from autotile.planner.layout_rules import declared_dims

    for name in TINY:
        sym = models.get(name, **TINY[name])
        for node in sym.topo_nodes():
            if node.is_variable and node.name not in ROTARY_NAMES:
                shape = node.attrs["__shape__"].strip("()").split(",")
                assert len(declared_dims(node.attrs.get("__dims__", ""))) == len([d for d in shape if d.strip()]), \
                    f"{name}: {node.name}"


# ----------------------------------------------------------------------------- names and errors

def test_zoo_names_and_keywords():
    sym = models.get("transformer", batch=4, layers=2, d_model=64, heads=4, d_ff=128, seq=16, vocab=100)
    assert sym.infer_shape()[1] == [(4, 16, 100)]
    assert models.get("gpt2-medium", batch=2, seq=32, layers=1).infer_shape()[1] == [(2, 32, 50257)]
    assert models.get("llama-13b", batch=1, seq=8, layers=1).infer_shape()[1] == [(1, 8, 32000)]
    assert models.get("bert-large", batch=3, seq=16, layers=1, classes=5).infer_shape()[1] == [(3, 5)]
    assert models.get("vit", batch=2, layers=1).infer_shape()[1] == [(2, 1000)]
    assert models.get("alexnet", batch=2).infer_shape()[1] == [(2, 1000)]  # older names unchanged
    assert any("gpt2" in d for d in models.known_names())


@pytest.mark.parametrize("call,match", [
    (lambda: models.get("vit", batch=2, seq=16), "vit.*takes no seq"),
    (lambda: models.get("gpt2", batch=2, seq=8, depth=3), "takes no depth"),
    (lambda: models.get("alexnet", batch=2, seq=8), "alexnet.*takes no seq"),
    (lambda: models.get("gpt2-small", batch=2, seq=2048), "seq=2048 exceeds the 1024 positions"),
    (lambda: models.get("bert", batch=2, seq=8, d_model=30, heads=4), "d_model=30 does not divide"),
    (lambda: models.get("transformer", batch=0), "batch must be a positive integer"),
    (lambda: models.gpt2(size="tiny"), "size must be one of small, medium, large, xl"),
    (lambda: models.llama(size="70b"), "size must be one of 7b, 13b"),
    (lambda: models.vit(image=30, patch=16), "image=30 is not a multiple of patch=16"),
    (lambda: models.get("gpt2-huge"), "unknown model 'gpt2-huge'"),
])
def test_bad_sizes_are_errors(call, match):
    with pytest.raises(at.Error, match=match):
        call()
