"""Optimizers as update ops: which registered op updates a parameter, its state inputs and
its default arguments.

Every update op takes ``(weight, grad, *states)`` and outputs ``[new_weight, *new_states]``
with only the new weight visible (MXNet's ``sgd_update``, ``sgd_mom_update``, ``adam_update``
update their states in place; here the new states are explicit hidden outputs).

Defaults: ``sgd`` lr=0.1; ``momentum`` lr=0.1, momentum=0.9; ``adam`` the Adam paper's
lr=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8 (like MXNet's ``adam_update``, no bias
correction: the op applies the learning rate it is given).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from ..errors import Error
from ..ops import registry
from ..symbol.symbol import Node

#: optimizer name -> (update op, state suffixes, default arguments)
OPTIMIZERS: Dict[str, Tuple[str, Tuple[str, ...], Dict[str, float]]] = {
    "sgd": ("sgd_update", (), {"lr": 0.1}),
    "momentum": ("sgd_mom_update", ("mom",), {"lr": 0.1, "momentum": 0.9}),
    "adam": ("adam_update", ("mean", "var"), {"lr": 0.001, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}),
}

_ALIASES = {"learning_rate": "lr"}


@dataclass
class OptimizerSpec:
    """A resolved optimizer: update op, state name suffixes, arguments for the op."""

    name: str
    op: str
    states: Tuple[str, ...]
    args: Dict[str, object]

    def attrs_for(self, param: Node) -> Dict[str, object]:
        """The update op's attributes for one parameter: lr and wd scaled by the variable's
        ``__lr_mult__`` / ``__wd_mult__`` (MXNet's per-parameter multipliers)."""
        attrs = dict(self.args)
        for key, mult_attr in (("lr", "__lr_mult__"), ("wd", "__wd_mult__")):
            if mult_attr in param.attrs and key in attrs:
                try:
                    attrs[key] = float(attrs[key]) * float(param.attrs[mult_attr])
                except ValueError:
                    raise Error(f"variable '{param.name}': {mult_attr}={param.attrs[mult_attr]!r} is not a number") from None
        return attrs


def optimizer_spec(name: str, args: Optional[dict] = None) -> OptimizerSpec:
    """Resolve an optimizer name and user arguments; Error on unknown names or arguments."""
    if name not in OPTIMIZERS:
        raise Error(f"unknown optimizer '{name}' (known: {', '.join(OPTIMIZERS)})")
    op_name, states, defaults = OPTIMIZERS[name]
    merged = dict(defaults)
    for key, value in (args or {}).items():
        merged[_ALIASES.get(key, key)] = value
    if not registry.exists(op_name):
        raise Error(f"optimizer '{name}' needs the update op '{op_name}', which is not registered")
    op = registry.get(op_name)
    unknown = sorted(k for k in merged if k not in op.params)
    if unknown:
        raise Error(f"optimizer '{name}' ({op_name}): unknown arguments {unknown} (known: {', '.join(sorted(op.params))})")
    return OptimizerSpec(name=name, op=op_name, states=states, args=merged)
