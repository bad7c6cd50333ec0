"""The C++ analysis of this family's TDL descriptions against the brute-force oracle of
tests/tdl (tdl_oracle), for configurations the generic sampler of tests/tdl does not reach
(backward ops with shape attributes, slices, dot transposes, Embedding)."""
import os
import sys

import pytest

import autotile as at
from autotile import _core
from autotile.ops.registry import format_value

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tdl"))
import tdl_oracle  # noqa: E402

CONFIGS = [
    ("slice_axis", {"axis": 1, "begin": 1, "end": 5}, [(4, 6)]),
    ("slice", {"begin": (None, 5), "end": (None, 1), "step": (1, -2)}, [(4, 6)]),
    ("_backward_slice_axis", {"axis": 1, "begin": 1, "end": 5, "shape": (4, 6)}, [(4, 4)]),
    ("_backward_slice", {"begin": (1, None), "end": (3, None), "step": (1, 2), "shape": (4, 6)}, [(2, 3)]),
    ("_backward_sum", {"axis": 1, "shape": (4, 6, 2)}, [(4, 2)]),
    ("_backward_mean", {"axis": (0, 2), "keepdims": True, "shape": (4, 6, 2)}, [(1, 6, 1)]),
    ("_backward_max", {"axis": 1}, [(4, 2), (4, 6, 2), (4, 2)]),
    ("_backward_prod", {"axis": -1}, [(4, 6), (4, 6, 2)]),
    ("sum", {"axis": (0, 2), "exclude": True}, [(4, 6, 2)]),
    ("dot", {"transpose_a": True}, [(6, 4, 2), (6, 4)]),
    ("dot", {"transpose_b": True}, [(4, 6), (2, 6)]),
    ("_backward_dot_lhs", {"shape": (4, 2, 6)}, [(4, 2, 4), (6, 4)]),
    ("_backward_dot_rhs", {"transpose_b": True, "shape": (4, 6)}, [(4, 2, 4), (4, 2, 6)]),
    ("batch_dot", {"transpose_a": True, "transpose_b": True}, [(2, 6, 4), (2, 4, 6)]),
    ("Embedding", {"input_dim": 6, "output_dim": 4}, [(4, 2), (6, 4)]),
    ("_backward_Embedding", {"input_dim": 6, "output_dim": 4}, [(4, 2, 4), (4, 2)]),
    ("Reshape", {"shape": (-1, 0)}, [(6, 4, 2)]),
    ("Reshape", {"shape": (2, -1, 4)}, [(4, 6, 2)]),
    ("squeeze", {"axis": (1,)}, [(4, 1, 6)]),
    ("expand_dims", {"axis": -1}, [(4, 6)]),
    ("_backward_Concat", {"dim": 0, "sizes": (2, 4)}, [(6, 4)]),
    ("_backward_SliceChannel", {"num_outputs": 2, "axis": 0, "squeeze_axis": True}, [(4, 6), (4, 6)]),
    ("broadcast_like", {}, [(1, 6), (4, 6)]),
    ("reshape_like", {}, [(4, 6), (2, 12)]),
]


@pytest.mark.parametrize("op_name,attrs,in_shapes", CONFIGS, ids=[c[0] for c in CONFIGS])
@pytest.mark.parametrize("k", [2, 3])
def test_analysis_matches_brute_force(op_name, attrs, in_shapes, k):
    op = at.ops.get(op_name)
    parsed = at.ops.parse_attrs(op, {a: format_value(v) for a, v in attrs.items()}, "op")
    ins, outs = op.infer_shape(parsed, list(in_shapes))[:2]
    text = op.tdl(parsed, ins, outs)
    got = _core.analyze_tdl(text, ins, outs, k)
    want = tdl_oracle.strategies(text, ins, outs, k)
    assert [s["var"] for s in got["strategies"]] == list(want), text
    for s in got["strategies"]:
        assert s == want[s["var"]], f"{op_name} k={k} var {s['var']}: {text}"
    assert got["elementwise"] == tdl_oracle.elementwise(text, ins, outs), text
