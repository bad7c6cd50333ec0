"""Every registered op's TDL description, analysed by the C++ core, against brute force.

For sample configurations of every op (tests/tdl/op_samples.py), the strategies and the
per-worker input intervals analyze_tdl reports must equal what enumerating each worker's
share of the index space gives (tests/tdl/tdl_oracle.py, an independent reading of the text).
"""
import random

import pytest

from autotile import _core
from autotile.ops import registry

import op_samples
import tdl_oracle

SAMPLES = list(op_samples.samples())
# Op families that must be covered whenever they are registered.
MUST_COVER = ["FullyConnected", "_backward_FullyConnected_data", "_backward_FullyConnected_weight",
              "_backward_FullyConnected_bias", "Activation", "_backward_Activation", "Convolution",
              "_backward_Convolution_data", "_backward_Convolution_weight", "_backward_Convolution_bias",
              "Pooling", "softmax", "transpose", "Reshape", "Concat", "SliceChannel", "elemwise_add",
              "broadcast_add"]


def _id(sample):
    name, _, ins, _ = sample
    return f"{name}-{'x'.join('_'.join(map(str, s)) for s in ins)}"


def test_samples_cover_the_registered_families():
    covered = {s[0] for s in SAMPLES}
    registered = registry.all_ops()
    covered_ids = {id(registry.get(n)) for n in covered}  # aliases share one OpDef
    missing = [n for n in MUST_COVER if n in registered and id(registered[n]) not in covered_ids]
    assert not missing, f"no sample configuration for {missing}"
    assert "FullyConnected" in covered and "Activation" in covered
    with_tdl = {id(op) for op in registered.values() if op.tdl is not None}
    # Most families must be reachable by the generic sampler; a few need hand-made configs.
    assert len(covered_ids) >= 0.9 * len(with_tdl)


@pytest.mark.parametrize("sample", SAMPLES, ids=[_id(s) for s in SAMPLES])
@pytest.mark.parametrize("k", [2, 3])
def test_op_strategies_match_brute_force(sample, k):
    name, attrs, ins, outs = sample
    text = registry.get(name).tdl(attrs, ins, outs)
    assert isinstance(text, str), f"{name}: tdl() returned {text!r}"
    got = _core.analyze_tdl(text, ins, outs, k)
    want = tdl_oracle.strategies(text, ins, outs, k)
    assert [s["var"] for s in got["strategies"]] == list(want), text
    for s in got["strategies"]:
        assert s == want[s["var"]], f"{name} k={k} var {s['var']}: {text}"
    assert got["elementwise"] == tdl_oracle.elementwise(text, ins, outs), text


EW_SAMPLES = [s for s in SAMPLES if registry.get(s[0]).elementwise]


@pytest.mark.parametrize("sample", EW_SAMPLES, ids=[_id(s) for s in EW_SAMPLES])
def test_declared_elementwise_ops_are_elementwise(sample):
    """An op that declares itself element-wise must analyse as element-wise (the converse
    need not hold: declarations may be conservative)."""
    name, attrs, ins, outs = sample
    op = registry.get(name)
    text = op.tdl(attrs, ins, outs)
    assert _core.analyze_tdl(text, ins, outs, 2)["elementwise"], text


def test_partition_n_reduce_covers_each_output_exactly_once():
    """Sanity of the contract on the ops: for every split strategy, the k output slabs are
    disjoint and cover the output; every input interval lies inside its dim."""
    for name, attrs, ins, outs in SAMPLES:
        text = registry.get(name).tdl(attrs, ins, outs)
        for k in (2, 4):
            for s in _core.analyze_tdl(text, ins, outs, k)["strategies"]:
                for i, need in enumerate(s["inputs"]):
                    if need["replicate"]:
                        assert need["per_worker"] == []
                        continue
                    assert len(need["per_worker"]) == k
                    for lo, hi in need["per_worker"]:
                        assert 0 <= lo <= hi <= ins[i][need["dim"]], (name, s["var"], need)
                for o, make in enumerate(s["outputs"]):
                    assert make["partial"] or outs[o][make["dim"]] % k == 0


def _check(name, attrs, ins, outs, ks=(2, 3)):
    text = registry.get(name).tdl(attrs, ins, outs)
    for k in ks:
        got = _core.analyze_tdl(text, ins, outs, k)
        want = tdl_oracle.strategies(text, ins, outs, k)
        assert [s["var"] for s in got["strategies"]] == list(want), (text, ins, outs, k)
        for s in got["strategies"]:
            assert s == want[s["var"]], (name, text, ins, outs, k, s["var"])
        assert got["elementwise"] == tdl_oracle.elementwise(text, ins, outs), text


@pytest.mark.parametrize("seed", range(4))
def test_ops_on_random_small_shapes(seed):
    rng = random.Random(seed)
    bases = [tuple(rng.randint(1, 6) for _ in range(rng.randint(1, 4))) for _ in range(3)]
    count = 0
    for name, attrs, ins, outs in op_samples.samples(bases):
        _check(name, attrs, ins, outs)
        count += 1
    assert count > 50


@pytest.mark.parametrize("seed", range(25))
def test_random_convolution_windows(seed):
    """Convolution forward and backward descriptions with random kernel, stride, pad and
    dilation: halo intervals against enumeration."""
    if not registry.exists("Convolution"):
        pytest.skip("Convolution not registered")
    rng = random.Random(seed)
    nd = rng.choice([1, 2])
    kernel = tuple(rng.randint(1, 3) for _ in range(nd))
    stride = tuple(rng.randint(1, 3) for _ in range(nd))
    dilate = tuple(rng.randint(1, 2) for _ in range(nd))
    pad = tuple(rng.randint(0, 2) for _ in range(nd))
    spatial = tuple(rng.randint((k - 1) * d + 1, 12) for k, d in zip(kernel, dilate))
    raw = {"kernel": str(kernel), "stride": str(stride), "dilate": str(dilate), "pad": str(pad),
           "num_filter": str(rng.choice([2, 4, 6]))}
    op = registry.get("Convolution")
    attrs = registry.parse_attrs(op, raw)
    data = (rng.choice([2, 4]), rng.choice([2, 3, 4])) + spatial
    res = op.infer_shape(attrs, [data, None, None])
    ins, outs = [tuple(s) for s in res[0]], [tuple(s) for s in res[1]]
    _check("Convolution", attrs, ins, outs, ks=(2, 3, 4))
    dy, w = outs[0], ins[1]
    bwd = "_backward_Convolution_data"
    if registry.exists(bwd):
        battrs = registry.parse_attrs(registry.get(bwd), dict(raw, data_spatial=str(spatial)))
        _check(bwd, battrs, [dy, w], [data], ks=(2, 3, 4))
    bwd = "_backward_Convolution_weight"
    if registry.exists(bwd):
        battrs = registry.parse_attrs(registry.get(bwd), raw)
        _check(bwd, battrs, [dy, data], [w], ks=(2, 3))
