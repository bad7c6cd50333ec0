"""Checks an op's TDL as the planner consumes it: for every split strategy the C++ analysis
(autotile._core.analyze_tdl) reports, each worker's output slab computed by the op's kernel
must depend only on the input intervals the analysis says that worker reads. Inputs outside
those intervals are re-randomised; the slab must not change. (A TDL whose regions miss data
the kernel reads would make a partitioned run wrong.)"""
from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np

import autotile as at
from autotile import _core
from autotile.ops.registry import KernelContext, format_value


def check_regions(op_name: str, inputs: Sequence[np.ndarray], attrs=None, ks=(2, 3), is_train=True,
                  perturb: Optional[Dict[int, object]] = None, seed: int = 0) -> int:
    """Returns how many (strategy, worker) pairs were checked; asserts each is covered."""
    op = at.ops.get(op_name)
    parsed = at.ops.parse_attrs(op, {k: format_value(v) for k, v in (attrs or {}).items()}, "op")
    in_shapes, out_shapes = op.infer_shape(parsed, [tuple(x.shape) for x in inputs])[:2]
    text = op.tdl(parsed, in_shapes, out_shapes)
    rng = np.random.default_rng(seed)
    perturb = perturb or {}

    def kernel(xs):
        return op.forward(parsed, list(xs), KernelContext(is_train=is_train, rng=np.random.default_rng(0)))

    base = kernel(inputs)
    checked = 0
    for k in ks:
        for strat in _core.analyze_tdl(text, in_shapes, out_shapes, k)["strategies"]:
            if strat["reduction"]:
                continue
            for j in range(k):
                changed = []
                for i, (x, need) in enumerate(zip(inputs, strat["inputs"])):
                    noise = perturb[i](rng, x.shape) if i in perturb else rng.standard_normal(x.shape) * 7 + 3
                    keep = np.zeros(x.shape, dtype=bool)
                    if need["read"]:
                        if need["replicate"]:
                            keep[...] = True
                        else:
                            lo, hi = need["per_worker"][j]
                            index = [slice(None)] * x.ndim
                            index[need["dim"]] = slice(lo, hi)
                            keep[tuple(index)] = True
                    changed.append(np.where(keep, x, noise).astype(x.dtype))
                got = kernel(changed)
                for o, make in enumerate(strat["outputs"]):
                    if make["partial"] or make["dim"] < 0:
                        continue
                    d = make["dim"]
                    size = out_shapes[o][d] // k
                    index = [slice(None)] * len(out_shapes[o])
                    index[d] = slice(j * size, (j + 1) * size)
                    np.testing.assert_allclose(
                        got[o][tuple(index)], base[o][tuple(index)], rtol=1e-9, atol=1e-9,
                        err_msg=f"{op_name} k={k} split {strat['var']} worker {j}: output {o} depends on "
                                f"inputs outside the TDL regions: {text}")
                checked += 1
    return checked
