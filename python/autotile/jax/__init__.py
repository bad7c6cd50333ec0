"""``autotile.jax``: a plan taken to JAX (needs ``autotile[jax]``).

    planned = autotile.jax.plan(loss_fn, params, x, y, mesh={"data": 2, "model": 4})
    planned.shardings, planned.step(params, x, y), planned.plan     # a JAX function planned

    step = autotile.jax.training_step(net, plan)          # jitted on a Mesh from the plan
    outputs, new_params = step(params, inputs)
    text = step.lower(params, inputs).compile().as_text()
    autotile.jax.collective_bytes(text, plan.devices)      # in plan.comm_bytes' accounting
    autotile.jax.compiled_bytes_by_tensor(autotile.jax.collectives(text, 8), step.scope_names)
    autotile.jax.plan_bytes_by_tensor(step.exec_graph)     # the plan's, per tensor
"""
from .attribution import compiled_bytes_by_tensor, differences, plan_bytes_by_tensor
from .collectives import collective_bytes, collectives
from .function_plan import JaxPlan, plan
from .step import TrainingStep, mesh_of, training_step

__all__ = ["JaxPlan", "TrainingStep", "collective_bytes", "collectives", "compiled_bytes_by_tensor", "differences",
           "mesh_of", "plan", "plan_bytes_by_tensor", "training_step"]
