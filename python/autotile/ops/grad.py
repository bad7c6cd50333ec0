"""GradContext: what an op's gradient function receives.

An op's ``gradient(ctx)`` returns one entry per node input: a Symbol (the gradient of that
input) or None (no gradient: labels, integer indices, auxiliary states). It builds the
backward pass from registered ops with ``ctx.op(...)``, so backward nodes are ordinary graph
nodes with kernels and TDL descriptions, and autodiff records which backward nodes belong to
which forward node (coarsening groups them, Tofu Sec 5.1).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List

from ..symbol.symbol import Symbol


@dataclass
class GradContext:
    name: str  # forward node name
    attrs: Dict[str, Any]  # parsed attributes of the forward node
    raw_attrs: Dict[str, str]
    inputs: List[Symbol]  # one single-output Symbol per node input (arguments then aux)
    outputs: List[Symbol]  # one Symbol per node output (all outputs, hidden ones included)
    out_grads: List[Symbol]  # gradient of each output (zeros where unused)
    in_shapes: List[tuple] = field(default_factory=list)  # shapes of the node's inputs
    out_shapes: List[tuple] = field(default_factory=list)
    created: List[Symbol] = field(default_factory=list)  # every node built by ctx.op, in order

    def op(self, op_name: str, *args, **kwargs) -> Symbol:
        """Apply a registered op; the node is named ``{forward}_backward{k}`` unless `name` is given."""
        from ..symbol.ops_api import create

        kwargs.setdefault("name", f"{self.name}_backward{len(self.created)}")
        sym = create(op_name, *args, **kwargs)
        self.created.append(sym)
        return sym
