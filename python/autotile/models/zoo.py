"""Zoo names -> builders: ``get("vgg16", batch=32)``, ``get("wresnet-152-10")``,
``get("rnn-10-8k")`` (layers-hidden, k = 1024)."""
from __future__ import annotations

import re
from typing import Callable, List, Optional, Tuple

from ..errors import Error
from .alexnet import alexnet
from .digits import cnn_digits, mlp_digits
from .mlp import mlp
from .rnn import rnn
from .vgg import VGG_LAYERS, vgg
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


def known_names() -> List[str]:
    """Descriptions of the names :func:`get` accepts."""
    return [desc for _, desc, _ in _PATTERNS]


def get(name: str, batch: Optional[int] = None):
    """The zoo model `name` as a Symbol whose data and label inputs have their shapes set for
    `batch` (default :data:`DEFAULT_BATCH`), so ``sym.infer_shape()`` needs no arguments."""
    if not isinstance(name, str):
        raise Error(f"model name must be a string, got {type(name).__name__}")
    batch = DEFAULT_BATCH if batch is None else batch
    key = name.strip().lower()
    for pattern, _, build in _PATTERNS:
        m = re.fullmatch(pattern, key)
        if m:
            return build(m, batch)
    raise Error(f"unknown model '{name}'; known: {'; '.join(known_names())}")
