"""tofu's refinement of the recursive plan across its cuts (csrc/search/cut_refine.h, issue 24).

Each cut of the recursion is exact given the earlier ones, yet the whole plan need not be: on
the graphs below the recursion alone (``refine=False``) is 4-12.5% above the best plan. The
oracles are computed at test time: the joint integer program of all cuts
(planner/ilp_joint.py, HiGHS; its plan priced back by the core's price_plan), and where that
program is too large, the plan of the per-cut ILP (algorithm "ilp"). The refined plan must be
within 1% of the proven joint optimum (never below it: that would be a pricing bug), never
dearer than the recursion's, priced by price_plan to its own cut costs, and honour pins."""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autotile import _core, models
from autotile.planner import lowered_training_graph
from autotile.planner.ilp_joint import joint_optimum

from .graphs import mlp
from .random_graphs import RandomGraph


def _tiny(model, layers=1):
    """A `model` (gpt2, bert, llama) of d_model 64, 4 heads, seq 16, batch 8, vocab 256 (issue 24's
    tiny configurations)."""
    sizes = {"d_ff": 128} if model == "llama" else {"positions": 16}
    sym = models.get(model, batch=8, layers=layers, d_model=64, heads=4, seq=16, vocab=256, **sizes)
    return lowered_training_graph(sym, replicate_fallback=True)[3].core


def _plans(core, devices, **kw):
    """(the recursion's plan, the refined plan) of tofu."""
    return (_core.plan_graph(core, devices, "tofu", refine=False, **kw),
            _core.plan_graph(core, devices, "tofu", **kw))


def _check_against_joint(core, devices, recursion_above, time_limit=300, **kw):
    recursion, refined = _plans(core, devices, **kw)
    joint = joint_optimum(core, devices, time_limit=time_limit, **kw)
    assert joint["optimal"], joint
    best = joint["total_bytes"]
    assert recursion["total_bytes"] > best * (1 + recursion_above)  # the case is still a case
    assert best * (1 - 1e-9) <= refined["total_bytes"] <= best * 1.01
    priced = _core.price_plan(core, devices, refined["tensor_tilings"], refined["node_strategies"], **kw)
    assert priced["cut_costs"] == pytest.approx(refined["cut_costs"], rel=1e-12)
    return recursion, refined, joint


@pytest.mark.parametrize("devices, recursion_above", [(4, 0.12), (8, 0.06)])
def test_three_layer_mlp_reaches_the_joint_optimum(devices, recursion_above):
    # batch 16, 32 units: the first cut has tied optima, and the one the recursion keeps makes
    # the second cut dearer (18432 B against the joint optimum's 16384 B at 4 devices)
    b = mlp(3, batch=16, units=32, relu=True)
    recursion, refined, joint = _check_against_joint(b.g, devices, recursion_above, strategy_provider=b.mock)
    if devices == 4:
        assert recursion["cut_costs"] == [8192.0, 10240.0]
        assert refined["total_bytes"] == joint["total_bytes"] == 16384.0


def test_one_layer_gpt2_reaches_the_joint_optimum():
    # the recursion keeps the cheapest first cut (the batch split); the joint optimum pays more
    # at the first cut and less at the second, which no tie-break of the first cut can reach
    core = _tiny("gpt2")
    recursion, refined, joint = _check_against_joint(core, 4, 0.05, replicate_fallback=True)
    assert refined["cut_costs"][0] > recursion["cut_costs"][0]


@pytest.mark.slow
@pytest.mark.parametrize("model, recursion_above", [("bert", 0.08), ("llama", 0.12)])
def test_one_layer_bert_and_llama_reach_the_joint_optimum(model, recursion_above):
    # LLaMA's optimum has its backward pass in the other cut order and 119 tensors laid out
    # otherwise: reached from the second start (the recursion's plan with its cuts exchanged)
    _check_against_joint(_tiny(model), 4, recursion_above, replicate_fallback=True)


@pytest.mark.slow
def test_one_layer_bert_on_8_devices_reaches_the_joint_optimum():
    # three cuts; the recursion is 15% above the optimum (HiGHS proves it in 0.5-3 minutes). The
    # optimum splits the attention's batch at the first two cuts and its heads at the last, the
    # recursion heads first: the cut-by-cut moves and whole-plan reorders stopped 8.4% above
    # (1,470,992 against 1,357,584 B). Reaching it takes the cut-orders move (each layer its own
    # order of the cuts, the weights' gradients and updates re-laid out with it) after starts
    # in other cut orders that the old restarts dropped (a permuted plan names strategies a
    # node lacks at the new shapes: now projected onto a valid plan).
    _check_against_joint(_tiny("bert"), 8, 0.15, time_limit=900, replicate_fallback=True)


@pytest.mark.slow
@pytest.mark.parametrize("model, recursion_above", [("gpt2", 0.17), ("llama", 0.21)])
def test_one_layer_gpt2_and_llama_on_8_devices_reach_the_joint_optimum(model, recursion_above):
    # three cuts; the recursion is 17% (GPT-2) and 22% (LLaMA) above the optimum (HiGHS proves
    # it in 2-4 minutes). The refinement stopped 4.7% and 5.3% above (2,050,624 against
    # 1,958,784 B; 1,968,640 against 1,870,336 B): the cut-orders move, whose neighbourhood
    # holds a better plan, was too wide for the DP here (2^23.8 table entries against 2^22) and
    # never made, and on LLaMA the restarts spent the whole budget before it. Now a move too
    # wide is made over each tensor's and node's 12 candidates of least lower bound, and the
    # restarts leave 40% of the budget to it.
    _check_against_joint(_tiny(model), 8, recursion_above, time_limit=900, replicate_fallback=True)


def test_refinement_keeps_the_joint_optimum():
    # the joint optimum is a fixed point of every move (each is exact over its neighbourhood and
    # kept only when it lowers the total): refining it from there gives it back
    b = mlp(3, batch=16, units=32, relu=True)
    joint = joint_optimum(b.g, 8, strategy_provider=b.mock, time_limit=120)
    assert joint["optimal"]
    again = _core.price_plan(b.g, 8, joint["tensor_tilings"], joint["node_strategies"], strategy_provider=b.mock,
                             refine=True)
    assert again["algorithm"] == "refined"
    assert again["total_bytes"] == pytest.approx(joint["total_bytes"], rel=1e-12)


def test_refinement_from_a_given_plan_never_raises_its_cost():
    # the recursion's plan of tiny GPT-2 on 8 devices with its cuts in every other order that
    # prices (starts the refinement may take): refined from each, the end is never dearer,
    # prices to its own cut costs, and is within 5% of tofu's own refined plan (the ends are
    # 0-4.0% above the joint optimum, 1,958,784 B, and tofu's plan 0.013%; before the
    # truncated wide moves tofu's plan was 4.7% above it and the ends within 1% of that, so
    # the bound in bytes is lower than it was)
    core = _tiny("gpt2")
    recursion, refined = _plans(core, 8, replicate_fallback=True)
    tried = 0
    for perm in ((0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)):
        tilings = [[seq[j] for j in perm] for seq in recursion["tensor_tilings"]]
        strategies = [[seq[j] for j in perm] for seq in recursion["node_strategies"]]
        try:
            start = _core.price_plan(core, 8, tilings, strategies, replicate_fallback=True)
        except Exception as e:  # a strategy the node lacks at the shapes this order leaves
            assert "has no strategy" in str(e) or "cannot be" in str(e), e
            continue
        tried += 1
        end = _core.price_plan(core, 8, tilings, strategies, replicate_fallback=True, refine=True)
        assert end["total_bytes"] <= start["total_bytes"] * (1 + 1e-12)
        priced = _core.price_plan(core, 8, end["tensor_tilings"], end["node_strategies"], replicate_fallback=True)
        assert priced["cut_costs"] == pytest.approx(end["cut_costs"], rel=1e-12)
        assert end["total_bytes"] <= refined["total_bytes"] * 1.05
    assert tried >= 1


def test_two_layer_gpt2_on_8_devices_is_not_above_the_per_cut_ilp():
    # three cuts: the joint program finds no solution in minutes; the per-cut ILP keeps other
    # tied optima than the DP and ends 4% below the recursion
    core = _tiny("gpt2", layers=2)
    recursion, refined = _plans(core, 8, replicate_fallback=True)
    per_cut_ilp = _core.plan_graph(core, 8, "ilp", replicate_fallback=True)
    assert recursion["total_bytes"] > per_cut_ilp["total_bytes"] * 1.03
    assert refined["total_bytes"] <= per_cut_ilp["total_bytes"] * 1.01


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), devices=st.sampled_from([4, 8]))
def test_refined_plan_lies_between_the_joint_optimum_and_the_recursion(data, devices):
    b = RandomGraph(data, max_ops=6).b
    recursion, refined = _plans(b.g, devices, strategy_provider=b.mock)
    assert refined["total_bytes"] <= recursion["total_bytes"] * (1 + 1e-12)
    priced = _core.price_plan(b.g, devices, refined["tensor_tilings"], refined["node_strategies"],
                              strategy_provider=b.mock)
    assert priced["cut_costs"] == pytest.approx(refined["cut_costs"], rel=1e-12)
    joint = joint_optimum(b.g, devices, strategy_provider=b.mock, time_limit=60)
    if joint["optimal"]:
        assert refined["total_bytes"] >= joint["total_bytes"] * (1 - 1e-9) - 1e-6


def test_refinement_honours_pinned_layouts():
    # every weight pinned replicated at both cuts: whatever the refinement moves, they stay
    b = mlp(3, batch=16, units=32, relu=True)
    pinned = [None] * b.g.num_tensors
    weights = [t for t in range(b.g.num_tensors) if b.g.tensor(t)["is_param"]]
    for t in weights:
        pinned[t] = ["replicate", "replicate"]
    plan = _core.plan_graph(b.g, 4, "tofu", strategy_provider=b.mock, pinned=pinned)
    for t in weights:
        assert plan["tensor_tilings"][t] == ["replicate", "replicate"]
    recursion = _core.plan_graph(b.g, 4, "tofu", strategy_provider=b.mock, pinned=pinned, refine=False)
    assert plan["total_bytes"] <= recursion["total_bytes"]


def test_bandwidths_keep_the_recursions_plan():
    # with links the cheapest cut must cross the slowest one (Soybean Sec 5.1), which the
    # recursion's non-decreasing cuts give: no refinement then
    b = mlp(3, batch=16, units=32, relu=True)
    recursion = _core.plan_graph(b.g, 4, "tofu", strategy_provider=b.mock, refine=False)
    with_links = _core.plan_graph(b.g, 4, "tofu", bandwidths=[10e9, 100e9], strategy_provider=b.mock)
    assert with_links["cut_costs"] == recursion["cut_costs"] == [8192.0, 10240.0]


# A preloaded __cxa_throw that aborts: any C++ exception thrown in the process ends it (SIGABRT).
_THROW_ABORTS = """#include <cstdlib>
extern "C" void __cxa_throw(void*, void*, void (*)(void*)) { std::abort(); }
"""

# The GPU test's sequence (tests/gpu/test_gpu_device.py::test_training_step_matches_numpy): the
# execution-test models' training graphs planned on 1, 2, 4 and 8 devices, one line each.
_PLAN_MODELS = """
import importlib.util, sys
import autotile as at
spec = importlib.util.spec_from_file_location("exec_models", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
for model in ["mlp", "cnn", "residual", "concat", "lstm", "bn"]:
    sym, shapes, _ = m.MODELS[model]()
    for devices in [1, 2, 4, 8]:
        plan = at.plan(sym, devices=devices, shapes=shapes, train=True)
        print(model, devices, plan.comm_bytes, sorted(plan.tensor_tilings.items()), flush=True)
"""


def test_refinement_takes_no_exception_on_its_normal_path(tmp_path):
    # Issue 31: a fresh build of the core on another machine (GCC 13) died with SIGSEGV inside
    # plan_graph at the residual model's training graph on 8 devices, the first case of the GPU
    # test's sequence in which the core threw a C++ exception (a WidthError of the refinement's
    # wide move: a neighbourhood 4.25e6 entries wide against its 2^22 limit, caught to truncate
    # it). Too wide is a normal outcome of a move, so the refinement asks the DP to report it
    # (WidthPolicy::kReport) instead: planned in a process where any C++ throw aborts, every
    # case plans, and to the same plans as here (the refined ones: residual on 8 devices moves
    # 17,296 bytes, the recursion alone 17,984).
    import os
    import shutil
    import subprocess
    import sys

    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if not cxx:
        pytest.skip("no C++ compiler to build the throw-aborts preload")
    src, lib = tmp_path / "throw_aborts.cc", tmp_path / "libthrow_aborts.so"
    src.write_text(_THROW_ABORTS)
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}  # (the compiler runs plain)
    res = subprocess.run([cxx, "-shared", "-fPIC", "-O1", str(src), "-o", str(lib)], capture_output=True, text=True,
                         env=env)
    assert res.returncode == 0, res.stderr
    models_py = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "execgraph", "models.py")
    script = tmp_path / "plan_models.py"
    script.write_text(_PLAN_MODELS)
    plain = subprocess.run([sys.executable, str(script), models_py], capture_output=True, text=True, timeout=600)
    assert plain.returncode == 0, plain.stderr[-3000:]
    # (a sanitizer runtime preloaded by the caller stays first)
    env = dict(os.environ, LD_PRELOAD=" ".join(filter(None, [os.environ.get("LD_PRELOAD", ""), str(lib)])))
    aborting = subprocess.run([sys.executable, str(script), models_py], capture_output=True, text=True,
                              timeout=600, env=env)
    last = (aborting.stdout.strip().splitlines() or ["(none)"])[-1][:40]
    assert aborting.returncode == 0, f"a C++ exception was thrown after the case {last}: {aborting.stderr[-2000:]}"
    assert aborting.stdout == plain.stdout
    residual_8 = [line for line in plain.stdout.splitlines() if line.startswith("residual 8 ")]
    assert residual_8 and residual_8[0].split()[2] == "17296.0"
