"""Vision Transformer (Dosovitskiy et al. 2021) as timm's ``vit_*_patch*_224`` builds it:
non-overlapping patches embedded by a strided convolution, a class token, learned positions,
pre-norm encoder layers (GELU, biases, LayerNorm eps 1e-6), a final norm and a classifier on
the class token."""
from __future__ import annotations

from typing import Optional

from ..errors import Error
from ._layers import check_positive, op
from ..symbol.symbol import Variable
from .attention import block, class_loss, first_token, norm, param, preset

#: size -> (layers, d_model, heads, d_ff, patch)
VIT_SIZES = {"base": (12, 768, 12, 3072, 16), "large": (24, 1024, 16, 4096, 16), "huge": (32, 1280, 16, 5120, 14)}
_EPS = 1e-6


def vit(batch: int = 32, size: str = "base", image: int = 224, layers: Optional[int] = None,
        d_model: Optional[int] = None, heads: Optional[int] = None, d_ff: Optional[int] = None,
        patch: Optional[int] = None, channels: int = 3, classes: int = 1000):
    """ViT-`size` (base and large with 16 x 16 patches, huge with 14 x 14) on images ``data``
    (batch, channels, image, image), label ``softmax_label`` (batch,); layers, d_model, heads,
    d_ff and patch override the size's values."""
    layers, d_model, heads, d_ff, patch = preset("vit", VIT_SIZES, size, layers, d_model, heads, d_ff, patch)
    check_positive("vit", batch=batch, image=image, layers=layers, d_model=d_model, heads=heads, d_ff=d_ff,
                   patch=patch, channels=channels, classes=classes)
    if image % patch:
        raise Error(f"vit: image={image} is not a multiple of patch={patch}")
    if d_model % heads:
        raise Error(f"vit: d_model={d_model} does not divide into heads={heads}")
    grid = image // patch
    seq = grid * grid + 1  # patches and the class token
    x = Variable("data", shape=(batch, channels, image, image), dims=("batch", "channels", "height", "width"))
    x = op("Convolution", x, param("patch_embed_weight", (d_model, channels, patch, patch),
                                   ("d_model", "channels", "patch_h", "patch_w")),
           param("patch_embed_bias", (d_model,), ("d_model",)), num_filter=d_model, kernel=(patch, patch),
           stride=(patch, patch), name="patch_embed")  # (batch, d_model, grid, grid)
    x = op("reshape", x, shape=(batch, d_model, grid * grid), name="patch_flat")
    x = op("transpose", x, axes=(0, 2, 1), name="patch_tokens")
    cls = op("broadcast_to", param("cls_token", (1, 1, d_model), ("one", "token", "d_model")),
             shape=(batch, 1, d_model), name="cls_tokens")
    x = op("Concat", cls, x, dim=1, name="tokens")
    x = op("broadcast_add", x, param("pos_embed_weight", (1, seq, d_model), ("one", "positions", "d_model")),
           name="pos_embed_add")
    for layer in range(layers):
        x = block(x, batch, seq, d_model, heads, d_model // heads, d_ff, f"layer{layer}", causal=False, eps=_EPS)
    x = norm(x, d_model, "ln_f", eps=_EPS)
    return class_loss(first_token(x, batch, d_model, "cls_out"), batch, classes, d_model, name="head")
