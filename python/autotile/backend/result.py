"""What one step of a model returns, on any device count and runtime."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List

import numpy as np


@dataclass
class Result:
    """What a step returns: outputs in list_outputs() order; for training, gradients and
    updated params by parameter name and the new optimizer states by state name
    (``{param}_mom``, ``{param}_mean``/``{param}_var``: pass them as ``states=`` to the next
    step); the auxiliary states after the step (BatchNorm moving mean/var, by name); the plan
    used (multi-device only) and stats (time per phase...)."""

    outputs: List[np.ndarray]
    grads: Dict[str, np.ndarray] = field(default_factory=dict)
    params: Dict[str, np.ndarray] = field(default_factory=dict)
    aux: Dict[str, np.ndarray] = field(default_factory=dict)
    plan: object = None
    stats: dict = field(default_factory=dict)
    states: Dict[str, np.ndarray] = field(default_factory=dict)
