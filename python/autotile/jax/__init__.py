"""``autotile.jax``: a plan taken to JAX (needs ``autotile[jax]``).

    step = autotile.jax.training_step(net, plan)          # jitted on a Mesh from the plan
    outputs, new_params = step(params, inputs)
    text = step.lower(params, inputs).compile().as_text()
    autotile.jax.collective_bytes(text)                    # in plan.comm_bytes' accounting
"""
from .collectives import collective_bytes, collectives
from .step import TrainingStep, mesh_of, training_step

__all__ = ["TrainingStep", "collective_bytes", "collectives", "mesh_of", "training_step"]
