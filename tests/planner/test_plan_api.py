"""The user-facing planner API: ``at.plan(model, devices, shapes=|batch=, algorithm=,
bandwidths=)`` and the Plan it returns (python/autotile/planner).

Expectations are built independently of the code under test: hand-computed factors, tile
shapes and device layouts, the definition of data parallelism, the execution graph's own
tile boxes (C++), a hand-written byte formatter, and brute-force minimisation over
bandwidth assignments."""
import itertools
import json
import math
import re

import pytest

import autotile as at
from autotile.errors import Error
from autotile.planner import ALGORITHMS, Plan
from autotile.planner.draw import device_tiles

TILING = re.compile(r"^(split\((\d+)\)|replicate|partial)$")
SMALL = "mlp-2-64"  # data (B, 64) -> fc1 (64) -> relu -> fc2 (64) -> softmax


@pytest.fixture(scope="module")
def mlp4():
    """The Soybean MLP (4 x 8192) on 4 devices."""
    return at.plan("mlp", devices=4, batch=8)


@pytest.fixture(scope="module")
def small6():
    return at.plan(SMALL, devices=6, batch=12)


def _fmt(n):
    """Independent of planner.plan._fmt_bytes: decimal units, one decimal."""
    if n < 1e3:
        return f"{n:.0f} B"
    for unit, scale in (("KB", 1e3), ("MB", 1e6), ("GB", 1e9)):
        if n < scale * 1e3:
            return f"{n / scale:.1f} {unit}"
    return f"{n / 1e12:.1f} TB"


# ----------------------------------------------------------------------------- Plan fields

@pytest.mark.parametrize("devices, factors", [(1, []), (2, [2]), (4, [2, 2]), (6, [3, 2]), (8, [2, 2, 2]),
                                              (12, [3, 2, 2]), (7, [7])])
def test_factors_multiply_to_devices(devices, factors):
    p = at.plan(SMALL, devices=devices, batch=84)  # 84 = 2^2 * 3 * 7: the batch divides by every factor
    assert p.devices == devices
    assert p.factors == factors  # prime factors, largest first (hand-computed)
    assert math.prod(p.factors) == devices
    assert len(p.cut_costs) == len(factors)
    assert p.comm_bytes == pytest.approx(sum(p.cut_costs))
    if devices == 1:
        assert p.comm_bytes == 0


def test_every_tensor_has_one_valid_tiling_per_cut(small6):
    p = small6
    assert set(p.tensor_tilings) == set(p.tensor_shapes)
    for name, tilings in p.tensor_tilings.items():
        shape = p.tensor_shapes[name]
        assert len(tilings) == len(p.factors), name
        pieces = [1] * len(shape)
        for k, t in zip(p.factors, tilings):
            m = TILING.match(t)
            assert m, f"{name}: {t!r}"
            if m.group(2) is not None:
                d = int(m.group(2))
                assert 0 <= d < len(shape), f"{name}: {t} of a rank-{len(shape)} tensor"
                pieces[d] *= k
        for d, n in enumerate(pieces):
            assert shape[d] % n == 0, f"{name} {shape}: dim {d} cut into {n} pieces"
    for node, strategies in p.node_strategies.items():
        assert len(strategies) == len(p.factors), node
        assert node in p.node_ops


def test_tiling_and_strategy_strings(mlp4):
    p = mlp4
    for name, tilings in p.tensor_tilings.items():
        assert p.tiling(name) == " ".join(tilings)
    # The README's MLP plan: the big weights are split by rows on every cut.
    assert p.tiling("fc1_weight") == "split(0) split(0)"
    for node, strategies in p.node_strategies.items():
        assert p.strategy(node) == " ".join(strategies)
    with pytest.raises(Error, match="no tensor named 'nope'"):
        p.tiling("nope")
    with pytest.raises(Error, match="no node named 'nope'"):
        p.strategy("nope")


def test_data_parallel_plan_is_what_data_parallelism_means():
    p = at.plan(SMALL, devices=4, batch=8, algorithm="data")
    assert p.algorithm == "data"
    assert p.tiling("data") == "split(0) split(0)"
    assert p.tiling("softmax_label") == "split(0) split(0)"
    for w in ("fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"):
        assert p.tiling(w) == "replicate replicate"
        assert p.tile_shape(w) == p.tensor_shapes[w]
    # FullyConnected's TDL is out[n, o] = sum(k) {...}: data parallelism splits n.
    assert p.strategy("fc1") == "n n" and p.strategy("fc2") == "n n"
    assert p.tile_shape("data") == (2, 64)
    assert p.tile_shape("fc1_output") == (2, 64)


def test_tile_shape_hand_computed(mlp4):
    assert mlp4.tensor_shapes["fc1_weight"] == (8192, 8192)
    assert mlp4.tile_shape("fc1_weight") == (2048, 8192)
    assert mlp4.tile_shape("fc1_bias") == (2048,)


def test_tile_shape_is_shape_divided_by_split_factors(small6):
    p = small6
    for name, shape in p.tensor_shapes.items():
        tile = p.tile_shape(name)
        assert len(tile) == len(shape)
        splits = [k for k, t in zip(p.factors, p.tensor_tilings[name]) if t.startswith("split")]
        # volume: a tile is 1/(product of the splitting cuts) of the tensor
        assert math.prod(tile) * math.prod(splits) == math.prod(shape), name
        for d in range(len(shape)):
            n = math.prod(k for k, t in zip(p.factors, p.tensor_tilings[name]) if t == f"split({d})")
            assert tile[d] == shape[d] // n


def test_device_tiles_hand_computed():
    plan = Plan(algorithm="manual", devices=4, factors=[2, 2], cut_costs=[0.0, 0.0], comm_bytes=0.0,
                search_seconds=0.0,
                tensor_tilings={"w": ["split(0)", "split(1)"], "x": ["split(0)", "split(0)"],
                                "r": ["replicate", "split(1)"], "p": ["partial", "split(0)"], "s": ["replicate", "replicate"]},
                node_strategies={}, tensor_shapes={"w": (8, 6), "x": (8, 3), "r": (4, 6), "p": (4, 4), "s": (5,)})
    # Devices in mixed radix, first cut most significant: device = 2 * d_cut1 + d_cut2.
    assert device_tiles(plan, "w") == {0: [(0, 2), (0, 2)], 1: [(0, 2), (1, 2)],
                                       2: [(1, 2), (0, 2)], 3: [(1, 2), (1, 2)]}
    assert device_tiles(plan, "x") == {d: [(d, 4), (0, 1)] for d in range(4)}
    assert device_tiles(plan, "r") == {0: [(0, 1), (0, 2)], 1: [(0, 1), (1, 2)],
                                       2: [(0, 1), (0, 2)], 3: [(0, 1), (1, 2)]}
    # a partial tiling holds the whole region (of a partial sum)
    assert device_tiles(plan, "p") == {0: [(0, 2), (0, 1)], 1: [(1, 2), (0, 1)],
                                       2: [(0, 2), (0, 1)], 3: [(1, 2), (0, 1)]}
    assert device_tiles(plan, "s") == {d: [(0, 1)] for d in range(4)}

    plan3 = Plan(algorithm="manual", devices=6, factors=[3, 2], cut_costs=[0.0, 0.0], comm_bytes=0.0,
                 search_seconds=0.0, tensor_tilings={"v": ["split(0)", "split(0)"], "u": ["split(1)", "split(0)"]},
                 node_strategies={}, tensor_shapes={"v": (12,), "u": (4, 6)})
    assert device_tiles(plan3, "v") == {d: [(d, 6)] for d in range(6)}
    assert device_tiles(plan3, "u") == {0: [(0, 2), (0, 3)], 1: [(1, 2), (0, 3)], 2: [(0, 2), (1, 3)],
                                        3: [(1, 2), (1, 3)], 4: [(0, 2), (2, 3)], 5: [(1, 2), (2, 3)]}


@pytest.mark.parametrize("model, devices, batch", [(SMALL, 6, 12), (SMALL, 8, 16), ("mlp-3-96", 12, 24)])
def test_device_tiles_and_tile_shape_match_the_execution_graph(model, devices, batch):
    """The C++ execution graph's tile boxes are the oracle for the device numbering."""
    p = at.plan(model, devices=devices, batch=batch, algorithm="tofu")
    eg = at.transform(model, p)
    checked = 0
    for name, tid in eg.tensor_id.items():
        if "partial" in p.tensor_tilings[name]:
            continue
        shape = p.tensor_shapes[name]
        layout = device_tiles(p, name)
        for dev in range(devices):
            buf = eg.buffers[eg.core.tile(tid, dev)]
            lo = tuple(i * s // n for (i, n), s in zip(layout[dev], shape))
            hi = tuple((i + 1) * s // n for (i, n), s in zip(layout[dev], shape))
            assert (buf["lo"], buf["hi"]) == (lo, hi), f"{name} on device {dev}"
            assert tuple(h - l for l, h in zip(lo, hi)) == p.tile_shape(name)
            checked += 1
    assert checked >= devices * 10


# ----------------------------------------------------------------------------- reports

def test_summary_names_parameters_and_cut_costs(mlp4):
    text = mlp4.summary()
    lines = text.splitlines()
    assert lines[0].startswith("plan: mlp") and "algorithm=tofu" in lines[0] and "devices=4" in lines[0]
    assert "cuts 2 x 2" in lines[0] and "batch=8" in lines[0]
    assert f"communication per step: {_fmt(mlp4.comm_bytes)}" in text
    for i, (k, c) in enumerate(zip(mlp4.factors, mlp4.cut_costs)):
        assert f"  cut {i + 1} ({k}-way): {_fmt(c)}" in lines
    assert mlp4.param_names == [f"fc{i}_{w}" for i in range(1, 5) for w in ("weight", "bias")]  # model order
    for name in mlp4.param_names:
        row = next(line for line in lines if line.split()[:1] == [name])
        assert row.endswith(mlp4.tiling(name))
        assert str(mlp4.tensor_shapes[name]) in row
    assert str(mlp4) == text


def test_summary_truncates_long_parameter_lists():
    p = at.plan("mlp-12-16", devices=2, batch=4)
    text = p.summary(max_rows=5)
    assert f"... {len(p.param_names) - 5} more" in text
    assert sum(1 for line in text.splitlines() if line.split()[:1] and line.split()[0] in p.param_names) == 5


def test_json_round_trip(small6):
    text = small6.to_json()
    doc = json.loads(text)
    assert doc["format"] == "autotile-plan-1"
    assert doc["factors"] == [3, 2] and doc["devices"] == 6
    back = Plan.from_json(text)
    assert back == small6
    assert back.tile_shape("fc1_weight") == small6.tile_shape("fc1_weight")
    assert isinstance(back.tensor_shapes["data"], tuple)
    assert back.to_json() == text
    # the plan read back drives the same execution graph
    assert at.transform(SMALL, back).stats()["bytes"] == at.transform(SMALL, small6).stats()["bytes"]


@pytest.mark.parametrize("text, match", [("{not json", "not valid JSON"), ("[1, 2]", "not an autotile plan"),
                                         ('{"algorithm": "tofu"}', "not an autotile plan")])
def test_from_json_rejects_garbage(text, match):
    with pytest.raises(Error, match=match):
        Plan.from_json(text)


def test_from_json_rejects_unknown_fields(small6):
    doc = json.loads(small6.to_json())
    doc["colour"] = "blue"
    with pytest.raises(Error, match="unexpected fields.*colour"):
        Plan.from_json(json.dumps(doc))


def test_draw_writes_a_png(tmp_path, small6):
    pytest.importorskip("matplotlib")
    import matplotlib.image as mpimg

    path = tmp_path / "plan.png"
    assert small6.draw(str(path)) == str(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = mpimg.imread(str(path))
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100 and image.shape[2] in (3, 4)
    assert image.std() > 0  # not a blank canvas
    path2 = tmp_path / "two.png"
    small6.draw(str(path2), tensors=["fc1_weight", "data"])
    assert mpimg.imread(str(path2)).shape[2] in (3, 4)
    with pytest.raises(Error, match="no tensor named 'ghost'"):
        small6.draw(str(tmp_path / "x.png"), tensors=["ghost"])


# ----------------------------------------------------------------------------- bandwidths

def _weighted(costs, bandwidths):
    return sum(c / b for c, b in zip(costs, bandwidths))


@pytest.mark.parametrize("devices, bandwidths", [(4, [12.5e9, 300e9]), (8, [12.5e9, 300e9, 300e9]),
                                                 (8, [300e9, 12.5e9, 300e9])])
def test_hierarchy_maps_the_first_cut_to_the_slowest_link(devices, bandwidths):
    """csrc/search/kcuts.cc: bandwidths in any order; the first cut, the cheapest, crosses the
    slowest link (Soybean Sec 5.1)."""
    p = at.plan("mlp", devices=devices, batch=8, bandwidths=bandwidths)
    assert p.bandwidths == bandwidths
    assert p.comm_bytes == pytest.approx(sum(p.cut_costs))
    slowest_first = sorted(bandwidths)
    assert p.weighted_cost == pytest.approx(_weighted(p.cut_costs, slowest_first), rel=1e-12)
    # The first cut is the cheapest, so giving it the slow link is the best assignment.
    assert p.cut_costs[0] == min(p.cut_costs)
    best = min(_weighted(p.cut_costs, perm) for perm in itertools.permutations(bandwidths))
    assert p.weighted_cost == pytest.approx(best, rel=1e-12)
    # the same plan without bandwidths (and without tofu's refinement across cuts, which
    # bandwidths turn off) moves the same bytes; its weighted cost is the byte count
    flat = at.plan("mlp", devices=devices, batch=8, refine=False)
    assert flat.weighted_cost == pytest.approx(flat.comm_bytes)
    assert flat.cut_costs == pytest.approx(p.cut_costs)


def test_bandwidths_need_one_entry_per_cut():
    # 2 x 4 devices is three 2-way cuts: a 2-level hierarchy needs a bandwidth for each cut
    with pytest.raises(Error, match="2 entries but the plan has 3 cuts"):
        at.plan("mlp", devices=8, batch=8, bandwidths=[12.5e9, 300e9])
    with pytest.raises(Error, match="positive"):
        at.plan("mlp", devices=4, batch=8, bandwidths=[12.5e9, 0])


# ----------------------------------------------------------------------------- inputs

def test_batch_for_a_zoo_name_equals_explicit_shapes():
    by_batch = at.plan("mlp", devices=4, batch=8)
    by_shapes = at.plan("mlp", devices=4, shapes={"data": (8, 8192), "softmax_label": (8,)})
    assert by_batch.input_shapes == {"data": (8, 8192), "softmax_label": (8,)} == by_shapes.input_shapes
    assert by_batch.tensor_tilings == by_shapes.tensor_tilings
    assert by_batch.comm_bytes == by_shapes.comm_bytes
    assert by_batch.batch == by_shapes.batch == 8
    both = at.plan("mlp", devices=4, batch=8, shapes={"data": (8, 8192), "softmax_label": (8,)})
    assert both.comm_bytes == by_batch.comm_bytes
    # a different batch is a different problem
    assert at.plan("mlp", devices=4, batch=16).input_shapes["data"] == (16, 8192)


def _symbol_mlp(declared=(0, 20), label=(0,)):
    """MXNet style: 0 marks the unknown batch dim of a declared shape."""
    data = at.sym.Variable("data", shape=declared) if declared else at.sym.Variable("data")
    lab = at.sym.Variable("softmax_label", shape=label) if label else at.sym.Variable("softmax_label")
    fc1 = at.sym.FullyConnected(data, num_hidden=16, name="fc1")
    act = at.sym.Activation(fc1, act_type="relu", name="relu1")
    fc2 = at.sym.FullyConnected(act, num_hidden=4, name="fc2")
    return at.sym.SoftmaxOutput(fc2, lab, name="softmax")


@pytest.mark.parametrize("declared, label", [((0, 20), (0,)), ((9, 20), (9,))])
def test_batch_sets_dim_0_of_a_symbols_data_inputs(declared, label):
    net = _symbol_mlp(declared, label)
    p = at.plan(net, devices=2, batch=6)
    assert p.input_shapes == {"data": (6, 20), "softmax_label": (6,)}
    assert p.batch == 6
    assert p.tensor_shapes["fc1_weight"] == (16, 20)
    q = at.plan(_symbol_mlp(None, None), devices=2, shapes={"data": (6, 20), "softmax_label": (6,)})
    assert q.tensor_tilings == p.tensor_tilings and q.comm_bytes == p.comm_bytes
    assert at.transform(net, p).devices == 2


def test_symbol_without_shapes_names_the_input():
    with pytest.raises(Error, match="input 'data' is unknown"):
        at.plan(_symbol_mlp(None, None), devices=2, batch=4)
    with pytest.raises(Error, match="input 'data' is unknown"):
        at.plan(_symbol_mlp((0, 20)), devices=2)  # the unknown batch and no batch=
    with pytest.raises(Error, match="input 'softmax_label' is unknown"):
        at.plan(_symbol_mlp((0, 20), None), devices=2, batch=4)


# ----------------------------------------------------------------------------- errors

@pytest.mark.parametrize("devices", [0, -3, 2.0, "4", True, None, [2]])
def test_bad_devices(devices):
    with pytest.raises(Error, match="devices"):
        at.plan(SMALL, devices=devices, batch=8)


@pytest.mark.parametrize("devices", [4097, 2 ** 31 - 1, 2 ** 40])
def test_absurd_device_counts_are_refused(devices):
    with pytest.raises(Error, match="devices"):
        at.plan(SMALL, devices=devices, batch=8)


def test_unknown_algorithm_lists_the_choices():
    with pytest.raises(Error) as info:
        at.plan(SMALL, devices=2, batch=8, algorithm="magic")
    msg = str(info.value)
    assert "'magic'" in msg
    for name in ALGORITHMS:
        assert name in msg


@pytest.mark.parametrize("batch", [0, -1, 2.5, "8"])
def test_bad_batch(batch):
    with pytest.raises(Error, match="batch"):
        at.plan(SMALL, devices=2, batch=batch)


def test_batch_contradicting_shapes_names_the_input():
    with pytest.raises(Error, match=r"batch=8 .*\(4, 64\).*'data'"):
        at.plan(SMALL, devices=2, batch=8, shapes={"data": (4, 64), "softmax_label": (4,)})


def test_shapes_naming_a_non_input():
    with pytest.raises(Error, match="'fc1_output', which is not an input"):
        at.plan(SMALL, devices=2, batch=8, shapes={"fc1_output": (8, 64)})


def test_unknown_model_names_the_known_ones():
    with pytest.raises(Error, match="unknown model 'resnot'.*mlp.*alexnet"):
        at.plan("resnot", devices=2, batch=8)
    with pytest.raises(Error, match="model must be"):
        at.plan(42, devices=2, batch=8)


_NO_TDL_OP = "_TestPlanAPINoTDL_7f3c"


def _no_tdl_model(monkeypatch):
    """The test op is registered for this test only (monkeypatch removes it after): left in the
    registry it would be one more op every later registry-wide check must cover."""
    from autotile.ops import registry

    registry.exists(_NO_TDL_OP)  # loads the registry before adding to it
    monkeypatch.setitem(registry._REGISTRY, _NO_TDL_OP, registry.OpDef(
        name=_NO_TDL_OP, infer_shape=lambda attrs, s: ([s[0]], [s[0]]),
        forward=lambda attrs, ins, ctx: [ins[0].copy()],
        gradient=lambda ctx: [ctx.out_grads[0]],  # identity: no backward node needed
        elementwise=True, doc="test op without a TDL description"))
    data = at.sym.Variable("data")
    fc = at.sym.FullyConnected(data, num_hidden=8, name="fc1")
    odd = at.sym.create(_NO_TDL_OP, fc, name="oddball")
    return at.sym.SoftmaxOutput(odd, name="softmax")


def test_op_without_tdl_is_named_and_replicate_fallback_plans_it(monkeypatch):
    net = _no_tdl_model(monkeypatch)
    shapes = {"data": (4, 12), "softmax_label": (4,)}
    with pytest.raises(Error) as info:
        at.plan(net, devices=2, shapes=shapes)
    assert "oddball" in str(info.value) and _NO_TDL_OP in str(info.value)
    assert "replicate_fallback" in str(info.value)
    p = at.plan(net, devices=4, shapes=shapes, replicate_fallback=True)
    assert p.strategy("oddball") == "replicate replicate"
    assert p.tiling("oddball_output") == "replicate replicate"
    assert p.node_ops["oddball"] == _NO_TDL_OP


def test_bruteforce_on_a_large_model_fails_fast():
    import time

    t0 = time.perf_counter()
    with pytest.raises(Error, match="bruteforce.*combinations"):
        at.plan("vgg16", devices=2, batch=8, algorithm="bruteforce")
    assert time.perf_counter() - t0 < 10


def test_bruteforce_agrees_with_tofu_on_a_tiny_model():
    assert at.plan("mlp-1-8", devices=2, batch=4, algorithm="bruteforce").comm_bytes == \
        pytest.approx(at.plan("mlp-1-8", devices=2, batch=4).comm_bytes)


def test_every_algorithm_costs_at_least_the_exact_one_cut_search():
    """On 2 devices (one cut) the DP is exact, so no baseline moves fewer bytes."""
    best = at.plan(SMALL, devices=2, batch=8)
    for algo in ALGORITHMS:
        if algo == "bruteforce":
            continue
        p = at.plan(SMALL, devices=2, batch=8, algorithm=algo)
        assert p.algorithm == algo
        assert p.comm_bytes >= best.comm_bytes * (1 - 1e-12), algo


def test_transform_refuses_a_plan_for_another_graph():
    plan = at.plan(SMALL, devices=2, batch=8)
    eg = at.transform(SMALL, plan)  # its own graph: fine
    assert eg.devices == 2
    with pytest.raises(Error, match="another graph.*not in it"):
        at.transform("mlp-3-64", plan)
    with pytest.raises(Error, match="other shapes.*'fc1_weight'"):
        at.transform("mlp-2-32", plan)
