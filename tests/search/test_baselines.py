"""Baselines of issue 3 (csrc/search/baselines): every plan is valid, priced by the shared
cost model, never cheaper than the `tofu` search, and its cuts obey Tofu App. A's
delta_i <= delta_(i+1); closed forms for `model` on an MLP and `owt` on a conv+fc net."""
import pytest

from autotile import _core
from autotile.errors import Error

from .graphs import Builder, conv_net, mlp, residual

BASELINES = ["soybean", "model", "owt", "hypar", "spartan", "allrow", "equalchop", "icml18"]
EPS = 1e-6


# Tofu App. A, Theorem 2 (delta_i <= delta_(i+1) for equal k) rests on per-step optimality
# over a search space that is the same at every step: swapping steps i and i+1 costs the
# same (Theorem 1), so a cheaper later step could have been taken earlier. It holds for the
# exact DP (tofu, soybean) and for EqualChop (a later step repeats first-step tilings, which
# step i could take). The other baselines break the premise: spartan and allrow are greedy
# per step, and model/owt/hypar/icml18 change what a step may do with the shrunk shapes
# (pinned split dims fall back once they stop dividing, HyPar re-decides dp/mp per level,
# icml18 admits reductions only where a node has no other split), so they may violate it;
# test_theorem2_needs_optimal_steps shows one case.
THEOREM2 = {"tofu", "soybean", "equalchop", "data"}


def check_valid(plan, g, devices, provider=None):
    """Structure, even splits at every cut, Tofu App. A (Theorem 2) between cuts of equal k
    where its premise holds, and the same cut costs when price_plan prices the plan anew."""
    factors = plan["factors"]
    assert factors == _core.factorize(devices)
    cuts = len(factors)
    assert len(plan["tensor_tilings"]) == g.num_tensors and len(plan["node_strategies"]) == g.num_nodes
    assert plan["total_bytes"] == pytest.approx(sum(plan["cut_costs"]))
    for t, tilings in enumerate(plan["tensor_tilings"]):
        assert len(tilings) == cuts
        shape = list(g.tensor(t)["shape"])
        for k, tl in zip(factors, tilings):
            assert tl in ("replicate", "partial") or tl.startswith("split(")
            if tl.startswith("split("):
                d = int(tl[6:-1])
                assert shape[d] % k == 0, (g.tensor(t)["name"], tilings)
                shape[d] //= k
    for i in range(cuts - 1):
        if factors[i] == factors[i + 1] and plan["algorithm"] in THEOREM2:
            assert plan["cut_costs"][i] <= plan["cut_costs"][i + 1] + EPS, plan["cut_costs"]
    kw = {"strategy_provider": provider} if provider else {}
    priced = _core.price_plan(g, devices, plan["tensor_tilings"], plan["node_strategies"], **kw)
    assert priced["cut_costs"] == pytest.approx(plan["cut_costs"])


GRAPHS = {
    "mlp": lambda: mlp(3, 64, 32, relu=True),
    "conv": lambda: conv_net(16, 8, 32),
    "residual": lambda: residual(32, 16),
    "soybean-mlp": lambda: mlp(5, 400, 320),
}


@pytest.mark.parametrize("graph", sorted(GRAPHS))
@pytest.mark.parametrize("devices", [2, 4, 8])
def test_baselines_valid_and_not_below_tofu(graph, devices):
    b = GRAPHS[graph]()
    tofu = _core.plan_graph(b.g, devices, "tofu", strategy_provider=b.mock)
    for algo in BASELINES:
        plan = _core.plan_graph(b.g, devices, algo, strategy_provider=b.mock)
        assert plan["algorithm"] == algo
        check_valid(plan, b.g, devices, b.mock)
        assert plan["total_bytes"] >= tofu["total_bytes"] - EPS, (algo, plan["total_bytes"], tofu["total_bytes"])


def test_every_algorithm_is_registered():
    from autotile.planner import ALGORITHMS

    b = mlp(2, 8, 8)
    for algo in ALGORITHMS:
        _core.plan_graph(b.g, 2, algo, strategy_provider=b.mock)


@pytest.mark.parametrize("devices", [2, 4, 8, 16])
def test_model_parallel_mlp_closed_form(devices):
    # Weights split on the input dim (HyPar's model parallelism): each fc's forward leaves its
    # output as partial sums, reduce-scattered into feature slabs ((K-1)|y|), and the
    # backward needs the whole output gradient, all-gathered from its slabs ((K-1)|y|).
    # Weights and their gradients never move, the input x_0 and the scalar loss are free:
    # 2 (K-1) * sum of the layers' output bytes, whatever the batch.
    for layers, batch, units in ((3, 8, 64), (5, 400, 320), (2, 64, 16)):
        b = mlp(layers, batch, units)
        plan = _core.plan_graph(b.g, devices, "model", strategy_provider=b.mock)
        assert plan["total_bytes"] == pytest.approx(2 * (devices - 1) * layers * batch * units * 4)
        for t, tilings in enumerate(plan["tensor_tilings"]):
            info = b.g.tensor(t)
            if info["is_param"] or (info["gradient_of"] >= 0 and b.g.tensor(info["gradient_of"])["is_param"]):
                assert set(tilings) == {"split(1)"}, (info["name"], tilings)


def conv_fc_net(batch, channels, length, out_units, conv_layers=2):
    """conv1d layers (op "conv") followed by one fc (op "fc") reading the 3-D feature map
    whole (a flatten folded into the fc), then the loss."""
    b = Builder()
    x = b.tensor("data", (batch, channels, length))
    stack = []
    for l in range(conv_layers):
        y, f, w = b.conv(f"c{l}", x, channels)
        stack.append((f"c{l}", f, x, w))
        x = y
    W = b.tensor("fc_w", (out_units, channels, length), is_param=True)
    y = b.tensor("fc_y", (batch, out_units))
    f = b.node("fc#fc", [x, W], [y], "x, w -> y: y[n, o] = sum(c, l) { x[n, c, l] * w[o, c, l] }",
               {"out": [["n", "o"]], "red": ["c", "l"], "in": [["n", "c", "l"], ["o", "c", "l"]]})
    dy = b.loss(y)
    dx = b.tensor("fc_dx", (batch, channels, length))
    b.node("fcbd#fc", [dy, W], [dx], "dy, w -> dx: dx[n, c, l] = sum(o) { dy[n, o] * w[o, c, l] }",
           {"out": [["n", "c", "l"]], "red": ["o"], "in": [["n", "o"], ["o", "c", "l"]]}, "backward", f)
    b.grad(x, dx)
    dW = b.tensor("fc_dw", (out_units, channels, length))
    b.node("fcbw#fc", [dy, x], [dW], "dy, x -> dw: dw[o, c, l] = sum(n) { dy[n, o] * x[n, c, l] }",
           {"out": [["o", "c", "l"]], "red": ["n"], "in": [["n", "o"], ["n", "c", "l"]]}, "backward", f)
    b.grad(W, dW)
    b.sgd("fc", W, dW)
    for name, cf, xin, w in reversed(stack):
        dx = b.conv_backward(name, cf, xin, w, dx, dx_needed=xin != 0)
    return b


@pytest.mark.parametrize("devices", [2, 4, 8])
def test_owt_conv_fc_closed_form(devices):
    # Convolutions data-parallel: the conv weight gradients are all-reduced, 2 (K-1) |W_conv|.
    # The fc model-parallel with its weight split on l (its largest reduction dim): its
    # forward and weight-gradient ops read the batch-split feature map x by l-slabs, and its
    # data-gradient op writes dx by l-slabs that the batch-split conv backward reads back:
    # three conversions split(0) <-> split(2), (K-1)/K |x| each. The fc output comes out
    # partial and is reduce-scattered for the loss ((K-1)|y|), the loss gradient is
    # all-gathered for the two backward ops ((K-1)|y|); the scalar loss stays partial.
    B, C, L, O = 16, 8, 32, 64
    b = conv_fc_net(B, C, L, O)
    plan = _core.plan_graph(b.g, devices, "owt", strategy_provider=b.mock)
    K = devices
    w_conv = 2 * C * C * 3 * 4
    x, y = B * C * L * 4, B * O * 4
    assert plan["total_bytes"] == pytest.approx(2 * (K - 1) * w_conv + 3 * (K - 1) / K * x + 2 * (K - 1) * y)
    names = [b.g.tensor(t)["name"] for t in range(b.g.num_tensors)]
    tiling = dict(zip(names, plan["tensor_tilings"]))
    assert set(tiling["c0_w"]) == set(tiling["c1_w"]) == {"replicate"}
    assert set(tiling["fc_w"]) == {"split(2)"}
    assert set(tiling["c1_y"]) == {"split(0)"}
    check_valid(plan, b.g, devices, b.mock)


def test_allrow_splits_every_tensor_by_rows():
    b = mlp(3, 64, 32, relu=True)
    plan = _core.plan_graph(b.g, 4, "allrow", strategy_provider=b.mock)
    for t, tilings in enumerate(plan["tensor_tilings"]):
        assert set(tilings) == ({"split(0)"} if b.g.tensor(t)["shape"] else {"replicate"})


def test_equalchop_chops_each_tensor_along_one_dim():
    b = mlp(5, 400, 320)
    plan = _core.plan_graph(b.g, 16, "equalchop", strategy_provider=b.mock)
    tofu = _core.plan_graph(b.g, 16, "tofu", strategy_provider=b.mock, refine=False)  # the recursion
    for tilings in plan["tensor_tilings"]:
        splits = {t for t in tilings if t.startswith("split(")}
        assert len(splits) <= 1
        if splits:
            assert set(tilings) == splits  # split at every cut along the same dim
    # the first cut is the unrestricted DP's; Tofu splits some tensor along two dims later
    assert plan["cut_costs"][0] == pytest.approx(tofu["cut_costs"][0])
    assert any(len({t for t in tl if t.startswith("split(")}) > 1 for tl in tofu["tensor_tilings"])
    assert plan["total_bytes"] > tofu["total_bytes"]


def test_icml18_has_no_output_reduction():
    b = mlp(3, 64, 32, relu=True)
    plan = _core.plan_graph(b.g, 8, "icml18", strategy_provider=b.mock)
    for t, tilings in enumerate(plan["tensor_tilings"]):
        assert "partial" not in tilings
    reduction_var = {"fc": "k", "fcbd": "o", "fcbw": "n"}  # graphs.py's fc TDLs
    for n, strategies in enumerate(plan["node_strategies"]):
        op = b.g.node(n)["op"]
        if op in reduction_var:
            assert reduction_var[op] not in strategies
    # the loss sums everything to a scalar: only reductions split it, so it keeps them
    loss = [s for n, s in enumerate(plan["node_strategies"]) if b.g.node(n)["op"] == "loss"][0]
    assert set(loss) <= {"i", "j"}


def test_soybean_is_the_exact_dp_without_coarsening():
    # The DP is exact on each cut whatever the grouping, so Soybean's original search finds
    # plans as cheap as Tofu's; it reports the uncoarsened graph it walked.
    for b in (mlp(3, 64, 32, relu=True), conv_net(16, 8, 32), residual(32, 16)):
        for devices in (2, 4, 8):
            soy = _core.plan_graph(b.g, devices, "soybean", strategy_provider=b.mock)
            tofu = _core.plan_graph(b.g, devices, "tofu", strategy_provider=b.mock, refine=False)
            assert soy["total_bytes"] == pytest.approx(tofu["total_bytes"])
            refined = _core.plan_graph(b.g, devices, "tofu", strategy_provider=b.mock)
            assert refined["total_bytes"] <= soy["total_bytes"] * (1 + 1e-12)
            assert soy["num_groups"] == b.g.num_tensors + b.g.num_nodes > tofu["num_groups"]


def test_theorem2_needs_optimal_steps():
    # Spartan's greedy second cut of this conv chain is dearer than its third: a cheaper step
    # existed at cut 2 that the greedy did not find. The exact DP keeps the order.
    b = conv_net(16, 8, 32)
    costs = _core.plan_graph(b.g, 8, "spartan", strategy_provider=b.mock)["cut_costs"]
    assert costs[1] > costs[2]
    costs = _core.plan_graph(b.g, 8, "tofu", strategy_provider=b.mock, refine=False)["cut_costs"]
    assert costs[0] <= costs[1] <= costs[2]


def test_unknown_algorithm_names_every_baseline():
    b = mlp(2, 8, 8)
    with pytest.raises(Exception) as e:
        _core.plan_graph(b.g, 2, "nope", strategy_provider=b.mock)
    for algo in BASELINES:
        assert algo in str(e.value)


def _batch_dims(g, dims):
    """plan_graph's batch_dims: -1 for every tensor but those named in `dims`."""
    names = [g.tensor(t)["name"] for t in range(g.num_tensors)]
    return [dims.get(n, -1) for n in names]


@pytest.mark.parametrize("devices", [2, 4])
def test_data_splits_the_batch_dim_it_is_given(devices):
    # batch_dims reaches the core (issue 31): the C API's default, the dim 0 of the inputs that
    # share the largest input's, and an explicit dim 0 give the same plan; an explicit dim 1
    # makes data parallelism split the input there and carry it (the FC reduces over it).
    b = mlp(2, 16, 8, relu=True)
    default = _core.plan_graph(b.g, devices, "data", strategy_provider=b.mock)
    given = _core.plan_graph(b.g, devices, "data", strategy_provider=b.mock, batch_dims=_batch_dims(b.g, {"data": 0}))
    assert given["tensor_tilings"] == default["tensor_tilings"]
    data = [b.g.tensor(t)["name"] for t in range(b.g.num_tensors)].index("data")
    assert default["tensor_tilings"][data] == ["split(0)"] * len(default["factors"])
    other = _core.plan_graph(b.g, devices, "data", strategy_provider=b.mock, batch_dims=_batch_dims(b.g, {"data": 1}))
    assert other["tensor_tilings"][data] == ["split(1)"] * len(other["factors"])
    check_valid(other, b.g, devices, b.mock)


def test_data_batch_dims_are_checked():
    b = mlp(2, 16, 8)
    for dims, words in (({"l0_w": 0}, ["weight", "l0_w"]), ({"data": 2}, ["data", "no batch dim 2"]),
                        ({"l0_y": 0}, ["l0_y", "not a graph input"])):
        with pytest.raises(Error) as e:
            _core.plan_graph(b.g, 2, "data", strategy_provider=b.mock, batch_dims=_batch_dims(b.g, dims))
        assert all(w in str(e.value) for w in words), str(e.value)
    with pytest.raises(Error, match="batch_dims has 3 entries"):
        _core.plan_graph(b.g, 2, "data", strategy_provider=b.mock, batch_dims=[0, -1, -1])
