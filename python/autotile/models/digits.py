"""Models sized for scikit-learn's digits (8x8 grey images, 10 classes; ``autotile train``):
``mlp-digits`` on the 64 flattened pixels and ``cnn-digits`` on (1, 8, 8) images."""
from __future__ import annotations

from ._layers import check_positive, conv, data_input, op, softmax_head
from .mlp import mlp

#: classes and image side of the digits data set
DIGITS_CLASSES = 10
DIGITS_SIDE = 8


def mlp_digits(batch: int, hidden: int = 128):
    """Two hidden layers of `hidden` ReLU units on data (batch, 64); 10-way softmax."""
    return mlp(batch, layers=3, hidden=hidden, classes=DIGITS_CLASSES, input_dim=DIGITS_SIDE * DIGITS_SIDE)


def cnn_digits(batch: int, filters: int = 16):
    """A small CNN on data (batch, 1, 8, 8): conv1 `filters` 3x3 pad 1, ReLU; conv2 2*`filters`
    3x3 pad 1, ReLU; max-pool 2/2 (to 4x4); fc1 64, ReLU; fc2 10; SoftmaxOutput."""
    check_positive("cnn-digits", batch=batch, filters=filters)
    x = data_input((batch, 1, DIGITS_SIDE, DIGITS_SIDE))
    x = conv(x, "conv1", filters, (3, 3), pad=(1, 1))
    x = op("Activation", x, act_type="relu", name="relu1")
    x = conv(x, "conv2", 2 * filters, (3, 3), pad=(1, 1))
    x = op("Activation", x, act_type="relu", name="relu2")
    x = op("Pooling", x, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool1")
    x = op("Flatten", x, name="flatten")
    x = op("FullyConnected", x, num_hidden=64, name="fc1")
    x = op("Activation", x, act_type="relu", name="relu3")
    x = op("FullyConnected", x, num_hidden=DIGITS_CLASSES, name="fc2")
    return softmax_head(x, (batch,))
