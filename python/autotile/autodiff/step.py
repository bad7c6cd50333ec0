"""One single-device training step: forward, backward and optimizer update."""
from __future__ import annotations

import time
from typing import Dict, Optional, Sequence

import numpy as np

from ..errors import Error
from ..symbol.symbol import Symbol
from .graph import TrainingGraph, constant_names, default_param_names, training_graph


def _trainable(sym: Symbol, param_names: Optional[Sequence[str]]):
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


def training_step(sym: Symbol, values: Dict[str, np.ndarray], param_names: Optional[Sequence[str]] = None,
                  optimizer: str = "sgd", optimizer_args: Optional[dict] = None,
                  rng: Optional[np.random.Generator] = None, seed: int = 0):
    """Run one training step of `sym` on one device with the reference executor.

    values: every input by name (data, labels, parameters, auxiliary states); optimizer states
    (``{param}_mom``, ``{param}_mean``, ``{param}_var``) start at zeros unless given, and head
    gradients of non-loss outputs (``{output}_head_grad``) at ones. Returns a
    :class:`autotile.backend.run.Result`: forward outputs, ``grads`` and updated ``params`` by
    parameter name, updated auxiliary states in ``aux``, the new optimizer states by state
    name in ``states`` (to feed the next step; also ``stats['optimizer_states']``); ``stats``
    holds timings and node counts."""
    from ..backend.reference import execute
    from ..backend.result import Result

    t0 = time.perf_counter()
    params = _trainable(sym, param_names)
    shapes = {k: tuple(np.shape(v)) for k, v in values.items() if k in set(sym.list_inputs())}
    tg = training_graph(sym, optimizer=optimizer, optimizer_args=optimizer_args, params=params, shapes=shapes)
    t1 = time.perf_counter()
    feed = feed_values(tg, values)
    outs, new_aux, _ = execute(tg.symbol, feed, is_train=True, rng=rng if rng is not None else np.random.default_rng(0),
                                 seed=seed)
    t2 = time.perf_counter()
    n_fwd, n_p = len(tg.output_names), len(tg.param_names)
    grads = dict(zip(tg.param_names, outs[n_fwd:n_fwd + n_p]))
    updated = dict(zip(tg.param_names, outs[n_fwd + n_p:n_fwd + 2 * n_p]))
    states = dict(zip(tg.state_names, outs[n_fwd + 2 * n_p:]))
    stats = {
        "graph_seconds": t1 - t0,
        "step_seconds": t2 - t1,
        "forward_nodes": len(tg.forward_nodes),
        "training_nodes": sum(1 for n in tg.symbol.topo_nodes() if not n.is_variable),
        "optimizer": tg.optimizer,
        "optimizer_states": states,
    }
    return Result(outputs=outs[:n_fwd], grads=grads, params=updated, aux=new_aux, stats=stats, states=states)
