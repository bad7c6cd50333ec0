"""Small helpers shared by the zoo builders: inputs with their shapes, a typical conv layer."""
from __future__ import annotations

from typing import Optional, Sequence

from ..errors import Error
from ..symbol.ops_api import create
from ..symbol.symbol import Symbol, Variable


def op(op_name: str, *args, **kwargs) -> Symbol:
    """Apply a registered op (``autotile.sym.<op_name>``)."""
    return create(op_name, *args, **kwargs)


def data_input(shape: Sequence[int], name: str = "data") -> Symbol:
    """A data input whose ``__shape__`` is set, so ``sym.infer_shape()`` needs no arguments."""
    return Variable(name, shape=tuple(int(d) for d in shape))


def check_positive(model: str, **values) -> None:
    """Error naming the first argument of `model` that is not a positive integer."""
    for key, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise Error(f"{model}: {key} must be a positive integer, got {value!r}")


def softmax_head(logits: Symbol, label_shape: Sequence[int], name: str = "softmax") -> Symbol:
    """SoftmaxOutput with an explicit, shaped label input ``{name}_label``."""
    label = data_input(label_shape, f"{name}_label")
    return op("SoftmaxOutput", logits, label, name=name)


def conv(data: Symbol, name: str, num_filter: int, kernel, stride=(1, 1), pad=(0, 0),
         no_bias: bool = False, attr: Optional[dict] = None) -> Symbol:
    return op("Convolution", data, num_filter=num_filter, kernel=tuple(kernel), stride=tuple(stride),
              pad=tuple(pad), no_bias=no_bias, name=name, attr=attr)
