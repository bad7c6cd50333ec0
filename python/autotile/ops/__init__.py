"""Operator registry and the operator families (one module per family)."""
from .registry import KernelContext, OpDef, Param, all_ops, exists, get, parse_attrs, register

__all__ = ["KernelContext", "OpDef", "Param", "all_ops", "exists", "get", "parse_attrs", "register"]
