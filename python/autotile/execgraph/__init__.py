"""``autotile.transform``: turn a Plan into the per-device execution graph."""
from .graph import ExecGraph, transform

__all__ = ["ExecGraph", "transform"]
