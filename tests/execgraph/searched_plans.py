"""Plans the search makes on small zoo Transformers, for the execution-graph tests that compare
builds of them (tests/execgraph/test_arena_only.py, test_device_classes.py)."""
import autotile as at
from autotile import _core
from autotile.planner import lowered_training_graph as lowered_of


def searched_transformer(model, devices, weight, layers):
    """(lowered graph, raw tofu plan at memory weight `weight` on `devices`) of a small zoo
    Transformer (`model`: llama-7b, gpt2 or bert-base shapes) of `layers` equal layers."""
    cfg = dict(layers=layers, d_model=64, heads=4, seq=16, batch=8, vocab=128)
    if model == "llama-7b":
        cfg.update(d_ff=96)
    low = lowered_of(at.models.get(model, **cfg))[3]
    return low, _core.plan_graph(low.core, devices, "tofu", None, False, memory_weight=weight)
