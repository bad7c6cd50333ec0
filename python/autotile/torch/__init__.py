"""``autotile.torch``: a plan run by PyTorch DTensor (needs ``autotile[torch]``).

    plan = autotile.torch.plan(module, x, loss=F.cross_entropy, target=y, devices=8)
    autotile.torch.parallelize(module, plan)               # under torch.distributed, 8 ranks
    loss = F.cross_entropy(module(x).full_tensor(), y)     # module(x): a DTensor laid out as planned

The lower-level road: ``sym = autotile.torch.export(module, x)``, ``plan = at.plan(sym,
devices=8)``, ``autotile.torch.parallelize(module, plan, sym)``.
"""
from .launch import run_local
from .names import ModuleMap, export
from .comm import beside_plan, comm_mode, measure
from .parallel import Parallelized, device_mesh, match_parameters, parallelize, plan_layout
from .plan import plan
from .step_check import compare_step, sgd_step

__all__ = ["ModuleMap", "Parallelized", "beside_plan", "comm_mode", "compare_step", "device_mesh", "export",
           "match_parameters", "measure", "parallelize", "plan", "plan_layout", "run_local", "sgd_step"]
