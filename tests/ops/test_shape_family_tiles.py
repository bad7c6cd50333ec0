"""Running this family's kernels on tiles, as partition-n-reduce does: for every strategy
the C++ analysis derives from an op's TDL, each worker runs the kernel on its input boxes
with the attributes the op's tile hook (OpDef.extra["tile_attrs"]) gives; its output tiles
(or, for partial strategies, the reduction over workers) must equal the full result."""
import numpy as np
import pytest

import autotile as at
from autotile import _core
from autotile.execgraph.tile_attrs import tile_attrs
from autotile.ops.registry import KernelContext, format_value

R = np.random.default_rng(0).standard_normal
IDX = np.array([[0.0, 5.0, 2.0], [5.0, 5.0, 1.0], [3.0, 0.0, 4.0], [1.0, 2.0, 5.0]])
CONFIGS = [
    ("slice_axis", {"axis": 1, "begin": 1, "end": 5}, [R((4, 6))]),
    ("slice", {"begin": (None, 5), "end": (None, None), "step": (1, -2)}, [R((4, 6))]),
    ("slice", {"begin": (1, 0), "end": (5, 6), "step": (1, 2)}, [R((6, 6))]),
    ("_backward_slice_axis", {"axis": 1, "begin": 1, "end": 5, "shape": (4, 6)}, [R((4, 4))]),
    ("_backward_slice", {"begin": (None, 5), "end": (None, None), "step": (1, -2), "shape": (4, 6)}, [R((4, 3))]),
    ("_backward_slice", {"begin": (0, 1), "end": (4, 6), "step": (2, 2), "shape": (4, 6)}, [R((2, 3))]),
    ("mean", {"axis": 1}, [R((4, 6))]),
    ("mean", {}, [R((4, 6))]),
    ("sum", {"axis": (0,), "keepdims": True}, [R((4, 6))]),
    ("max", {"axis": 1}, [R((4, 6))]),
    ("_backward_mean", {"axis": 1, "shape": (4, 6)}, [R((4,))]),
    ("_backward_sum", {"axis": 0, "keepdims": True, "shape": (4, 6)}, [R((1, 6))]),
    ("_backward_prod", {"axis": 1}, [R((4,)), R((4, 6))]),
    ("dot", {}, [R((4, 6)), R((6, 2))]),
    ("_backward_dot_lhs", {"shape": (4, 6)}, [R((4, 2)), R((6, 2))]),
    ("_backward_dot_rhs", {"transpose_b": True, "shape": (2, 6)}, [R((4, 2)), R((4, 6))]),
    ("batch_dot", {"transpose_b": True}, [R((2, 4, 6)), R((2, 2, 6))]),
    ("Embedding", {"input_dim": 6, "output_dim": 4}, [IDX, R((6, 4))]),
    ("_backward_Embedding", {"input_dim": 6, "output_dim": 4}, [R((4, 3, 4)), IDX]),
    ("Concat", {"dim": 1, "num_args": 2}, [R((4, 2)), R((4, 4))]),
    ("_backward_Concat", {"dim": 1, "sizes": (2, 4)}, [R((4, 6))]),
    ("_backward_Concat", {"dim": 0, "sizes": (4, 2)}, [R((6, 4))]),
    ("SliceChannel", {"num_outputs": 2, "axis": 1}, [R((4, 12))]),
    ("SliceChannel", {"num_outputs": 3, "axis": 0, "squeeze_axis": True}, [R((3, 4, 2))]),
    ("_backward_SliceChannel", {"num_outputs": 2, "axis": 1}, [R((4, 2)), R((4, 2))]),
    ("broadcast_to", {"shape": (4, 6)}, [R((1, 6))]),
    ("transpose", {"axes": (1, 0)}, [R((4, 6))]),
    ("Reshape", {"shape": (2, 2, 6)}, [R((4, 6))]),
    ("Flatten", {}, [R((4, 2, 3))]),
    ("Reshape", {"shape": (6, 4)}, [R((4, 6))]),
    ("Reshape", {"shape": (-1,)}, [R((2, 6, 2))]),
    ("squeeze", {}, [R((4, 1, 6))]),
    ("reshape_like", {}, [R((4, 6)), R((2, 12))]),
    ("expand_dims", {"axis": 1}, [R((4, 6))]),
    ("Cast", {"dtype": "float32"}, [R((4, 6))]),
]
_REDUCE = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}


def _run_tiled(op, attrs, inputs, k):
    in_shapes = [x.shape for x in inputs]
    ins, outs = op.infer_shape(attrs, list(in_shapes))[:2]
    full = op.forward(attrs, inputs, KernelContext())
    text = op.tdl(attrs, ins, outs)
    strategies = _core.analyze_tdl(text, ins, outs, k)["strategies"]
    if not strategies:
        pytest.skip(f"no {k}-way strategy for these shapes")
    for s in strategies:
        acc = [None] * len(outs)
        for w in range(k):
            in_boxes = []
            for need, shape in zip(s["inputs"], in_shapes):
                lo, hi = [0] * len(shape), list(shape)
                if not need["replicate"] and need["per_worker"]:
                    lo[need["dim"]], hi[need["dim"]] = need["per_worker"][w]
                in_boxes.append((tuple(lo), tuple(hi)))
            out_boxes = []
            for make, shape in zip(s["outputs"], outs):
                lo, hi = [0] * len(shape), list(shape)
                if not make["partial"]:
                    n = shape[make["dim"]] // k
                    lo[make["dim"]], hi[make["dim"]] = w * n, (w + 1) * n
                out_boxes.append((tuple(lo), tuple(hi)))
            tiles = [x[tuple(slice(l, h) for l, h in zip(*b))] for x, b in zip(inputs, in_boxes)]
            a = tile_attrs(op.name, attrs, in_boxes, out_boxes, in_shapes, outs)  # applies the op's hook
            got = op.forward(a, tiles, KernelContext())
            for o, (make, box, value) in enumerate(zip(s["outputs"], out_boxes, got)):
                want_shape = tuple(h - l for l, h in zip(*box))
                if value.shape != want_shape:  # whole dims computed in full: keep the tile's part
                    value = value[tuple(slice(l, h) if value.shape[d] != want_shape[d] else slice(None)
                                        for d, (l, h) in enumerate(zip(*box)))]
                assert value.shape == want_shape, f"{op.name} var {s['var']} worker {w}: {text}"
                if make["partial"]:
                    acc[o] = value if acc[o] is None else _REDUCE[make["reducer"]](acc[o], value)
                else:
                    np.testing.assert_allclose(value, full[o][tuple(slice(l, h) for l, h in zip(*box))],
                                               rtol=1e-12, atol=1e-12,
                                               err_msg=f"{op.name} var {s['var']} worker {w}: {text}")
        for o, value in enumerate(acc):
            if value is not None:
                np.testing.assert_allclose(value, full[o], rtol=1e-12, atol=1e-12,
                                           err_msg=f"{op.name} partial var {s['var']}: {text}")


@pytest.mark.parametrize("op_name,attrs,inputs", CONFIGS, ids=[c[0] for c in CONFIGS])
@pytest.mark.parametrize("k", [2, 3])
def test_kernels_on_tiles_reassemble_the_full_result(op_name, attrs, inputs, k):
    op = at.ops.get(op_name)
    parsed = at.ops.parse_attrs(op, {a: format_value(v) for a, v in attrs.items()}, "op")
    _run_tiled(op, parsed, inputs, k)
