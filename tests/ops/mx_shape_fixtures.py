"""MXNet 1.9 reference results for the shape/reduction/matmul/embedding op families,
stored by tests/fixtures/ops_shape/generate.py, and the check that compares an op with them."""
from __future__ import annotations

import json
import os
from functools import lru_cache

import numpy as np

import autotile as at
from gradcheck import analytic_gradient, forward, single_op

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "ops_shape", "shape_ops.npz")


@lru_cache(maxsize=1)
def _load():
    data = np.load(FIXTURE)
    arrays = {k: data[k] for k in data.files}
    return {c["name"]: c for c in json.loads(str(arrays.pop("cases")))}, arrays


def names(family):
    """Case names of one op family (the test file's)."""
    return [n for n, c in _load()[0].items() if c["family"] == family]


def _attr(v):
    return tuple(v) if isinstance(v, list) else v


def check(name, rtol=1e-7, atol=1e-9):
    """Forward outputs and the gradients MXNet computed equal the registered op's."""
    cases, arrays = _load()
    c = cases[name]
    values = {k: arrays[f"{name}/in_{k}"] for k in c["inputs"]}
    attrs = {k: _attr(v) for k, v in c["attrs"].items() if v is not None}
    op = at.ops.get(c["op"])
    if op.variadic:
        attrs[op.variadic] = len(values)
    sym = single_op(c["op"], list(values), **attrs)
    outs = forward(sym, values)
    n_out = len([k for k in arrays if k.startswith(f"{name}/out")])
    assert len(outs) == n_out, f"{name}: {len(outs)} outputs, MXNet has {n_out}"
    for i, o in enumerate(outs):
        want = arrays[f"{name}/out{i}"]
        assert o.shape == want.shape, f"{name}: output {i} has shape {o.shape}, MXNet {want.shape}"
        np.testing.assert_allclose(o, want, rtol=rtol, atol=atol, err_msg=f"{name}: output {i}")
    dys = [arrays[f"{name}/dy{i}"] for i in range(n_out)]
    grads = analytic_gradient(sym, values, dys)
    for k, g in zip(c["inputs"], grads):
        if k in c["grads"]:
            np.testing.assert_allclose(g, arrays[f"{name}/grad_{k}"], rtol=rtol, atol=atol,
                                       err_msg=f"{name}: gradient of {k}")
