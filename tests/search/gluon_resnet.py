"""ResNet-18 v1 as MXNet Gluon's model zoo builds and exports it (``resnet18_v1``: the node
and parameter names start with ``resnetv10_``), built with the Symbol API: a 7x7/2 stem
convolution, BatchNorm, ReLU and 3x3/2 max-pool, four stages of two basic blocks
(3x3 conv-BN-ReLU-3x3 conv-BN plus the input, or its 1x1/2 conv-BN projection in the first
block of stages 2-4, then ReLU), global average pooling and a 1000-way dense layer."""
from __future__ import annotations

import autotile as at

P = "resnetv10_"


def _bn(x, name):
    return at.sym.BatchNorm(x, fix_gamma=False, eps=1e-5, momentum=0.9, name=name)


def _conv(x, name, filters, kernel, stride, pad):
    return at.sym.Convolution(x, num_filter=filters, kernel=(kernel, kernel), stride=(stride, stride),
                              pad=(pad, pad), no_bias=True, name=name)


def _block(x, stage, index, filters, stride, downsample, first):
    """Basic block `index` of a stage; its convolutions and BatchNorms are numbered from `first`."""
    s = f"{P}stage{stage}_"
    c = b = first
    h = _conv(x, f"{s}conv{c}", filters, 3, stride, 1)
    h = at.sym.Activation(_bn(h, f"{s}batchnorm{b}"), act_type="relu", name=f"{s}relu{index}")
    h = _bn(_conv(h, f"{s}conv{c + 1}", filters, 3, 1, 1), f"{s}batchnorm{b + 1}")
    if downsample:
        x = _bn(_conv(x, f"{s}conv{c + 2}", filters, 1, stride, 0), f"{s}batchnorm{b + 2}")
    return at.sym.Activation(h + x, act_type="relu", name=f"{s}activation{index}")


def resnet18_v1(batch: int, classes: int = 1000, image: int = 224):
    x = at.sym.Variable("data", shape=(batch, 3, image, image))
    h = _bn(_conv(x, f"{P}conv0", 64, 7, 2, 3), f"{P}batchnorm0")
    h = at.sym.Activation(h, act_type="relu", name=f"{P}relu0")
    h = at.sym.Pooling(h, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max", name=f"{P}pool0")
    for stage, filters in enumerate((64, 128, 256, 512), start=1):
        h = _block(h, stage, 0, filters, 1 if stage == 1 else 2, stage > 1, 0)
        h = _block(h, stage, 1, filters, 1, False, 2 if stage == 1 else 3)
    h = at.sym.Pooling(h, kernel=(7, 7), global_pool=True, pool_type="avg", name=f"{P}pool1")
    h = at.sym.FullyConnected(at.sym.Flatten(h, name=f"{P}flatten0"), num_hidden=classes, name=f"{P}dense0")
    label = at.sym.Variable("softmax_label", shape=(batch,))
    return at.sym.SoftmaxOutput(h, label, name="softmax")
