"""Zoo names -> builders: ``get("vgg16", batch=32)``, ``get("wresnet-152-10")``,
``get("rnn-10-8k")`` (layers-hidden, k = 1024), and the Transformers, which take their sizes
as keywords: ``get("gpt2-small", batch=8, seq=128)``, ``get("transformer", batch=4,
layers=2, d_model=64, heads=4, d_ff=128, seq=16, vocab=100)``."""
from __future__ import annotations

import inspect
import re
from typing import Callable, List, Optional, Tuple

from ..errors import Error
from .alexnet import alexnet
from .bert import BERT_SIZES, bert
from .digits import cnn_digits, mlp_digits
from .gpt2 import GPT2_SIZES, gpt2
from .llama import LLAMA_SIZES, llama
from .mlp import mlp
from .rnn import rnn
from .transformer import transformer
from .vgg import VGG_LAYERS, vgg
from .vit import VIT_SIZES, vit
from .wresnet import RESNET_UNITS, wresnet

#: batch size of a zoo model when none is given
DEFAULT_BATCH = 32


def _hidden(text: str) -> int:
    return int(text[:-1]) * 1024 if text.lower().endswith("k") else int(text)


# (pattern, description, builder(match, batch)); first match wins
_PATTERNS: List[Tuple[str, str, Callable]] = [
    (r"mlp", "mlp (4 x 8192, Soybean Fig 8)", lambda m, b: mlp(b)),
    (r"mlp-digits", "mlp-digits (64-128-128-10, for autotile train --data digits)", lambda m, b: mlp_digits(b)),
    (r"cnn-digits", "cnn-digits (two 3x3 convs on 8x8x1, for autotile train --data digits)",
     lambda m, b: cnn_digits(b)),
    (r"mlp-(\d+)-(\d+k?)", "mlp-L-H (L layers of H units, e.g. mlp-5-300)",
     lambda m, b: mlp(b, layers=int(m[1]), hidden=_hidden(m[2]))),
    (r"alexnet", "alexnet", lambda m, b: alexnet(b)),
    (r"vgg(\d+)", f"vgg{{{','.join(map(str, sorted(VGG_LAYERS)))}}}",
     lambda m, b: vgg(int(m[1]), b)),
    (r"vgg(\d+)[-_]bn", "vgg16_bn (batch normalisation)", lambda m, b: vgg(int(m[1]), b, batch_norm=True)),
    (r"resnet-?(\d+)", f"resnet{{{','.join(map(str, sorted(RESNET_UNITS)))}}} (width 1)",
     lambda m, b: wresnet(int(m[1]), 1, b)),
    (r"wresnet-(\d+)-(\d+)", "wresnet-D-W (e.g. wresnet-152-10)", lambda m, b: wresnet(int(m[1]), int(m[2]), b)),
    (r"rnn-(\d+)-(\d+k?)", "rnn-L-H (L LSTM layers of H units, k=1024, e.g. rnn-10-8k)",
     lambda m, b: rnn(int(m[1]), _hidden(m[2]), batch=b)),
]



def _sizes(table) -> str:
    return "|".join(table)


# Transformers: (pattern, description, builder, keywords the name fixes(match)); keywords given
# to get() override the name's (gpt2-small with layers=2 is a 2-layer GPT-2 small).
_SIZED: List[Tuple[str, str, Callable, Callable]] = [
    (r"transformer", "transformer (Mesh-TF Table 2 decoder LM, 0.14B; sizes as keywords)", transformer,
     lambda m: {}),
    (r"transformer-(\d+)-(\d+)", "transformer-DFF-HEADS (Mesh-TF Table 2 row, d_k 256, e.g. transformer-262144-256)",
     transformer, lambda m: {"d_ff": int(m[1]), "heads": int(m[2]), "d_k": 256}),
    (rf"gpt2(?:-({_sizes(GPT2_SIZES)}))?", f"gpt2-{{{','.join(GPT2_SIZES)}}}", gpt2,
     lambda m: {"size": m[1] or "small"}),
    (rf"bert(?:-({_sizes(BERT_SIZES)}))?", f"bert-{{{','.join(BERT_SIZES)}}}", bert,
     lambda m: {"size": m[1] or "base"}),
    (rf"llama-?({_sizes(LLAMA_SIZES)})?", f"llama-{{{','.join(LLAMA_SIZES)}}} (shapes)", llama,
     lambda m: {"size": m[1] or "7b"}),
    (rf"vit(?:-({_sizes(VIT_SIZES)}))?", f"vit-{{{','.join(VIT_SIZES)}}}", vit, lambda m: {"size": m[1] or "base"}),
]


def known_names() -> List[str]:
    """Descriptions of the names :func:`get` accepts."""
    return [desc for _, desc, _ in _PATTERNS] + [desc for _, desc, _, _ in _SIZED]


def _build_sized(name: str, builder: Callable, batch: int, fixed: dict, sizes: dict):
    accepted = set(inspect.signature(builder).parameters) - {"batch", "size"}
    unknown = sorted(k for k in sizes if k not in accepted)
    if unknown:
        raise Error(f"model '{name}' takes no {', '.join(unknown)} (its sizes: {', '.join(sorted(accepted))})")
    return builder(batch=batch, **{**fixed, **sizes})


def get(name: str, batch: Optional[int] = None, seq: Optional[int] = None, **sizes):
    """The zoo model `name` as a Symbol whose data and label inputs have their shapes set for
    `batch` (default :data:`DEFAULT_BATCH`), so ``sym.infer_shape()`` needs no arguments.

    Transformers take `seq` (tokens per sequence) and their sizes as keywords (layers,
    d_model, heads, d_ff, vocab, ...: see each builder); other models take none."""
    if not isinstance(name, str):
        raise Error(f"model name must be a string, got {type(name).__name__}")
    batch = DEFAULT_BATCH if batch is None else batch
    if seq is not None:
        sizes["seq"] = seq
    key = name.strip().lower()
    for pattern, _, build, fixed in _SIZED:
        m = re.fullmatch(pattern, key)
        if m:
            return _build_sized(name, build, batch, fixed(m), sizes)
    for pattern, _, build in _PATTERNS:
        m = re.fullmatch(pattern, key)
        if m:
            if sizes:
                raise Error(f"model '{name}' takes no {', '.join(sorted(sizes))} (only batch)")
            return build(m, batch)
    raise Error(f"unknown model '{name}'; known: {'; '.join(known_names())}")
