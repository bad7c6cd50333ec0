"""``autotile.torch``: a plan run by PyTorch DTensor (needs ``autotile[torch]``).

    sym = autotile.torch.export(module, x)                 # TorchScript ONNX export, imported
    plan = at.plan(sym, devices=8)
    autotile.torch.parallelize(module, plan, sym)          # under torch.distributed, 8 ranks
    y = module(x)                                          # a DTensor laid out as planned
"""
from .launch import run_local
from .names import ModuleMap, export
from .comm import beside_plan, comm_mode, measure
from .parallel import Parallelized, device_mesh, match_parameters, parallelize, plan_layout
from .step_check import compare_step, sgd_step

__all__ = ["ModuleMap", "Parallelized", "beside_plan", "comm_mode", "compare_step", "device_mesh", "export",
           "match_parameters", "measure", "parallelize", "plan_layout", "run_local", "sgd_step"]
