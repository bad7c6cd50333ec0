"""Pieces the Transformer builders share: parameters with named dimensions, linear layers on
(batch, seq, features), normalisation, multi-head attention (causal or not, with rotary
position embedding), the feed-forward blocks (GELU/ReLU MLP and SwiGLU), token and position
embeddings and the loss heads.

Every parameter declares Mesh-TensorFlow dimension names (``Variable(..., dims=...)``), so a
layout can be given as Mesh-TF rules (docs/layouts.md), e.g. Sec 9's
``[("batch", "rows"), ("vocab", "cols"), ("d_ff", "cols"), ("heads", "cols")]``. The names:
``batch``, ``seq`` (data and labels), ``d_model``, ``heads`` (the fused heads x d_k
dimension of a query/key/value/output projection, declared ``heads:H`` with its H whole heads:
a rule splits it by whole heads only, refused where the split does not divide H), ``d_ff``,
``vocab``, ``positions`` and ``classes``.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple

import numpy as np

from ..errors import Error
from ..symbol.symbol import Symbol, Variable
from ._layers import op


def preset(model: str, table: dict, size: str, *overrides):
    """The sizes of `model`'s preset `size` (a row of `table`), each replaced by the
    corresponding override that is not None; Error naming the presets for an unknown size."""
    if size not in table:
        raise Error(f"{model}: size must be one of {', '.join(table)}, got {size!r}")
    return [base if value is None else value for base, value in zip(table[size], overrides)]


def param(name: str, shape: Sequence[int], dims: Sequence[str], **kwargs) -> Symbol:
    """A parameter Variable with its shape and Mesh-TF dimension names."""
    shape = tuple(int(d) for d in shape)
    if len(shape) != len(dims):
        raise Error(f"parameter '{name}': shape {shape} and dimension names {tuple(dims)} differ in rank")
    return Variable(name, shape=shape, dims=tuple(dims), **kwargs)


def tokens_input(batch: int, seq: int, name: str = "data") -> Symbol:
    """Token ids (batch, seq), named dimensions ``batch``, ``seq``."""
    return Variable(name, shape=(batch, seq), dims=("batch", "seq"))


def linear(x: Symbol, units: int, in_units: int, name: str, out_dim: str, in_dim: str,
           bias: bool = True) -> Symbol:
    """``x @ W^T + b`` on the last axis of x (FullyConnected, flatten=False). W is
    ``{name}_weight`` (units, in_units) with dimensions (out_dim, in_dim), b ``{name}_bias``."""
    w = param(f"{name}_weight", (units, in_units), (out_dim, in_dim))
    args = {"weight": w}
    if bias:
        args["bias"] = param(f"{name}_bias", (units,), (out_dim,))
    return op("FullyConnected", x, num_hidden=units, no_bias=not bias, flatten=False, name=name, **args)


def norm(x: Symbol, d_model: int, name: str, kind: str = "layer", eps: Optional[float] = None) -> Symbol:
    """LayerNorm (gamma and beta) or RMSNorm (gamma only) over the last axis."""
    gamma = param(f"{name}_gamma", (d_model,), ("d_model",))
    if kind == "layer":
        beta = param(f"{name}_beta", (d_model,), ("d_model",))
        return op("LayerNorm", x, gamma, beta, axis=-1, eps=1e-5 if eps is None else eps, name=name)
    if kind == "rms":
        return op("RMSNorm", x, gamma, axis=-1, eps=1e-6 if eps is None else eps, name=name)
    raise Error(f"norm '{name}': kind must be 'layer' or 'rms', got {kind!r}")


def _split_heads(x: Symbol, batch: int, seq: int, heads: int, d_k: int, name: str) -> Symbol:
    """(batch, seq, heads * d_k) -> (batch, heads, seq, d_k)."""
    x = op("reshape", x, shape=(batch, seq, heads, d_k), name=f"{name}_split")
    return op("transpose", x, axes=(0, 2, 1, 3), name=f"{name}_heads")


#: names of the rotary tables (fixed inputs, not weights)
ROTARY_NAMES = ("rope_cos", "rope_sin")


def rotary_tables(seq: int, d_k: int, base: float = 10000.0) -> Tuple[np.ndarray, np.ndarray]:
    """cos and sin of the rotary angles, shape (1, 1, seq, d_k): position p, channel j has angle
    p * base^(-2 (j mod d_k/2) / d_k) (the half-split layout of GPT-NeoX and Hugging Face LLaMA)."""
    inv_freq = base ** (-np.arange(0, d_k, 2, dtype=np.float64) / d_k)
    angles = np.outer(np.arange(seq, dtype=np.float64), inv_freq)
    angles = np.concatenate([angles, angles], axis=1)[None, None]
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def rotary_inputs(seq: int, d_k: int) -> Tuple[Symbol, Symbol]:
    """The rotary tables as inputs ``rope_cos``/``rope_sin`` (1, 1, seq, d_k) whose values
    :func:`rotary_tables` gives. autotile has no sin/cos operator, so the tables are fed like
    data; they are marked as data (``__data__``), so they get no gradient or update and are no
    parameters (Hugging Face keeps them as buffers too)."""
    return tuple(Variable(name, shape=(1, 1, seq, d_k), data=1) for name in ROTARY_NAMES)


def _rotate(x: Symbol, cos: Symbol, sin: Symbol, d_k: int, name: str) -> Symbol:
    """x * cos + rotate_half(x) * sin, rotate_half(x) = concat(-x[..., d/2:], x[..., :d/2])."""
    half = d_k // 2
    lo = op("slice_axis", x, axis=-1, begin=0, end=half, name=f"{name}_lo")
    hi = op("slice_axis", x, axis=-1, begin=half, end=d_k, name=f"{name}_hi")
    rotated = op("Concat", op("negative", hi, name=f"{name}_neg"), lo, dim=3, name=f"{name}_rot")
    return op("elemwise_add", op("broadcast_mul", x, cos, name=f"{name}_cos"),
              op("broadcast_mul", rotated, sin, name=f"{name}_sin"), name=name)


def attention(x: Symbol, batch: int, seq: int, d_model: int, heads: int, d_k: int, name: str,
              causal: bool = False, bias: bool = True, rotary: Optional[Tuple[Symbol, Symbol]] = None) -> Symbol:
    """Multi-head self-attention on x (batch, seq, d_model): projections ``{name}_q/k/v``
    (heads * d_k outputs), scores softmax(q k^T / sqrt(d_k)) per head (upper triangle masked
    when `causal`), output projection ``{name}_o`` back to d_model. `rotary` = (cos, sin)
    rotates queries and keys (RoPE)."""
    if rotary is not None and d_k % 2:
        raise Error(f"attention '{name}': rotary embedding needs an even d_k, got {d_k}")
    width = heads * d_k
    q, k, v = (_split_heads(linear(x, width, d_model, f"{name}_{p}", f"heads:{heads}", "d_model", bias),
                            batch, seq, heads, d_k, f"{name}_{p}") for p in "qkv")
    if rotary is not None:
        q = _rotate(q, *rotary, d_k, f"{name}_q_rope")
        k = _rotate(k, *rotary, d_k, f"{name}_k_rope")
    scores = op("batch_dot", q, k, transpose_b=True, name=f"{name}_scores")  # (batch, heads, seq, seq)
    scores = op("_mul_scalar", scores, scalar=1.0 / math.sqrt(d_k), name=f"{name}_scale")
    if causal:
        # keep j <= i: lower triangle of ones; -1e9 where masked (exp underflows to 0)
        lower = op("trilu", op("ones_like", scores, name=f"{name}_ones"), upper=False, name=f"{name}_tril")
        penalty = op("_mul_scalar", op("_minus_scalar", lower, scalar=1.0, name=f"{name}_mask"), scalar=1e9,
                     name=f"{name}_penalty")
        scores = op("elemwise_add", scores, penalty, name=f"{name}_masked")
    probs = op("softmax", scores, axis=-1, name=f"{name}_probs")
    ctx = op("batch_dot", probs, v, name=f"{name}_context")  # (batch, heads, seq, d_k)
    ctx = op("transpose", ctx, axes=(0, 2, 1, 3), name=f"{name}_merge")
    ctx = op("reshape", ctx, shape=(batch, seq, width), name=f"{name}_concat")
    return linear(ctx, d_model, width, f"{name}_o", "d_model", f"heads:{heads}", bias)


def feed_forward(x: Symbol, d_model: int, d_ff: int, name: str, activation: str = "gelu",
                 bias: bool = True) -> Symbol:
    """``{name}_fc2(act({name}_fc1(x)))``: d_model -> d_ff -> d_model; activation gelu (erf),
    gelu_tanh (GPT-2's approximation) or relu."""
    h = linear(x, d_ff, d_model, f"{name}_fc1", "d_ff", "d_model", bias)
    if activation == "gelu":
        h = op("gelu", h, name=f"{name}_act")
    elif activation == "gelu_tanh":
        h = op("gelu", h, approximate="tanh", name=f"{name}_act")
    elif activation == "relu":
        h = op("relu", h, name=f"{name}_act")
    else:
        raise Error(f"feed_forward '{name}': activation must be gelu, gelu_tanh or relu, got {activation!r}")
    return linear(h, d_model, d_ff, f"{name}_fc2", "d_model", "d_ff", bias)


def swiglu(x: Symbol, d_model: int, d_ff: int, name: str) -> Symbol:
    """LLaMA's feed-forward: ``{name}_down(silu({name}_gate(x)) * {name}_up(x))``, no biases."""
    gate = op("silu", linear(x, d_ff, d_model, f"{name}_gate", "d_ff", "d_model", bias=False), name=f"{name}_silu")
    up = linear(x, d_ff, d_model, f"{name}_up", "d_ff", "d_model", bias=False)
    return linear(op("elemwise_mul", gate, up, name=f"{name}_glu"), d_model, d_ff, f"{name}_down", "d_model",
                  "d_ff", bias=False)


def embed(tokens: Symbol, vocab: int, d_model: int, name: str = "embed") -> Tuple[Symbol, Symbol]:
    """Token embedding ``{name}_weight`` (vocab, d_model): (batch, seq) ids -> (batch, seq,
    d_model). Returns (embedded, weight) so an output layer can share the weight."""
    w = param(f"{name}_weight", (vocab, d_model), ("vocab", "d_model"))
    return op("Embedding", tokens, w, input_dim=vocab, output_dim=d_model, name=name), w


def add_positions(x: Symbol, seq: int, positions: int, d_model: int, name: str = "pos_embed") -> Symbol:
    """x + the first `seq` rows of a learned table ``{name}_weight`` (positions, d_model)."""
    if seq > positions:
        raise Error(f"seq={seq} exceeds the {positions} positions the model has")
    table = param(f"{name}_weight", (positions, d_model), ("positions", "d_model"))
    rows = op("slice_axis", table, axis=0, begin=0, end=seq, name=f"{name}_rows") if seq < positions else table
    rows = op("reshape", rows, shape=(1, seq, d_model), name=f"{name}_expand")
    return op("broadcast_add", x, rows, name=f"{name}_add")


def lm_loss(x: Symbol, batch: int, seq: int, vocab: int, d_model: int, tied: Optional[Symbol] = None,
            name: str = "lm_head") -> Symbol:
    """Next-token softmax cross-entropy: logits (batch, seq, vocab) from ``{name}_weight``
    (vocab, d_model), or from the token embedding `tied`, against ``softmax_label`` (batch, seq)
    token ids; the gradient is averaged over the batch x seq tokens."""
    w = tied if tied is not None else param(f"{name}_weight", (vocab, d_model), ("vocab", "d_model"))
    logits = op("FullyConnected", x, weight=w, num_hidden=vocab, no_bias=True, flatten=False, name=name)
    label = Variable("softmax_label", shape=(batch, seq), dims=("batch", "seq"))
    return op("SoftmaxOutput", logits, label, preserve_shape=True, normalization="batch", name="softmax")


def class_loss(x: Symbol, batch: int, classes: int, d_model: int, name: str = "classifier") -> Symbol:
    """Softmax cross-entropy over `classes` of (batch, d_model) features against
    ``softmax_label`` (batch,) (gradient averaged over the batch)."""
    logits = linear(x, classes, d_model, name, "classes", "d_model")
    label = Variable("softmax_label", shape=(batch,), dims=("batch",))
    return op("SoftmaxOutput", logits, label, normalization="batch", name="softmax")


def block(x: Symbol, batch: int, seq: int, d_model: int, heads: int, d_k: int, d_ff: int, name: str, *,
          causal: bool, pre_norm: bool = True, norm_kind: str = "layer", eps: Optional[float] = None,
          ffn: str = "gelu", bias: bool = True, rotary: Optional[Tuple[Symbol, Symbol]] = None) -> Symbol:
    """One Transformer layer ``{name}``: attention ``{name}_attn`` and feed-forward
    ``{name}_ffn`` (`ffn` = gelu, gelu_tanh, relu or swiglu), each with a residual connection
    and a norm (``{name}_ln1``, ``{name}_ln2``) before the sublayer (`pre_norm`: GPT-2, LLaMA,
    ViT, Mesh-TF) or after the residual sum (BERT)."""
    def sublayer(x, k, fn):
        if pre_norm:
            return op("elemwise_add", x, fn(norm(x, d_model, f"{name}_ln{k}", norm_kind, eps)), name=f"{name}_res{k}")
        return norm(op("elemwise_add", x, fn(x), name=f"{name}_res{k}"), d_model, f"{name}_ln{k}", norm_kind, eps)

    x = sublayer(x, 1, lambda h: attention(h, batch, seq, d_model, heads, d_k, f"{name}_attn", causal=causal,
                                           bias=bias, rotary=rotary))
    if ffn == "swiglu":
        return sublayer(x, 2, lambda h: swiglu(h, d_model, d_ff, f"{name}_ffn"))
    return sublayer(x, 2, lambda h: feed_forward(h, d_model, d_ff, f"{name}_ffn", ffn, bias))


def first_token(x: Symbol, batch: int, d_model: int, name: str) -> Symbol:
    """x[:, 0, :] of (batch, seq, d_model) as (batch, d_model) (BERT's [CLS], ViT's class token)."""
    first = op("slice_axis", x, axis=1, begin=0, end=1, name=f"{name}_slice")
    return op("reshape", first, shape=(batch, d_model), name=name)


__all__ = ["ROTARY_NAMES", "add_positions", "attention", "block", "class_loss", "embed", "feed_forward",
           "first_token", "linear", "lm_loss", "norm", "param", "preset", "rotary_inputs", "rotary_tables", "swiglu",
           "tokens_input"]
