"""``autotile.backend``: run a model on one or more devices."""
from .result import Result
from .run import run
from .training_step import training_step

__all__ = ["Result", "run", "training_step"]
