"""GPT-2 (Radford et al. 2019) as the Hugging Face ``GPT2LMHeadModel`` builds it: learned
positions (1024), pre-norm blocks with biases, GELU (tanh approximation), d_ff = 4 d_model,
a final LayerNorm and the output layer tied to the token embedding (vocab 50257)."""
from __future__ import annotations

from typing import Optional

from .attention import preset
from .transformer import decoder_lm

#: size -> (layers, d_model, heads)
GPT2_SIZES = {"small": (12, 768, 12), "medium": (24, 1024, 16), "large": (36, 1280, 20), "xl": (48, 1600, 25)}


def gpt2(batch: int = 32, size: str = "small", seq: int = 1024, layers: Optional[int] = None,
         d_model: Optional[int] = None, heads: Optional[int] = None, d_ff: Optional[int] = None,
         vocab: int = 50257, positions: int = 1024):
    """GPT-2 `size` (small, medium, large, xl); any of layers, d_model, heads, d_ff (4 d_model),
    vocab and positions overrides the size's value (tiny test models, or Megatron-LM's vocab
    padded to 50304)."""
    layers, d_model, heads = preset("gpt2", GPT2_SIZES, size, layers, d_model, heads)
    d_ff = 4 * d_model if d_ff is None else d_ff
    return decoder_lm(batch, seq, layers, d_model, heads, d_ff, vocab, positions=positions, ffn="gelu_tanh",
                      tied=True, model="gpt2")
