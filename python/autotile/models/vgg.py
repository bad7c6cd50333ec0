"""VGG-11/13/16/19 (Simonyan & Zisserman configurations A, B, D, E), optionally with batch
normalisation after every convolution, named as MXNet's example symbol names them."""
from __future__ import annotations

from ..errors import Error
from ._layers import check_positive, conv, data_input, op, softmax_head

#: depth -> convolutions per stage (stages have 64, 128, 256, 512, 512 filters)
VGG_LAYERS = {11: (1, 1, 2, 2, 2), 13: (2, 2, 2, 2, 2), 16: (2, 2, 3, 3, 3), 19: (2, 2, 4, 4, 4)}
VGG_FILTERS = (64, 128, 256, 512, 512)


def vgg(depth: int, batch: int, batch_norm: bool = False, classes: int = 1000, image: int = 224,
        dropout: float = 0.5):
    """VGG-`depth` on data (batch, 3, image, image): 3x3 pad-1 convolutions ``conv{s}_{i}``
    (+ ``bn{s}_{i}``) + ReLU, 2x2/2 max-pool per stage, fc6/fc7 4096 with dropout, fc8
    `classes`, SoftmaxOutput."""
    if depth not in VGG_LAYERS:
        raise Error(f"vgg: depth must be one of {sorted(VGG_LAYERS)}, got {depth!r}")
    check_positive("vgg", batch=batch, classes=classes, image=image)
    x = data_input((batch, 3, image, image))
    for s, (n, filters) in enumerate(zip(VGG_LAYERS[depth], VGG_FILTERS), start=1):
        for i in range(1, n + 1):
            x = conv(x, f"conv{s}_{i}", filters, (3, 3), pad=(1, 1))
            if batch_norm:
                x = op("BatchNorm", x, name=f"bn{s}_{i}")
            x = op("Activation", x, act_type="relu", name=f"relu{s}_{i}")
        x = op("Pooling", x, kernel=(2, 2), stride=(2, 2), pool_type="max", name=f"pool{s}")
    x = op("Flatten", x, name="flatten")
    for i in (6, 7):
        x = op("FullyConnected", x, num_hidden=4096, name=f"fc{i}")
        x = op("Activation", x, act_type="relu", name=f"relu{i}")
        x = op("Dropout", x, p=dropout, name=f"drop{i}")
    x = op("FullyConnected", x, num_hidden=classes, name="fc8")
    return softmax_head(x, (batch,))
