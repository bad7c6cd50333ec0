"""LLaMA (Touvron et al. 2023) shapes: RMSNorm before each sublayer, rotary position
embedding on queries and keys, SwiGLU feed-forward, no biases, separate input and output
embeddings, vocab 32000."""
from __future__ import annotations

from typing import Optional

from .attention import preset
from .transformer import decoder_lm

#: size -> (layers, d_model, heads, d_ff)
LLAMA_SIZES = {"7b": (32, 4096, 32, 11008), "13b": (40, 5120, 40, 13824)}


def llama(batch: int = 32, size: str = "7b", seq: int = 2048, layers: Optional[int] = None,
          d_model: Optional[int] = None, heads: Optional[int] = None, d_ff: Optional[int] = None,
          vocab: int = 32000):
    """LLaMA-`size` (7b, 13b); layers, d_model, heads, d_ff and vocab override the size's values.
    The rotary tables are the inputs ``rope_cos``/``rope_sin`` (see
    :func:`autotile.models.attention.rotary_inputs`)."""
    layers, d_model, heads, d_ff = preset("llama", LLAMA_SIZES, size, layers, d_model, heads, d_ff)
    return decoder_lm(batch, seq, layers, d_model, heads, d_ff, vocab, rotary=True, norm_kind="rms", eps=1e-6,
                      ffn="swiglu", bias=False, model="llama")
