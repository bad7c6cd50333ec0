"""Zoo models plan with the exact search (the one-cut DP used to refuse ResNets and RNNs:
wide BFS frontiers, a SliceChannel with 20 outputs). One cut is exact, so on 2 devices the
search never costs more than the data-parallel plan, a restriction of the same cut problem;
on 8 devices the first cut is again the same problem for both (checked where the data
baseline applies)."""
import pytest

import autotile as at

MODELS = [("wresnet-50-1", 2), ("rnn-2-1", 8), ("alexnet", 8), ("vgg16", 8)]


@pytest.mark.parametrize("devices", [2, 8])
@pytest.mark.parametrize("model,batch", MODELS)
def test_zoo_model_plans(model, batch, devices):
    plan = at.plan(model, devices=devices, batch=batch, algorithm="tofu", replicate_fallback=True)
    assert plan.factors == [2] * (devices.bit_length() - 1)
    assert len(plan.cut_costs) == len(plan.factors)
    assert plan.comm_bytes == pytest.approx(sum(plan.cut_costs))
    assert all(c >= 0 for c in plan.cut_costs)
    assert plan.num_groups > 0 and plan.num_levels > 0
    assert all(len(t) == len(plan.factors) for t in plan.tensor_tilings.values())
    if model not in ("alexnet", "vgg16"):
        return  # the data baseline needs dim 0 to be the batch (RNN) and batch-split BatchNorm
    data = at.plan(model, devices=devices, batch=batch, algorithm="data", replicate_fallback=True)
    assert plan.cut_costs[0] <= data.cut_costs[0] * (1 + 1e-9)
    if devices == 2:
        assert plan.comm_bytes <= data.comm_bytes * (1 + 1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("model,batch", [("wresnet-152-10", 8), ("rnn-10-8k", 512)])
def test_papers_big_models_plan_on_8_devices(model, batch):
    # Tofu Table 1's models (bench/search_time.py times them).
    plan = at.plan(model, devices=8, batch=batch, algorithm="tofu", replicate_fallback=True)
    assert plan.factors == [2, 2, 2]
    assert 0 < plan.comm_bytes
