"""What a training step trains and is fed: the trainable parameters and every input of the
training graph (optimizer states and head gradients filled in). Running the step is the
backend's (:func:`autotile.backend.training_step`)."""
from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np

from ..errors import Error
from ..symbol.symbol import Symbol
from .graph import TrainingGraph, constant_names, default_param_names


def trainable_params(sym: Symbol, param_names: Optional[Sequence[str]]):
    """The parameters to train: `param_names` that are arguments of `sym` (a params dict may
    also hold auxiliary states, constants or unrelated names), else the default rule (not
    data, label or constant)."""
    arguments = set(sym.list_arguments()) - set(constant_names(sym))
    chosen = [p for p in (param_names or ()) if p in arguments]
    if chosen:
        return chosen
    return default_param_names(sym)


def feed_values(tg: TrainingGraph, values: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Every input of the training graph: `values` (data, labels, params, aux, and optionally
    optimizer states / head gradients), optimizer states zero and head gradients one unless given."""
    feed = dict(values)
    for s in tg.state_names:
        if s not in feed:
            p = tg.state_of[s]
            if p not in values:
                raise Error(f"missing value of parameter '{p}'")
            feed[s] = np.zeros_like(np.asarray(values[p]))
    if tg.head_grad_names:
        from ..symbol.infer import infer_entry_shapes, infer_entry_types

        inputs = set(tg.forward.list_inputs())
        given = {k: v for k, v in values.items() if k in inputs}
        entry_shape = infer_entry_shapes(tg.forward, {k: np.shape(v) for k, v in given.items()})
        entry_type = infer_entry_types(tg.forward, {k: np.asarray(v).dtype for k, v in given.items()})
        by_name = {}
        for node, i in tg.forward.entries:
            by_name[node.output_names()[i]] = (id(node), i)
        for h in tg.head_grad_names:
            if h not in feed:
                key = by_name[tg.head_grad_of[h]]
                feed[h] = np.ones(entry_shape[key], dtype=entry_type[key])
    needed = set(tg.symbol.list_inputs())
    return {k: v for k, v in feed.items() if k in needed}
