"""BERT (Devlin et al. 2019) as the Hugging Face ``BertForSequenceClassification`` builds it:
word, position (512) and token-type (2) embeddings summed and normalised, post-norm encoder
layers (GELU, biases, LayerNorm eps 1e-12), the pooler (tanh dense layer on the first token)
and a classifier over `classes`. Every token is of type 0 (one segment)."""
from __future__ import annotations

from typing import Optional

from ..errors import Error
from ._layers import check_positive, op
from .attention import block, class_loss, embed, first_token, linear, norm, param, preset, tokens_input

#: size -> (layers, d_model, heads)
BERT_SIZES = {"base": (12, 768, 12), "large": (24, 1024, 16)}
_EPS = 1e-12


def bert(batch: int = 32, size: str = "base", seq: int = 512, layers: Optional[int] = None,
         d_model: Optional[int] = None, heads: Optional[int] = None, d_ff: Optional[int] = None,
         vocab: int = 30522, positions: int = 512, classes: int = 2):
    """BERT-`size` (base, large) classifying token ids ``data`` (batch, seq) into `classes`
    (label ``softmax_label`` (batch,)); layers, d_model, heads, d_ff (4 d_model), vocab and
    positions override the size's values."""
    layers, d_model, heads = preset("bert", BERT_SIZES, size, layers, d_model, heads)
    d_ff = 4 * d_model if d_ff is None else d_ff
    check_positive("bert", batch=batch, seq=seq, layers=layers, d_model=d_model, heads=heads, d_ff=d_ff,
                   vocab=vocab, positions=positions, classes=classes)
    if d_model % heads:
        raise Error(f"bert: d_model={d_model} does not divide into heads={heads}")
    if seq > positions:
        raise Error(f"bert: seq={seq} exceeds the {positions} positions the model has")
    x, _ = embed(tokens_input(batch, seq), vocab, d_model, "word_embed")
    pos = param("pos_embed_weight", (positions, d_model), ("positions", "d_model"))
    pos = op("slice_axis", pos, axis=0, begin=0, end=seq, name="pos_embed_rows") if seq < positions else pos
    # token type 0 for every token: row 0 of the (2, d_model) table, broadcast like the positions
    types = op("slice_axis", param("type_embed_weight", (2, d_model), ("types", "d_model")), axis=0, begin=0, end=1,
               name="type_embed_row")
    extra = op("broadcast_add", pos, types, name="pos_type")
    x = op("broadcast_add", x, op("reshape", extra, shape=(1, seq, d_model), name="pos_type_expand"), name="embed_sum")
    x = norm(x, d_model, "embed_ln", eps=_EPS)
    for layer in range(layers):
        x = block(x, batch, seq, d_model, heads, d_model // heads, d_ff, f"layer{layer}", causal=False,
                  pre_norm=False, eps=_EPS)
    pooled = op("tanh", linear(first_token(x, batch, d_model, "cls"), d_model, d_model, "pooler", "d_model",
                               "d_model"), name="pooler_tanh")
    return class_loss(pooled, batch, classes, d_model)
