"""Checks an op's forward kernel and gradient against independent oracles.

- `check_gradient` builds the op's backward nodes with its own ``gradient(ctx)`` (exactly
  what autodiff does for one node), runs them with the reference executor, and compares the
  result with central finite differences of the forward kernel in float64.
"""
from __future__ import annotations

from typing import Dict, Sequence

import numpy as np

import autotile as at
from autotile.backend.reference import execute
from autotile.ops.grad import GradContext
from autotile.symbol.infer import infer_entry_shapes
from autotile.symbol.symbol import Symbol


def single_op(op_name: str, input_names: Sequence[str], **attrs) -> Symbol:
    """A symbol applying `op_name` to variables named `input_names` (arguments then aux)."""
    variables = [at.sym.Variable(n) for n in input_names]
    op = at.ops.get(op_name)
    parsed = at.ops.parse_attrs(op, {k: at.ops.registry.format_value(v) for k, v in attrs.items()}, "op")
    names = op.arguments(parsed) + op.aux(parsed)
    kwargs = dict(zip(names, variables))
    return at.sym.create(op_name, name="op", **kwargs, **attrs)


def forward(sym: Symbol, values: Dict[str, np.ndarray], is_train=True):
    outs, _, _ = execute(sym, values, is_train=is_train, rng=np.random.default_rng(0))
    return outs


def analytic_gradient(sym: Symbol, values: Dict[str, np.ndarray], out_grads, is_train=True):
    """Gradients of every input of the single node in `sym` given output gradients."""
    node = sym.entries[0][0]
    op = node.opdef()
    attrs = node.parsed_attrs()
    n_out = op.num_outputs(attrs)
    shapes = infer_entry_shapes(sym, {k: v.shape for k, v in values.items()})
    inputs = [Symbol([e]) for e in node.inputs]
    outputs = [Symbol([(node, i)]) for i in range(n_out)]
    grad_vars = [at.sym.Variable(f"__dy{i}") for i in range(n_out)]
    ctx = GradContext(name=node.name, attrs=attrs, raw_attrs=node.attrs, inputs=inputs, outputs=outputs,
                      out_grads=grad_vars,
                      in_shapes=[shapes[(id(s), i)] for s, i in node.inputs],
                      out_shapes=[shapes[(id(node), i)] for i in range(n_out)])
    grads = op.gradient(ctx)
    assert len(grads) == len(node.inputs), f"{op.name}: gradient returned {len(grads)} entries for {len(node.inputs)} inputs"
    env = dict(values)
    for i, g in enumerate(out_grads):
        env[f"__dy{i}"] = g
    result = []
    for g in grads:
        if g is None:
            result.append(None)
            continue
        needed = set(g.list_inputs())
        outs, _, _ = execute(g, {k: v for k, v in env.items() if k in needed}, is_train=is_train,
                             rng=np.random.default_rng(0))
        result.append(outs[0])
    return result


def numeric_gradient(sym: Symbol, values: Dict[str, np.ndarray], out_grads, wrt: str, eps=1e-3, is_train=True):
    """Central finite differences of sum_i <out_i, dy_i> with respect to input `wrt` (float64)."""
    vals = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in values.items()}
    x = vals[wrt]
    grad = np.zeros_like(x)
    flat = x.reshape(-1)
    gflat = grad.reshape(-1)
    for j in range(flat.size):
        old = flat[j]
        flat[j] = old + eps
        plus = sum(float(np.sum(o * dy)) for o, dy in zip(forward(sym, vals, is_train), out_grads))
        flat[j] = old - eps
        minus = sum(float(np.sum(o * dy)) for o, dy in zip(forward(sym, vals, is_train), out_grads))
        flat[j] = old
        gflat[j] = (plus - minus) / (2 * eps)
    return grad


def check_gradient(op_name: str, inputs: Dict[str, np.ndarray], attrs=None, wrt=None, rtol=1e-4, atol=1e-5,
                   eps=1e-4, seed=0, is_train=True):
    """Asserts the op's gradient equals central finite differences for every input in `wrt`
    (default: every floating-point input). Inputs are float64 so differences are accurate."""
    attrs = attrs or {}
    rng = np.random.default_rng(seed)
    values = {k: (np.asarray(v, dtype=np.float64) if np.asarray(v).dtype.kind == "f" else np.asarray(v))
              for k, v in inputs.items()}
    sym = single_op(op_name, list(values), **attrs)
    outs = forward(sym, values, is_train)
    out_grads = [rng.standard_normal(o.shape) for o in outs]
    n_visible = len(outs)
    node = sym.entries[0][0]
    op = node.opdef()
    n_all = op.num_outputs(node.parsed_attrs())
    # hidden outputs (e.g. BatchNorm's saved mean/var) get zero gradient
    full_grads = list(out_grads)
    if n_all > n_visible:
        all_outs = forward(Symbol([(node, i) for i in range(n_all)]), values, is_train)
        full_grads = out_grads + [np.zeros_like(o) for o in all_outs[n_visible:]]
    analytic = analytic_gradient(sym, values, full_grads, is_train)
    names = list(values)
    wrt = wrt or [n for n in names if values[n].dtype.kind == "f"]
    for name in wrt:
        i = names.index(name)
        numeric = numeric_gradient(sym, values, out_grads, name, eps=eps, is_train=is_train)
        assert analytic[i] is not None, f"{op_name}: no gradient for input '{name}'"
        np.testing.assert_allclose(analytic[i], numeric, rtol=rtol, atol=atol,
                                   err_msg=f"{op_name}: gradient of '{name}' differs from finite differences")
