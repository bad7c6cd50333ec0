"""Every ONNX converter family, loaded: :data:`CONVERTERS` here is the full registry (ONNX op
type -> converter). Importing a family module registers its converters in
:mod:`~autotile.frontend.onnx_registry`, which the families depend on and which depends on none
of them."""
from __future__ import annotations

from . import (onnx_ops, onnx_ops_index, onnx_ops_loop, onnx_ops_math, onnx_ops_nn,  # noqa: F401  (they register)
               onnx_ops_moe, onnx_ops_resample, onnx_ops_rnn, onnx_ops_slice)
from .onnx_registry import CONVERTERS

__all__ = ["CONVERTERS"]
