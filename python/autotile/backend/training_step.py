"""One single-device training step: forward, backward and optimizer update of the training
graph (:mod:`autotile.autodiff`) on the reference executor."""
from __future__ import annotations

import time
from typing import Dict, Optional, Sequence

import numpy as np

from ..autodiff import feed_values, trainable_params, training_graph
from ..symbol.symbol import Symbol
from .reference import execute
from .result import Result


def training_step(sym: Symbol, values: Dict[str, np.ndarray], param_names: Optional[Sequence[str]] = None,
                  optimizer: str = "sgd", optimizer_args: Optional[dict] = None,
                  rng: Optional[np.random.Generator] = None, seed: int = 0):
    """Run one training step of `sym` on one device with the reference executor.

    values: every input by name (data, labels, parameters, auxiliary states); optimizer states
    (``{param}_mom``, ``{param}_mean``, ``{param}_var``) start at zeros unless given, and head
    gradients of non-loss outputs (``{output}_head_grad``) at ones. Returns a
    :class:`autotile.backend.Result`: forward outputs, ``grads`` and updated ``params`` by
    parameter name, updated auxiliary states in ``aux``, the new optimizer states by state
    name in ``states`` (to feed the next step; also ``stats['optimizer_states']``); ``stats``
    holds timings and node counts."""
    t0 = time.perf_counter()
    params = trainable_params(sym, param_names)
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
