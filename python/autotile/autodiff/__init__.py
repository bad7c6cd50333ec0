"""``autotile.autodiff``: the training graph (forward + backward + update) of a model, and
what a training step is fed. It builds graphs only; :func:`autotile.backend.training_step`
runs one on a single device.

    tg = at.autodiff.training_graph(sym, optimizer="momentum")
    tg.symbol            # outputs: forward outputs, param gradients, new params, new states
    tg.backward_of       # backward node -> forward node (op groups, Tofu Sec 5.1)
    tg.gradient_of       # gradient entry -> forward entry (tensor groups)
    res = at.backend.training_step(sym, values, param_names)
    msym = at.autodiff.autocast(sym, "bfloat16")   # mixed precision: casts in the graph
"""
from .mixed_precision import autocast
from .graph import TrainingGraph, default_data_names, inference_graph, training_graph
from .optimizers import OPTIMIZERS, optimizer_spec
from .step import feed_values, trainable_params

__all__ = ["OPTIMIZERS", "TrainingGraph", "autocast", "default_data_names", "feed_values", "inference_graph", "optimizer_spec",
           "trainable_params", "training_graph"]
