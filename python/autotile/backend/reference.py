"""Single-device reference executor: runs a Symbol's nodes in topological order with the
registered NumPy kernels. Every multi-device result is checked against this."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from ..errors import Error
from ..ops.registry import KernelContext, node_key
from ..symbol.symbol import Symbol
from . import lowp


def execute(sym: Symbol, values: Dict[str, np.ndarray], is_train: bool = False,
            rng: Optional[np.random.Generator] = None, keep: bool = False, seed: int = 0
            ) -> Tuple[List[np.ndarray], Dict[str, np.ndarray], Dict[Tuple[int, int], np.ndarray]]:
    """Run `sym` on `values` (every variable by name: data, params, auxiliary states).

    Returns (outputs, updated auxiliary states by name, all entry values if `keep`)."""
    rng = rng if rng is not None else np.random.default_rng(0)
    env: Dict[Tuple[int, int], np.ndarray] = {}
    new_aux: Dict[str, np.ndarray] = {}
    for node in sym.topo_nodes():
        if node.is_variable:
            if node.name not in values:
                raise Error(f"missing input '{node.name}': pass it in inputs or params")
            env[(id(node), 0)] = values[node.name]
            continue
        op = node.opdef()
        attrs = node.parsed_attrs()
        n_args = len(op.arguments(attrs))
        inputs = [env[(id(src), i)] for src, i in node.inputs]
        ctx = KernelContext(is_train=is_train, aux=list(inputs[n_args:]), rng=rng, key=node_key(node.name, seed))
        if op.forward is None:
            raise Error(f"node '{node.name}' (op {node.op}) has no kernel")
        try:
            outs = lowp.forward(op, node.name, attrs, inputs, ctx)  # bfloat16 inputs: upcast, round
        except Error:
            raise
        except Exception as e:  # a kernel failure names the node
            shapes = ", ".join(str(tuple(np.shape(x))) for x in inputs)
            raise Error(f"node '{node.name}' (op {node.op}) failed on input shapes [{shapes}]: "
                        f"{type(e).__name__}: {e}") from e
        for i, out in enumerate(outs):
            env[(id(node), i)] = out
        for (src, _), value in zip(node.inputs[n_args:], ctx.aux):
            new_aux[src.name] = value
    outputs = [env[(id(n), i)] for n, i in sym.entries]
    return outputs, new_aux, (env if keep else {})
