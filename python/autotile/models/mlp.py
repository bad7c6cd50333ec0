"""Multi-layer perceptron: ``layers`` FullyConnected layers with ReLU in between and a
softmax loss, as in Soybean (Sec 2.2: 5 layers x 300 units, batch 400; Fig 8: 4 layers
with 8192 x 8192 weights)."""
from __future__ import annotations

from typing import Optional

from ._layers import check_positive, data_input, op, softmax_head


def mlp(batch: int, layers: int = 4, hidden: int = 8192, classes: Optional[int] = None,
        input_dim: Optional[int] = None, no_bias: bool = False, act_type: str = "relu"):
    """An MLP on data (batch, input_dim): layers ``fc1..fcL``; every layer but the last has
    `hidden` units and is followed by an activation ``act{l}``; the last has `classes` units
    and feeds ``SoftmaxOutput`` (label ``softmax_label`` of shape (batch,)).

    input_dim and classes default to `hidden`, so every weight is hidden x hidden (Soybean's
    examples)."""
    input_dim = hidden if input_dim is None else input_dim
    classes = hidden if classes is None else classes
    check_positive("mlp", batch=batch, layers=layers, hidden=hidden, classes=classes, input_dim=input_dim)
    x = data_input((batch, input_dim))
    for layer in range(1, layers + 1):
        units = classes if layer == layers else hidden
        x = op("FullyConnected", x, num_hidden=units, no_bias=no_bias, name=f"fc{layer}")
        if layer < layers:
            x = op("Activation", x, act_type=act_type, name=f"act{layer}")
    return softmax_head(x, (batch,))
