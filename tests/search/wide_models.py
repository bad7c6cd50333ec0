"""Graphs too wide for the exact one-cut DP, built with the Symbol API as torchvision builds
them: DenseNet-121/169 (every dense layer concatenates *all* earlier feature maps of its
block, ``torch.cat(features, 1)``, so each map feeds every later layer and its gradient is a
sum of many parts) and Inception-v3 (four to six parallel branches per module, concatenated)."""
from __future__ import annotations

import autotile as at

DENSENET_BLOCKS = {121: (6, 12, 24, 16), 169: (6, 12, 32, 32)}


def _bn_relu(x, name):
    return at.sym.Activation(at.sym.BatchNorm(x, fix_gamma=False, eps=1e-5, name=f"{name}_bn"), act_type="relu",
                             name=f"{name}_relu")


def _conv(x, name, filters, kernel, stride=1, pad=0):
    kernel = kernel if isinstance(kernel, tuple) else (kernel, kernel)
    pad = pad if isinstance(pad, tuple) else (pad, pad)
    return at.sym.Convolution(x, num_filter=filters, kernel=kernel, stride=(stride, stride), pad=pad, no_bias=True,
                              name=name)


def _head(x, batch, classes, name):
    x = at.sym.Pooling(x, kernel=(1, 1), global_pool=True, pool_type="avg", name=f"{name}_pool")
    x = at.sym.FullyConnected(at.sym.Flatten(x, name=f"{name}_flat"), num_hidden=classes, name=f"{name}_fc")
    return at.sym.SoftmaxOutput(x, at.sym.Variable("softmax_label", shape=(batch,)), name="softmax")


def densenet(depth: int, batch: int, image: int = 224, classes: int = 1000, growth: int = 32, bn_size: int = 4,
             init: int = 64):
    """torchvision's densenet121 / densenet169 (no dropout), NCHW input (batch, 3, image, image)."""
    x = at.sym.Variable("data", shape=(batch, 3, image, image))
    x = _bn_relu(_conv(x, "conv0", init, 7, 2, 3), "norm0")
    x = at.sym.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max", name="pool0")
    channels = init
    for b, layers in enumerate(DENSENET_BLOCKS[depth], start=1):
        features = [x]
        for i in range(1, layers + 1):
            name = f"denseblock{b}_layer{i}"
            h = features[0] if len(features) == 1 else at.sym.Concat(*features, dim=1, name=f"{name}_cat")
            h = _conv(_bn_relu(h, f"{name}_norm1"), f"{name}_conv1", bn_size * growth, 1)
            h = _conv(_bn_relu(h, f"{name}_norm2"), f"{name}_conv2", growth, 3, 1, 1)
            features.append(h)
        x = at.sym.Concat(*features, dim=1, name=f"denseblock{b}_cat")
        channels += layers * growth
        if b < len(DENSENET_BLOCKS[depth]):
            channels //= 2
            x = _conv(_bn_relu(x, f"transition{b}_norm"), f"transition{b}_conv", channels, 1)
            x = at.sym.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="avg", name=f"transition{b}_pool")
    return _head(_bn_relu(x, "norm5"), batch, classes, "classifier")


def _basic(x, name, filters, kernel, stride=1, pad=0):
    """torchvision's BasicConv2d: conv (no bias), BatchNorm (eps 1e-3), ReLU."""
    x = _conv(x, f"{name}_conv", filters, kernel, stride, pad)
    return at.sym.Activation(at.sym.BatchNorm(x, fix_gamma=False, eps=1e-3, name=f"{name}_bn"), act_type="relu",
                             name=f"{name}_relu")


def _pool(x, name, kind, stride=1, pad=0):
    return at.sym.Pooling(x, kernel=(3, 3), stride=(stride, stride), pad=(pad, pad), pool_type=kind, name=name)


def _inception_a(x, name, pool_features):
    b1 = _basic(x, f"{name}_b1x1", 64, 1)
    b5 = _basic(_basic(x, f"{name}_b5x5_1", 48, 1), f"{name}_b5x5_2", 64, 5, pad=2)
    b3 = _basic(_basic(_basic(x, f"{name}_b3x3dbl_1", 64, 1), f"{name}_b3x3dbl_2", 96, 3, pad=1),
                f"{name}_b3x3dbl_3", 96, 3, pad=1)
    bp = _basic(_pool(x, f"{name}_pool", "avg", pad=1), f"{name}_bpool", pool_features, 1)
    return at.sym.Concat(b1, b5, b3, bp, dim=1, name=f"{name}_cat")


def _inception_b(x, name):
    b3 = _basic(x, f"{name}_b3x3", 384, 3, 2)
    bd = _basic(_basic(_basic(x, f"{name}_dbl_1", 64, 1), f"{name}_dbl_2", 96, 3, pad=1), f"{name}_dbl_3", 96, 3, 2)
    return at.sym.Concat(b3, bd, _pool(x, f"{name}_pool", "max", 2), dim=1, name=f"{name}_cat")


def _inception_c(x, name, c7):
    b1 = _basic(x, f"{name}_b1x1", 192, 1)
    b7 = _basic(x, f"{name}_b7_1", c7, 1)
    b7 = _basic(_basic(b7, f"{name}_b7_2", c7, (1, 7), pad=(0, 3)), f"{name}_b7_3", 192, (7, 1), pad=(3, 0))
    bd = _basic(x, f"{name}_b7dbl_1", c7, 1)
    for i, (k, p, f) in enumerate([((7, 1), (3, 0), c7), ((1, 7), (0, 3), c7), ((7, 1), (3, 0), c7),
                                   ((1, 7), (0, 3), 192)], start=2):
        bd = _basic(bd, f"{name}_b7dbl_{i}", f, k, pad=p)
    bp = _basic(_pool(x, f"{name}_pool", "avg", pad=1), f"{name}_bpool", 192, 1)
    return at.sym.Concat(b1, b7, bd, bp, dim=1, name=f"{name}_cat")


def _inception_d(x, name):
    b3 = _basic(_basic(x, f"{name}_b3_1", 192, 1), f"{name}_b3_2", 320, 3, 2)
    b7 = _basic(x, f"{name}_b7_1", 192, 1)
    for i, (k, p) in enumerate([((1, 7), (0, 3)), ((7, 1), (3, 0))], start=2):
        b7 = _basic(b7, f"{name}_b7_{i}", 192, k, pad=p)
    b7 = _basic(b7, f"{name}_b7_4", 192, 3, 2)
    return at.sym.Concat(b3, b7, _pool(x, f"{name}_pool", "max", 2), dim=1, name=f"{name}_cat")


def _inception_e(x, name):
    b1 = _basic(x, f"{name}_b1x1", 320, 1)
    b3 = _basic(x, f"{name}_b3_1", 384, 1)
    b3 = at.sym.Concat(_basic(b3, f"{name}_b3_2a", 384, (1, 3), pad=(0, 1)),
                       _basic(b3, f"{name}_b3_2b", 384, (3, 1), pad=(1, 0)), dim=1, name=f"{name}_b3_cat")
    bd = _basic(_basic(x, f"{name}_dbl_1", 448, 1), f"{name}_dbl_2", 384, 3, pad=1)
    bd = at.sym.Concat(_basic(bd, f"{name}_dbl_3a", 384, (1, 3), pad=(0, 1)),
                       _basic(bd, f"{name}_dbl_3b", 384, (3, 1), pad=(1, 0)), dim=1, name=f"{name}_dbl_cat")
    bp = _basic(_pool(x, f"{name}_pool", "avg", pad=1), f"{name}_bpool", 192, 1)
    return at.sym.Concat(b1, b3, bd, bp, dim=1, name=f"{name}_cat")


def inception_v3(batch: int, image: int = 299, classes: int = 1000):
    """torchvision's inception_v3 without the auxiliary classifier, input (batch, 3, 299, 299)."""
    x = at.sym.Variable("data", shape=(batch, 3, image, image))
    x = _basic(x, "Conv2d_1a_3x3", 32, 3, 2)
    x = _basic(x, "Conv2d_2a_3x3", 32, 3)
    x = _basic(x, "Conv2d_2b_3x3", 64, 3, pad=1)
    x = _pool(x, "maxpool1", "max", 2)
    x = _basic(x, "Conv2d_3b_1x1", 80, 1)
    x = _basic(x, "Conv2d_4a_3x3", 192, 3)
    x = _pool(x, "maxpool2", "max", 2)
    x = _inception_a(x, "Mixed_5b", 32)
    x = _inception_a(x, "Mixed_5c", 64)
    x = _inception_a(x, "Mixed_5d", 64)
    x = _inception_b(x, "Mixed_6a")
    for name, c7 in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160), ("Mixed_6e", 192)):
        x = _inception_c(x, name, c7)
    x = _inception_d(x, "Mixed_7a")
    x = _inception_e(x, "Mixed_7b")
    x = _inception_e(x, "Mixed_7c")
    return _head(x, batch, classes, "inception")
