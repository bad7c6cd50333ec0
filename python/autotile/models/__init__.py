"""``autotile.models``: the model zoo (MLP, AlexNet, VGG, wide ResNet, LSTM RNN) as Symbols.

    sym = at.models.get("wresnet-152-10", batch=8)   # or at.models.wresnet(152, 10, 8)
    sym.infer_shape()                                # data/label shapes are set
"""
from .alexnet import alexnet
from .mlp import mlp
from .rnn import lstm_cell, rnn
from .vgg import vgg
from .wresnet import bottleneck, wresnet
from .zoo import DEFAULT_BATCH, get, known_names

__all__ = ["DEFAULT_BATCH", "alexnet", "bottleneck", "get", "known_names", "lstm_cell", "mlp", "rnn", "vgg",
           "wresnet"]
