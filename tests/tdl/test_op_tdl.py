"""Every registered op's TDL description, analysed by the C++ core, against brute force.

For sample configurations of every op (tests/tdl/op_samples.py), the strategies and the
per-worker input intervals analyze_tdl reports must equal what enumerating each worker's
share of the index space gives (tests/tdl/tdl_oracle.py, an independent reading of the text).
"""
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
