"""``autotile.backend``: run a model on one or more devices."""
from .result import Result
from .run import run

__all__ = ["Result", "run"]
