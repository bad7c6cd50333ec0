"""What the TorchScript ONNX exporter cannot take, rewritten for the length of one export
into forms it takes, with the same values:

- ``forward``'s defaulted arguments: the exporter appends each one to the traced arguments,
  a bool (``nn.TransformerEncoderLayer``'s ``is_causal=False``) as a tensor that
  ``scaled_dot_product_attention`` then refuses; the module is traced through a forward of
  ``(*args)``, which leaves them at their defaults.
- ``scaled_dot_product_attention(..., enable_gqa=True)`` (grouped-query attention: LLaMA,
  Mistral, Qwen2 and Gemma through Hugging Face's SDPA attention): the exporter has no
  conversion ("not implemented if enable_gqa is True"); the keys and values are repeated
  to the query's heads (``repeat_interleave`` on the head dimension, as the GQA definition
  and Hugging Face's ``repeat_kv`` do) and attention runs without it."""
from __future__ import annotations

import contextlib


def _gqa_free(sdpa):
    """`sdpa` (``F.scaled_dot_product_attention``) with ``enable_gqa=True`` computed as
    plain attention over keys and values repeated to the query's number of heads."""
    import functools

    @functools.wraps(sdpa)
    def attention(query, key, value, *args, enable_gqa=False, **kwargs):
        if enable_gqa and key.dim() >= 3 and key.size(-3) != query.size(-3):
            groups = query.size(-3) // key.size(-3)
            key = key.repeat_interleave(groups, dim=-3)
            value = value.repeat_interleave(groups, dim=-3)
        return sdpa(query, key, value, *args, **kwargs)

    return attention


@contextlib.contextmanager
def exportable(module):
    """For the length of the ``with``: `module` traced through a forward of ``(*args)`` and
    ``torch.nn.functional.scaled_dot_product_attention`` free of ``enable_gqa`` (see the
    module's docstring); both restored after."""
    import torch.nn.functional as F

    own = module.__dict__.get("forward")
    plain = own if own is not None else type(module).forward.__get__(module)
    sdpa = F.scaled_dot_product_attention
    module.forward = lambda *args: plain(*args)
    F.scaled_dot_product_attention = _gqa_free(sdpa)
    try:
        yield module
    finally:
        F.scaled_dot_product_attention = sdpa
        if own is None:
            del module.forward
        else:
            module.forward = own
