"""``autotile.backend``: run a model on one or more devices."""
from .run import Result, run

__all__ = ["Result", "run"]
