"""Element-wise sine and cosine (ONNX Sin / Cos: the sinusoidal timestep embeddings of
diffusion UNets and transformers' position encodings), and the `_backward_<op>` ops their
gradients use: d sin(x) = cos(x) dy, d cos(x) = -sin(x) dy, from dy and the forward input."""
from __future__ import annotations

import numpy as np

from .activation_ext import register_unary

# name -> (params, f(x, attrs), f'(x, attrs), doc), as activation_ext registers them
register_unary({
    "sin": ({}, lambda x, a: np.sin(x), lambda x, a: np.cos(x), "Element-wise sine of the input (radians)."),
    "cos": ({}, lambda x, a: np.cos(x), lambda x, a: -np.sin(x), "Element-wise cosine of the input (radians)."),
})
