"""Partition-n-reduce on one op at a time: for every strategy the core derives from an op's
TDL (2-way and 4-way), run the op's own kernel on each worker's input regions, keep each
worker's output slab (as the host runtime does) and assemble (concatenate, or sum partial
results); the result must equal the kernel on whole inputs. Independent of any plan or
execution graph, this checks that each kernel computes its part of the whole op on a tile
(whole-batch normalizations, broadcast-gradient sums, whole softmax rows...)."""
import numpy as np
import pytest

import autotile as at
from autotile.ops.registry import KernelContext, format_value
from test_elemwise_tdl import CASES, _IDS

_core = pytest.importorskip("autotile._core")
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _run(op, attrs, inputs):
    return op.forward(attrs, list(inputs), KernelContext(is_train=False, rng=np.random.default_rng(0)))


def _worker_inputs(strategy, inputs, w, out_shapes):
    region = []
    for need, x in zip(strategy["inputs"], inputs):
        if need["replicate"] or need["dim"] < 0:
            make = strategy["outputs"][0]
            if not need["read"] and x.shape == tuple(out_shapes[0]) and not make["partial"] and make["dim"] >= 0:
                # a shape donor: the runtime passes zeros shaped like this worker's output tile
                shape = list(x.shape)
                shape[make["dim"]] //= _k(strategy)
                region.append(np.zeros(shape, x.dtype))
                continue
            region.append(x)
            continue
        lo, hi = need["per_worker"][w]
        index = [slice(None)] * x.ndim
        index[need["dim"]] = slice(lo, hi)
        region.append(x[tuple(index)])
    return region


def _k(strategy):
    for need in strategy["inputs"]:
        if need["per_worker"]:
            return len(need["per_worker"])
    return None


@pytest.mark.parametrize("k", [2, 4])
@pytest.mark.parametrize("op_name,inputs,attrs,perturb", CASES, ids=_IDS)
def test_every_strategy_reassembles_the_whole_output(op_name, inputs, attrs, perturb, k):
    if op_name == "LeakyReLU" and attrs.get("act_type") == "rrelu":
        pytest.skip("rrelu draws its slopes per element: a tile's draw differs from the whole op's")
    op = at.ops.get(op_name)
    parsed = at.ops.parse_attrs(op, {a: format_value(v) for a, v in attrs.items()}, "op")
    in_shapes, out_shapes = op.infer_shape(parsed, [tuple(x.shape) for x in inputs])[:2]
    text = op.tdl(parsed, in_shapes, out_shapes)
    whole = _run(op, parsed, inputs)
    result = _core.analyze_tdl(text, in_shapes, out_shapes, k)
    for st in result["strategies"]:
        assembled = [np.zeros(o.shape) for o in whole]
        for w in range(k):
            outs = _run(op, parsed, _worker_inputs(st, inputs, w, out_shapes))
            for o, (make, full, got) in enumerate(zip(st["outputs"], whole, outs)):
                got = np.asarray(got, dtype=np.float64)
                if make["partial"]:
                    assert got.shape == full.shape, f"{op_name} {st['var']}: partial output of shape {got.shape}"
                    assembled[o] += got
                    continue
                d = make["dim"]
                size = full.shape[d] // k
                index = [slice(None)] * full.ndim
                index[d] = slice(w * size, (w + 1) * size)
                if got.shape[d] == full.shape[d] and size != full.shape[d]:
                    got = got[tuple(index)]  # the kernel computed whole dims: keep this slab
                assembled[o][tuple(index)] = got
        for o, (got, want) in enumerate(zip(assembled, whole)):
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12,
                                       err_msg=f"{op_name} output {o}, strategy {st['var']} ({k} workers): {text}")
