"""The operator registry: one :class:`OpDef` per operator type.

An OpDef bundles everything autotile needs to know about an operator (cf. NNVM's
op_attr_types.h): its typed attributes, argument/output/auxiliary names, shape and dtype
inference, a NumPy kernel, a gradient (built from other registered ops, so the backward
pass is itself a graph of registered ops), and its TDL description (docs/tdl.md) from
which the planner derives partition strategies.

Attributes travel as strings (as in MXNet's JSON) and are parsed on demand with
:func:`parse_attrs`, so symbol files round-trip exactly.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import Error

Shape = Tuple[int, ...]

_REGISTRY: Dict[str, "OpDef"] = {}


@dataclass(frozen=True)
class Param:
    """One typed attribute of an op. `kind` is one of: int, float, bool, str, shape,
    optional_int, optional_float, optional_shape, any."""

    kind: str
    default: Any = None
    required: bool = False
    choices: Optional[Sequence[str]] = None


@dataclass
class KernelContext:
    """What a kernel may need beyond its inputs."""

    is_train: bool = False
    aux: List[Any] = field(default_factory=list)  # auxiliary states; kernels may replace entries
    rng: Any = None  # numpy.random.Generator for Dropout etc.
    xp: Any = None  # array module (numpy or cupy); None means numpy
    #: Per-node, per-step seed (see node_key). A kernel that draws random numbers derives them
    #: from it and global element indices, so a partitioned run draws what one device would.
    key: Any = None
    #: The runtime's buffers for the outputs (one per output, the tile's shape and dtype), or
    #: None where the runtime has none to offer (GPU, reference executor). A kernel may write
    #: output i into ``out[i]`` and return that very array: the runtime then skips its copy,
    #: and the output is never held twice (docs/memory.md, "Memory of a run"). The memory
    #: plan may give an output the buffer of an input it reads (in-place reuse), so an
    #: ``out`` array can be that input: take it through :func:`out_array`.
    out: Optional[List[Any]] = None


def out_array(ctx: "KernelContext", i: int, shape, dtype, reads_after=()):
    """``ctx.out[i]`` if the runtime gave a C-contiguous NumPy array of `shape` and `dtype`
    for output i that shares no memory with `reads_after` (inputs the kernel still reads
    once it has begun writing that output), else None (the kernel allocates its output).
    Element-wise ufuncs and matmul handle an output that is one of their own operands, so
    those operands need not be listed."""
    out = ctx.out[i] if ctx is not None and ctx.out is not None and i < len(ctx.out) else None
    if out is None or not isinstance(out, np.ndarray) or not out.flags.c_contiguous:
        return None
    if tuple(out.shape) != tuple(shape) or out.dtype != np.dtype(dtype):
        return None
    if any(x is not None and np.may_share_memory(out, x) for x in reads_after):
        return None
    return out


def same_buffer(a, b) -> bool:
    """Whether arrays a and b are the same memory seen the same way (data, shape, strides,
    dtype): the in-place reuse the memory plan makes, which element-wise code handles."""
    ia, ib = a.__array_interface__, b.__array_interface__
    return (ia["data"][0] == ib["data"][0] and a.shape == b.shape and a.strides == b.strides
            and a.dtype == b.dtype)


def node_key(node_name: str, seed: int = 0) -> int:
    """The random key of node `node_name` in a step seeded `seed` (stable across processes)."""
    import zlib

    return (zlib.crc32(node_name.encode("utf-8")) ^ (int(seed) * 0x9E3779B1)) & 0xFFFFFFFFFFFF


def _default_outputs(attrs):
    return ["output"]


def _no_aux(attrs):
    return []


def _same_dtype(attrs, in_dtypes):
    first = next((d for d in in_dtypes if d is not None), "float32")
    return [first if d is None else d for d in in_dtypes], None


@dataclass
class OpDef:
    """Definition of one operator type.

    - arguments(attrs) -> input names in order (MXNet's list_arguments per node).
    - outputs(attrs) -> output names; aux(attrs) -> auxiliary state names (BatchNorm stats).
    - infer_shape(attrs, in_shapes) -> (in_shapes, out_shapes[, aux_shapes]); `in_shapes`
      entries may be None (unknown); the function fills what it can deduce (weights) and
      raises Error on a mismatch.
    - infer_type(attrs, in_dtypes) -> (in_dtypes, out_dtypes or None = same as input 0).
    - forward(attrs, inputs, ctx) -> list of output arrays.
    - gradient(g, node, out_grads) -> list (one per input) of gradient Symbols or None;
      builds the backward pass from registered ops (see autotile.autodiff).
    - tdl(attrs, in_shapes, out_shapes) -> TDL text (docs/tdl.md) or None.
    - elementwise: output[i...] depends on inputs[i...] only (coarsening merges chains).
    """

    name: str
    params: Dict[str, Param] = field(default_factory=dict)
    arguments: Callable[[dict], List[str]] = lambda attrs: ["data"]
    outputs: Callable[[dict], List[str]] = _default_outputs
    aux: Callable[[dict], List[str]] = _no_aux
    infer_shape: Optional[Callable] = None
    infer_type: Callable = _same_dtype
    forward: Optional[Callable] = None
    gradient: Optional[Callable] = None
    tdl: Optional[Callable] = None
    elementwise: bool = False
    variadic: Optional[str] = None  # attr holding the number of inputs (Concat's num_args)
    #: outputs a Symbol exposes (MXNet's NumVisibleOutputs; BatchNorm has 3 outputs, 1 visible)
    visible_outputs: Optional[Callable[[dict], int]] = None
    ignored_attrs: Sequence[str] = ()  # accepted and ignored (e.g. cudnn_tune)
    doc: str = ""
    #: Optional extra strategies/notes for ops TDL cannot describe; see planner docs.
    extra: Dict[str, Any] = field(default_factory=dict)

    def num_outputs(self, attrs) -> int:
        return len(self.outputs(attrs))

    def num_visible_outputs(self, attrs) -> int:
        return self.visible_outputs(attrs) if self.visible_outputs else self.num_outputs(attrs)


def register(op: OpDef) -> OpDef:
    """Add an operator to the registry (names are unique)."""
    if op.name in _REGISTRY:
        raise ValueError(f"operator {op.name} registered twice")
    _REGISTRY[op.name] = op
    return op


def alias(name: str, target: str) -> None:
    """Register `name` as another name of `target` (MXNet has several, e.g. _Plus)."""
    _REGISTRY[name] = _REGISTRY[target]


def get(name: str, node: str = "") -> OpDef:
    """The OpDef of `name`; Error naming the node if there is none."""
    _ensure_loaded()
    op = _REGISTRY.get(name)
    if op is None:
        where = f" (node '{node}')" if node else ""
        raise Error(f"unknown operator '{name}'{where}")
    return op


def exists(name: str) -> bool:
    _ensure_loaded()
    return name in _REGISTRY


def all_ops() -> Dict[str, OpDef]:
    _ensure_loaded()
    return dict(_REGISTRY)


_loaded = False


def _ensure_loaded():
    global _loaded
    if not _loaded:
        _loaded = True
        from . import _all  # noqa: F401  (imports every op family, which registers them)


# ----------------------------------------------------------------------------- attrs

_TRUE = {"true", "1", "True"}
_FALSE = {"false", "0", "False"}


def _parse_shape(text: str) -> Shape:
    text = text.strip()
    if text in ("()", "[]", ""):
        return ()
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise ValueError(f"not a shape: {text!r}")
    if isinstance(value, int):
        return (value,)
    if not isinstance(value, (tuple, list)) or not all(isinstance(v, int) or v is None for v in value):
        raise ValueError(f"not a shape: {text!r}")
    return tuple(value)


def _parse_value(kind: str, text: str):
    if kind == "any":
        return text
    if kind.startswith("optional_"):
        if text.strip() in ("None", ""):
            return None
        kind = kind[len("optional_"):]
    if kind == "int":
        try:
            return int(text)
        except ValueError:
            number = float(text)
            if not number.is_integer():
                raise ValueError(f"not an integer: {text!r}")
            return int(number)
    if kind == "float":
        return float(text)
    if kind == "bool":
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ValueError(f"not a boolean: {text!r}")
    if kind == "str":
        return text
    if kind == "shape":
        return _parse_shape(text)
    raise ValueError(f"unknown param kind {kind}")


def format_value(value) -> str:
    """Formats a Python attribute value the way MXNet writes it in JSON."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(str(int(v)) if v is not None else "None" for v in value) + ("," if len(value) == 1 else "") + ")"
    return str(value)


# Parsed attributes by (op, raw attributes): a large graph has thousands of nodes sharing a
# few attribute sets, and planning reads each node's attributes several times (shape and type
# inference, autodiff, lowering). Only successful parses are kept (errors name their node).
_PARSED: Dict[Tuple, Dict[str, Any]] = {}
_PARSED_LIMIT = 1 << 16


def parse_attrs(op: OpDef, raw: Dict[str, str], node: str = "") -> Dict[str, Any]:
    """Typed attributes of a node: raw strings parsed by the op's Param specs, defaults filled.

    Keys of the form __name__ (MXNet's per-variable hints such as __shape__, __lr_mult__)
    are kept as strings under their own name. An unknown attribute or a bad value raises
    Error naming the node, the op, the attribute and the value. Returns a fresh dict (parsed
    values are immutable: numbers, strings, tuples) from a cache keyed by the raw text."""
    try:
        key = (id(op), op.name, tuple(raw.items()))
        hash(key)
    except TypeError:  # an unhashable raw value: parse (and report) without the cache
        key = None
    if key is not None:
        hit = _PARSED.get(key)
        if hit is not None:
            return dict(hit)
    out = _parse_attrs_uncached(op, raw, node)
    if key is not None:
        if len(_PARSED) >= _PARSED_LIMIT:
            _PARSED.clear()
        _PARSED[key] = dict(out)
    return out


def _parse_attrs_uncached(op: OpDef, raw: Dict[str, str], node: str) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key, text in raw.items():
        if key.startswith("__") and key.endswith("__"):
            out[key] = text
            continue
        spec = op.params.get(key)
        if spec is None:
            if key in op.ignored_attrs:
                continue
            known = ", ".join(sorted(op.params)) or "none"
            raise Error(f"node '{node}' (op {op.name}): unknown attribute '{key}'={text!r} (known: {known})")
        try:
            value = _parse_value(spec.kind, str(text))
        except (ValueError, TypeError, SyntaxError) as e:
            raise Error(f"node '{node}' (op {op.name}): attribute '{key}' has bad value {text!r}: {e}") from None
        if spec.choices is not None and value not in spec.choices:
            raise Error(f"node '{node}' (op {op.name}): attribute '{key}'={text!r} is not one of {list(spec.choices)}")
        out[key] = value
    for key, spec in op.params.items():
        if key not in out:
            if spec.required:
                raise Error(f"node '{node}' (op {op.name}): required attribute '{key}' is missing")
            out[key] = spec.default
    return out
