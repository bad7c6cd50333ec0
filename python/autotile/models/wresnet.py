"""Wide ResNet (Tofu Sec 7): the ImageNet ResNet-50/101/152 of MXNet's example symbol
(pre-activation bottleneck units, He et al. 2016) with every channel count multiplied by
`width` (WResNet-152-10 = 152 layers, 10x wider)."""
from __future__ import annotations

from ..errors import Error
from ._layers import check_positive, conv, data_input, op, softmax_head

#: depth -> bottleneck units per stage
RESNET_UNITS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}
#: channels of the stem and of each stage's output at width 1
RESNET_FILTERS = (64, 256, 512, 1024, 2048)

_BN = dict(eps=2e-5, momentum=0.9)


def bottleneck(data, num_filter: int, stride: int, dim_match: bool, name: str):
    """Pre-activation bottleneck unit: BN-ReLU-conv1x1(num_filter/4) - BN-ReLU-conv3x3/stride -
    BN-ReLU-conv1x1(num_filter), plus the shortcut (the input itself when `dim_match`, else a
    strided 1x1 projection of the first activation). The input is used twice when
    `dim_match` (and the first activation otherwise): its gradient is a sum."""
    inner = num_filter // 4
    bn1 = op("BatchNorm", data, fix_gamma=False, name=f"{name}_bn1", **_BN)
    act1 = op("Activation", bn1, act_type="relu", name=f"{name}_relu1")
    conv1 = conv(act1, f"{name}_conv1", inner, (1, 1), no_bias=True)
    bn2 = op("BatchNorm", conv1, fix_gamma=False, name=f"{name}_bn2", **_BN)
    act2 = op("Activation", bn2, act_type="relu", name=f"{name}_relu2")
    conv2 = conv(act2, f"{name}_conv2", inner, (3, 3), stride=(stride, stride), pad=(1, 1), no_bias=True)
    bn3 = op("BatchNorm", conv2, fix_gamma=False, name=f"{name}_bn3", **_BN)
    act3 = op("Activation", bn3, act_type="relu", name=f"{name}_relu3")
    conv3 = conv(act3, f"{name}_conv3", num_filter, (1, 1), no_bias=True)
    shortcut = data if dim_match else conv(act1, f"{name}_sc", num_filter, (1, 1), stride=(stride, stride),
                                           no_bias=True)
    return op("elemwise_add", conv3, shortcut, name=f"{name}_plus")


def resnet_units(depth: int):
    """Bottleneck units per stage for `depth` layers: the zoo's for 50/101/152; other depths
    (3 * units + 2, at least 77) grow stage 3 with stages 1, 2 and 4 as in ResNet-152."""
    if depth in RESNET_UNITS:
        return RESNET_UNITS[depth]
    units = (depth - 2) // 3
    if depth < 77 or (depth - 2) % 3:
        raise Error(f"wresnet: depth must be 50, 101, 152 or 3*k + 2 >= 77, got {depth!r}")
    return (3, 8, units - 14, 3)


def wresnet(depth: int, width: int, batch: int, classes: int = 1000, image: int = 224, units=None):
    """WResNet-`depth`-`width` on data (batch, 3, image, image); depth 50, 101 or 152 (other
    depths: see resnet_units; `units` gives the bottleneck units per stage explicitly).
    ``wresnet(50, 1, b)`` is the standard ResNet-50 (v2)."""
    if units is None and depth not in RESNET_UNITS:
        raise Error(f"wresnet: depth must be one of {sorted(RESNET_UNITS)}, got {depth!r}")
    units = tuple(units) if units is not None else RESNET_UNITS[depth]
    check_positive("wresnet", width=width, batch=batch, classes=classes, image=image)
    filters = [f * width for f in RESNET_FILTERS]
    x = data_input((batch, 3, image, image))
    x = op("BatchNorm", x, fix_gamma=True, name="bn_data", **_BN)
    x = conv(x, "conv0", filters[0], (7, 7), stride=(2, 2), pad=(3, 3), no_bias=True)
    x = op("BatchNorm", x, fix_gamma=False, name="bn0", **_BN)
    x = op("Activation", x, act_type="relu", name="relu0")
    x = op("Pooling", x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max", name="pool0")
    for stage, n in enumerate(units):
        stride = 1 if stage == 0 else 2
        x = bottleneck(x, filters[stage + 1], stride, False, f"stage{stage + 1}_unit1")
        for unit in range(2, n + 1):
            x = bottleneck(x, filters[stage + 1], 1, True, f"stage{stage + 1}_unit{unit}")
    x = op("BatchNorm", x, fix_gamma=False, name="bn1", **_BN)
    x = op("Activation", x, act_type="relu", name="relu1")
    x = op("Pooling", x, kernel=(7, 7), global_pool=True, pool_type="avg", name="pool1")
    x = op("Flatten", x, name="flatten")
    x = op("FullyConnected", x, num_hidden=classes, name="fc1")
    return softmax_head(x, (batch,))
