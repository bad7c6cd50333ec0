"""Compares registered ops with MXNet 1.9 results stored by tests/fixtures/ops/generate.py."""
from __future__ import annotations

import json
import os

import numpy as np

from autotile.backend.reference import execute
from gradcheck import analytic_gradient, single_op
from autotile.symbol.symbol import Symbol

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "ops")


def cases(fname):
    """(case dict, arrays) for every case of fixture `fname`, e.g. 'pooling.npz'."""
    data = np.load(os.path.join(FIXTURES, fname))
    return [(c, {k.split("/", 1)[1]: data[k] for k in data.files if k.startswith(c["name"] + "/")})
            for c in json.loads(str(data["cases"]))]


def case_ids(fname):
    return [c["name"] for c, _ in cases(fname)]


def check_case(case, arrays, rtol=1e-4, atol=1e-5):
    """Forward outputs, gradients of every input and updated aux states equal MXNet's."""
    names = case["inputs"] + case["aux"]
    values = {k: arrays[k].astype(np.float64) for k in names}
    sym = single_op(case["op"], names, **case["attrs"])
    node = sym.entries[0][0]
    n_all = node.opdef().num_outputs(node.parsed_attrs())
    all_outs = Symbol([(node, i) for i in range(n_all)])
    outs, new_aux, _ = execute(all_outs, values, is_train=case["train"], rng=np.random.default_rng(0))
    n_mx = len([k for k in arrays if k.startswith("out")])
    assert len(sym.entries) == n_mx, f"{case['name']}: {len(sym.entries)} visible outputs, MXNet has {n_mx}"
    for i in range(n_mx):
        np.testing.assert_allclose(outs[i], arrays[f"out{i}"], rtol=rtol, atol=atol,
                                   err_msg=f"{case['name']}: output {i}")
    if not case["train"]:
        return
    for k in case["aux"]:
        np.testing.assert_allclose(new_aux[k], arrays[f"aux_{k}"], rtol=rtol, atol=atol,
                                   err_msg=f"{case['name']}: aux state {k} after a training step")
    head = [arrays["dy"].astype(np.float64)] + [np.zeros_like(o) for o in outs[1:]]
    grads = analytic_gradient(sym, values, head, is_train=True)
    for k, g in zip(names, grads):
        if k in case["inputs"]:
            np.testing.assert_allclose(g, arrays[f"grad_{k}"], rtol=rtol, atol=atol,
                                       err_msg=f"{case['name']}: gradient of {k}")
