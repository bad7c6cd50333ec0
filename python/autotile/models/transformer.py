"""Decoder-only Transformer language models: the generic stack GPT-2 and LLaMA are built
from, and Mesh-TensorFlow's language model of Table 2 (Sec 9.1): d_model 1024,
d_k = d_v = 256, d_ff and heads scaled together from 4096 x 4 to 262144 x 256 (0.14B to 4.9B
parameters), trained on the Billion-Word benchmark with sequences of 256 tokens.

Table 2 does not list the depth or the vocabulary. Six layers and a 32768-token subword
vocabulary with separate input and output embeddings (tensor2tensor's lm1b_32k) reproduce
every row to the two decimals printed; each row adds 6 x (4 x 1024 x heads x 256 + 2 x
1024 x d_ff) parameters, which pins the depth at 6 (tests/models/test_transformer_zoo.py).
"""
from __future__ import annotations

from typing import Optional

from ..errors import Error
from ..symbol.symbol import Symbol
from ._layers import check_positive
from .attention import add_positions, block, embed, lm_loss, norm, rotary_inputs, tokens_input

#: Mesh-TF Table 2: (d_ff, heads) -> published parameters in billions (d_model 1024, d_k 256);
#: the paper prints 65516 for the 1.28B row's d_ff, a typo for 65536 (= 2 x 32768).
MESH_TF_TABLE2 = {(4096, 4): 0.14, (8192, 8): 0.22, (16384, 16): 0.37, (32768, 32): 0.67, (65536, 64): 1.28,
                  (131072, 128): 2.48, (262144, 256): 4.90}


def decoder_lm(batch: int, seq: int, layers: int, d_model: int, heads: int, d_ff: int, vocab: int, *,
               d_k: Optional[int] = None, positions: Optional[int] = None, rotary: bool = False,
               norm_kind: str = "layer", eps: Optional[float] = None, ffn: str = "gelu", bias: bool = True,
               tied: bool = False, model: str = "decoder") -> Symbol:
    """A pre-norm causal language model on token ids ``data`` (batch, seq): token embedding
    ``embed_weight``, learned positions ``pos_embed_weight`` (`positions` rows) or rotary
    queries and keys, `layers` blocks ``layer{l}``, a final norm ``ln_f`` and the softmax over
    `vocab` (output weight ``lm_head_weight``, or the embedding when `tied`) against
    ``softmax_label`` (batch, seq). d_k defaults to d_model / heads."""
    if d_k is None:
        check_positive(model, d_model=d_model, heads=heads)
        if d_model % heads:
            raise Error(f"{model}: d_model={d_model} does not divide into heads={heads} (give d_k=)")
        d_k = d_model // heads
    check_positive(model, batch=batch, seq=seq, layers=layers, d_model=d_model, heads=heads, d_ff=d_ff,
                   vocab=vocab, d_k=d_k, **({"positions": positions} if positions is not None else {}))
    tokens = tokens_input(batch, seq)
    x, table = embed(tokens, vocab, d_model)
    if positions is not None:
        x = add_positions(x, seq, positions, d_model)
    rope = rotary_inputs(seq, d_k) if rotary else None
    for layer in range(layers):
        x = block(x, batch, seq, d_model, heads, d_k, d_ff, f"layer{layer}", causal=True, norm_kind=norm_kind,
                  eps=eps, ffn=ffn, bias=bias, rotary=rope)
    x = norm(x, d_model, "ln_f", norm_kind, eps)
    return lm_loss(x, batch, seq, vocab, d_model, tied=table if tied else None)


def transformer(batch: int = 32, seq: int = 256, layers: int = 6, d_model: int = 1024, heads: int = 4,
                d_ff: int = 4096, vocab: int = 32768, d_k: Optional[int] = None, positions: Optional[int] = None):
    """Mesh-TensorFlow's decoder-only language model (Sec 9.1, Table 2): `layers` pre-norm
    blocks of ReLU feed-forward and multi-head attention without biases (mtf's dense layers),
    learned positions (`positions` rows, default max(seq, 256)), separate input and output
    embeddings. The defaults are Table 2's first row (0.14B); ``d_k`` defaults to
    d_model / heads (256 for Table 2's rows: pass d_k=256 with the larger head counts, as the
    zoo names ``transformer-{d_ff}-{heads}`` do)."""
    positions = max(seq, 256) if positions is None else positions
    return decoder_lm(batch, seq, layers, d_model, heads, d_ff, vocab, d_k=d_k, positions=positions, ffn="relu",
                      bias=False, model="transformer")
