"""Every TDL check the op-family tests run, for one op configuration at once:

- the description parses in the independent reader and covers what the kernel reads
  (tdl_interp.check_op_tdl; `exact` also evaluates it against the kernel);
- the C++ analysis equals the brute-force oracle of tests/tdl (tdl_oracle) for k = 2, 3;
- per strategy, a worker's output slab depends only on the regions it is given
  (tdl_regions.check_regions);
- the kernel run on each worker's tiles with the op's tile hook reassembles the whole
  result, partial strategies summed (test_shape_family_tiles._run_tiled).
"""
from __future__ import annotations

import os
import sys

import autotile as at
from autotile import _core
from autotile.ops.registry import format_value
from tdl_interp import check_op_tdl
from tdl_regions import check_regions
from test_shape_family_tiles import _run_tiled

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tdl"))
import tdl_oracle  # noqa: E402


def check_tdl(op_name, inputs, attrs=None, exact=False, fns=None, perturb=None, ks=(2, 3)):
    """Runs the checks above on `inputs` (float64 arrays); returns the TDL text. `perturb`
    maps an input index to a generator of replacement values (e.g. 0/1 conditions)."""
    attrs = attrs or {}
    op = at.ops.get(op_name)
    parsed = at.ops.parse_attrs(op, {k: format_value(v) for k, v in attrs.items()}, "op")
    ins, outs = op.infer_shape(parsed, [tuple(x.shape) for x in inputs])[:2]
    names = op.arguments(parsed)
    by_name = {names[i]: f for i, f in (perturb or {}).items()}
    text = check_op_tdl(op_name, list(inputs), attrs, exact=exact, fns=fns, perturb=by_name)
    for k in ks:
        got = _core.analyze_tdl(text, ins, outs, k)
        want = tdl_oracle.strategies(text, ins, outs, k)
        assert [s["var"] for s in got["strategies"]] == list(want), text
        for s in got["strategies"]:
            assert s == want[s["var"]], f"{op_name} k={k} var {s['var']}: {text}"
        if op.elementwise:
            assert got["elementwise"], f"{op_name} is flagged element-wise but its TDL is not: {text}"
        if got["strategies"]:
            _run_tiled(op, parsed, list(inputs), k)
    assert check_regions(op_name, list(inputs), attrs, ks=ks, perturb=perturb) > 0, f"{op_name}: no strategy: {text}"
    return text

