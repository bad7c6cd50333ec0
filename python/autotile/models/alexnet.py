"""AlexNet as MXNet's example symbol defines it (Krizhevsky's "one weird trick" single-tower
network with the original 96/256/384/384/256 filters, LRN after conv1 and conv2)."""
from __future__ import annotations

from ._layers import check_positive, conv, data_input, op, softmax_head


def alexnet(batch: int, classes: int = 1000, image: int = 224, dropout: float = 0.5):
    """AlexNet on data (batch, 3, image, image): conv1 96x11x11/4, LRN, max-pool 3/2;
    conv2 256x5x5 pad 2, LRN, pool; conv3 384, conv4 384, conv5 256 (3x3 pad 1), pool;
    fc6 4096, dropout; fc7 4096, dropout; fc8 `classes`; SoftmaxOutput."""
    check_positive("alexnet", batch=batch, classes=classes, image=image)
    x = data_input((batch, 3, image, image))
    lrn = dict(alpha=0.0001, beta=0.75, knorm=2.0, nsize=5)
    x = conv(x, "conv1", 96, (11, 11), stride=(4, 4))
    x = op("Activation", x, act_type="relu", name="relu1")
    x = op("LRN", x, name="norm1", **lrn)
    x = op("Pooling", x, kernel=(3, 3), stride=(2, 2), pool_type="max", name="pool1")
    x = conv(x, "conv2", 256, (5, 5), pad=(2, 2))
    x = op("Activation", x, act_type="relu", name="relu2")
    x = op("LRN", x, name="norm2", **lrn)
    x = op("Pooling", x, kernel=(3, 3), stride=(2, 2), pool_type="max", name="pool2")
    for i, filters in ((3, 384), (4, 384), (5, 256)):
        x = conv(x, f"conv{i}", filters, (3, 3), pad=(1, 1))
        x = op("Activation", x, act_type="relu", name=f"relu{i}")
    x = op("Pooling", x, kernel=(3, 3), stride=(2, 2), pool_type="max", name="pool3")
    x = op("Flatten", x, name="flatten")
    for i in (6, 7):
        x = op("FullyConnected", x, num_hidden=4096, name=f"fc{i}")
        x = op("Activation", x, act_type="relu", name=f"relu{i}")
        x = op("Dropout", x, p=dropout, name=f"drop{i}")
    x = op("FullyConnected", x, num_hidden=classes, name="fc8")
    return softmax_head(x, (batch,))
