"""``autotile.models``: the model zoo (MLP, AlexNet, VGG, wide ResNet, LSTM RNN, and the
Transformers: Mesh-TF's decoder LM, GPT-2, BERT, LLaMA, ViT) as Symbols.

    sym = at.models.get("wresnet-152-10", batch=8)   # or at.models.wresnet(152, 10, 8)
    sym.infer_shape()                                # data/label shapes are set
"""
from .alexnet import alexnet
from .bert import bert
from .gpt2 import gpt2
from .llama import llama
from .mlp import mlp
from .rnn import lstm_cell, rnn
from .transformer import transformer
from .vgg import vgg
from .vit import vit
from .wresnet import bottleneck, wresnet
from .zoo import DEFAULT_BATCH, get, known_names

__all__ = ["DEFAULT_BATCH", "alexnet", "bert", "bottleneck", "get", "gpt2", "known_names", "llama", "lstm_cell",
           "mlp", "rnn", "transformer", "vgg", "vit", "wresnet"]
