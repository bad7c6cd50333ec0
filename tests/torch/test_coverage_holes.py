"""Plans DTensor can run (autotile.torch.runnable), each case failing on the code before it:

- ``nn.TransformerEncoderLayer`` under a tofu plan: the packed in-projection split by the plan
  failed inside DTensor on the ranks ("Cannot unflatten unevenly sharded tensor"); the dry
  run at plan time finds the module call and the search plans ``self_attn`` whole.
- The same layer under a data-parallel plan: attention's backward raised NotImplementedError
  on every rank after the whole forward (DTensor has no rule for the CPU flash-attention
  backward); on a CPU mesh attention runs in its math form.
- An op DTensor cannot run even on whole inputs is refused at plan time naming the module
  and the op, not on a rank.

Oracle: the plain module's SGD step (compare_step on gloo ranks)."""
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'autotile[torch]')")
pytest.importorskip("onnx", reason="onnx is not installed (pip install 'autotile[torch]')")
pytest.importorskip("torch.distributed.tensor", reason="this torch has no torch.distributed.tensor")

import torch.nn as nn  # noqa: E402

import autotile as at  # noqa: E402
import autotile.torch as att  # noqa: E402
from autotile.torch.coverage import passes  # noqa: E402
from autotile.torch.families import build  # noqa: E402
from autotile.torch.runnable import dry_run, runnable_plan, whole_rules  # noqa: E402


def _step(module, plan, inputs):
    return att.run_local(lambda rank: att.compare_step(rank, module, plan, plan.torch_model, inputs), plan.devices,
                         timeout=900)


def test_encoder_layer_tofu_plan_fails_in_the_dry_run_and_is_planned_whole():
    m, x = build("nn.TransformerEncoderLayer")
    plan = att.plan(m, x, devices=4, dtensor_check=False)
    failure = dry_run(m, plan, x)
    # the search's own plan splits the packed projection: DTensor cannot run it
    assert failure is not None and failure["phase"] == "forward" and failure["modules"] == ["self_attn"], failure
    assert failure["op"] == "view" and "unevenly sharded" in failure["message"]
    rules = whole_rules(plan, ["self_attn"])
    assert "self_attn.in_proj_weight" in rules and all(v == {} for v in rules.values())
    assert not any(k.startswith("linear") for k in rules)
    fixed = runnable_plan(m, x, devices=4)
    assert fixed.torch_whole == ["self_attn"]
    for name in rules:
        assert set(fixed.tensor_tilings[name]) == {"replicate"}, name
    assert dry_run(m, fixed, x) is None
    # autotile.torch.plan does the same by default: the plan it returns runs under DTensor
    default = att.plan(m, x, devices=4)
    assert default.torch_whole == ["self_attn"] and dry_run(m, default, x) is None


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["tofu", "data"])
def test_encoder_layer_step_equals_the_plain_module(algorithm):
    m, x = build("nn.TransformerEncoderLayer")
    plan = runnable_plan(m, x, devices=4, algorithm=algorithm)
    for r in _step(m, plan, x):
        assert passes(r), (r["diff"], r["scale"], r["worst"])


@pytest.mark.slow
def test_llama_with_grouped_query_attention_trains_on_4_ranks():
    pytest.importorskip("transformers")
    m, x = build("LLaMA (GQA)")
    plan = runnable_plan(m, x, devices=4)
    for r in _step(m, plan, x):
        assert passes(r), (r["diff"], r["scale"], r["worst"])


def test_an_op_dtensor_cannot_run_even_whole_is_refused_at_plan_time(monkeypatch):
    """The refusal path: a dry run that fails in the same module call whether it is split or
    whole (the failure stubbed: an op DTensor runs on no layout is hard to build from ops
    the ONNX import takes) ends in an Error naming the module and the op after one re-plan."""
    import autotile.torch.runnable as runnable

    seen = []

    def failing(module, plan, inputs, timeout=600):
        seen.append(list(plan.torch_whole))
        return {"phase": "backward", "modules": ["fc1"], "op": "cummax_backward", "dtensor": True,
                "message": "NotImplementedError: no sharding strategy"}

    monkeypatch.setattr(runnable, "dry_run", failing)
    from autotile.torch import zoo

    with pytest.raises(at.Error, match=r"cannot run op cummax_backward of module 'fc1' even on whole"):
        runnable.runnable_plan(zoo.MLP(), torch.randn(8, 784), devices=2)
    assert seen == [[], ["fc1"]]
