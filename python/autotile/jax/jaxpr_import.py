"""A JAX function's jaxpr read into an autotile Symbol graph.

    sym, info = jaxpr_symbol(fn, example_args, param_args=(0,))

``jax.make_jaxpr(fn)(*example_args)`` is walked equation by equation: every array leaf of the
arguments becomes a Variable named by its pytree path (``params.Dense_0.kernel``, ``x``), the
leaves of the parameter arguments trainable, the others data; every equation becomes ops of
autotile's registry (the rules of :mod:`autotile.jax.jaxpr_rules`). Calls (``jit``/``pjit``,
``custom_jvp_call``, ``custom_vjp_call``, ``checkpoint``, ``closed_call``) are inlined: their
primal bodies are read (a custom JVP or VJP rule is not: autotile differentiates the primal
body itself). An equation whose inputs are all known at trace time (``sqrt 8.0``, index
arithmetic on literals, ``iota``) is evaluated with JAX and kept as a constant. A 0-d JAX value
is a ``(1,)`` tensor in autotile (whose tensors have rank >= 1).

A primitive with no rule is an :class:`autotile.Error` naming the primitive, the equation and
the source line JAX recorded for it, raised before anything is planned.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import Error

#: call primitives whose body is inlined, and the parameter holding it
CALLS = {"pjit": "jaxpr", "jit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
         "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr", "custom_vjp_call_jaxpr": "fun_jaxpr",
         "checkpoint": "jaxpr", "remat": "jaxpr", "remat2": "jaxpr", "custom_lin": None}

#: primitives never evaluated at trace time even with constant inputs (random state, effects)
NO_FOLD = frozenset({"random_bits", "random_seed", "random_wrap", "random_unwrap", "threefry2x32", "rng_bit_generator",
                     "debug_callback", "io_callback", "pure_callback"})


@dataclass(eq=False)
class T:
    """A traced value: the Symbol computing it, its JAX shape and dtype, and the equation
    that produced it (primitive name, input values, parameters) for pattern rules."""

    sym: Any
    shape: Tuple[int, ...]
    dtype: Any
    origin: Optional[Tuple[str, tuple, dict]] = field(default=None, repr=False)

    @property
    def at_shape(self) -> Tuple[int, ...]:
        """The shape autotile gives it: a 0-d value is (1,)."""
        return self.shape or (1,)


def source_line(eqn) -> str:
    """Where JAX recorded the equation was written (``file.py:12 (fn)``), or ''."""
    try:
        from jax._src import source_info_util

        return source_info_util.summarize(eqn.source_info)
    except Exception:  # noqa: BLE001 (a private API: its absence only loses the line)
        return ""


def describe(eqn) -> str:
    """One line of the equation as the jaxpr prints it (long parameters cut)."""
    text = " ".join(str(eqn).split())
    return text if len(text) <= 240 else text[:237] + "..."


class Reader:
    """One jaxpr read: the value of every variable, the Symbols built, constants kept."""

    def __init__(self):
        from .jaxpr_rules import RULES

        self.rules = RULES
        self.params: Dict[str, np.ndarray] = {}
        self.names: set = set()
        self.eqn = None  # the equation being read (for errors and names)
        self.counts: Dict[str, int] = {}
        self.calls: List = []  # the call equations being inlined, outermost first

    # ------------------------------------------------------------------ naming, errors
    def error(self, message: str) -> Error:
        """An Error naming the equation being read and its source line."""
        if self.eqn is None:
            return Error(message)
        where, via = "", ""
        for outer in reversed(self.calls + [self.eqn]):  # the innermost equation with a line of user code
            where = source_line(outer)
            if where:
                if outer is not self.eqn:
                    via = f" (inside the call `{outer.primitive.name}[name={outer.params.get('name', '?')}]`)"
                break
        return Error(f"JAX primitive '{self.eqn.primitive.name}' in `{describe(self.eqn)}`"
                     + (f" at {where}" if where else "") + via + f": {message}")

    def unique(self, base: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_./-]", "_", base) or "n"
        name, k = base, 1
        while name in self.names:
            name, k = f"{base}_{k}", k + 1
        self.names.add(name)
        return name

    def node_name(self, suffix: str = "") -> str:
        """A node name from the equation's Flax/JAX name stack and its primitive."""
        prim = self.eqn.primitive.name if self.eqn is not None else "op"
        try:
            stack = str(self.eqn.source_info.name_stack)
        except Exception:  # noqa: BLE001
            stack = ""
        self.counts[prim] = self.counts.get(prim, -1) + 1
        base = f"{stack}/{prim}{self.counts[prim]}" if stack else f"{prim}{self.counts[prim]}"
        return self.unique(base + (f"_{suffix}" if suffix else ""))

    # ------------------------------------------------------------------ building
    def op(self, op_name: str, *inputs, suffix: str = "", **attrs):
        """Apply registered op `op_name` to Symbols."""
        from ..symbol.ops_api import create

        return create(op_name, *inputs, name=self.node_name(suffix), **attrs)

    def const(self, value: np.ndarray, shape: Optional[tuple] = None):
        """A constant Variable (not trained) holding `value` (broadcast to `shape`)."""
        from ..symbol.symbol import Variable

        value = np.asarray(value)
        if shape is not None:
            value = np.broadcast_to(value, shape)
        if value.dtype == np.float64:
            value = value.astype(np.float32)
        if value.dtype == np.bool_:
            value = value.astype(np.float32)
        value = np.ascontiguousarray(value.reshape(value.shape or (1,)))
        name = self.unique(self.node_name("const"))
        self.params[name] = value
        kwargs = {"dtype": value.dtype} if value.dtype != np.float32 else {}
        return Variable(name, shape=value.shape, const=1, **kwargs)

    def sym(self, v, shape: Optional[tuple] = None):
        """The Symbol of value `v` (a constant becomes a constant Variable)."""
        return v.sym if isinstance(v, T) else self.const(v, shape)

    def value(self, sym, shape, dtype, origin=None) -> T:
        return T(sym, tuple(int(d) for d in shape), np.dtype(dtype), origin)

    # ------------------------------------------------------------------ walking
    def read(self, jaxpr, consts: Sequence, args: Sequence) -> List:
        """The values of `jaxpr`'s outputs given its constants and arguments' values."""
        from jax.extend import core

        env: Dict[Any, Any] = {}

        def get(atom):
            if isinstance(atom, core.Literal):
                return np.asarray(atom.val)
            return env[atom]

        for var, val in zip(jaxpr.constvars, consts):
            env[var] = val if isinstance(val, T) else np.asarray(val)
        for var, val in zip(jaxpr.invars, args):
            env[var] = val
        for eqn in jaxpr.eqns:
            ins = [get(a) for a in eqn.invars]
            outs = self.equation(eqn, ins)
            for var, val in zip(eqn.outvars, outs):
                if type(var).__name__ != "DropVar":
                    env[var] = val
        return [get(a) for a in jaxpr.outvars]

    def equation(self, eqn, ins: List) -> List:
        name = eqn.primitive.name
        saved, self.eqn = self.eqn, eqn
        try:
            if name in CALLS:
                return self._call(eqn, ins)
            if name not in NO_FOLD and all(not isinstance(v, T) for v in ins):
                return self._fold(eqn, ins)
            rule = self.rules.get(name)
            if rule is None:
                raise self.error(f"no rule maps it to autotile operators (supported: {', '.join(sorted(self.rules))}; "
                                 "calls to jit, custom_jvp and custom_vjp functions are inlined)")
            outs = rule(self, eqn, ins)
            return outs if eqn.primitive.multiple_results else [outs]
        finally:
            self.eqn = saved

    def _call(self, eqn, ins):
        key = CALLS[eqn.primitive.name]
        inner = eqn.params.get(key) if key else None
        if inner is None:
            raise self.error("a call whose body JAX does not record in the jaxpr")
        jaxpr, consts = (inner.jaxpr, inner.consts) if hasattr(inner, "consts") else (inner, [])
        n = len(jaxpr.invars)
        self.calls.append(eqn)
        try:
            return self.read(jaxpr, consts, ins[len(ins) - n:])  # custom_vjp's leading residual inputs
        finally:
            self.calls.pop()

    def _fold(self, eqn, ins):
        try:
            out = eqn.primitive.bind(*ins, **eqn.params)
        except Exception as e:  # noqa: BLE001
            raise self.error(f"cannot be evaluated at trace time on its constant inputs: {type(e).__name__}: {e}") \
                from None
        outs = out if eqn.primitive.multiple_results else [out]
        return [np.asarray(o) for o in outs]


def leaf_names(args: Sequence, arg_names: Sequence[str]) -> Tuple[List[str], list]:
    """Names of the array leaves of `args` (argument name, then the pytree path, dotted) and
    each argument's tree structure."""
    import jax

    names, trees = [], []
    for arg, arg_name in zip(args, arg_names):
        leaves, tree = jax.tree_util.tree_flatten_with_path(arg)
        trees.append(tree)
        for path, _ in leaves:
            parts = [arg_name] + [_key(k) for k in path]
            names.append(".".join(parts))
    seen = {}
    for n in names:
        if n in seen:
            raise Error(f"two arguments' leaves are both named '{n}': rename an argument or a key")
        seen[n] = True
    return names, trees


def _key(k) -> str:
    for attr in ("key", "name", "idx"):
        if hasattr(k, attr):
            return str(getattr(k, attr))
    return str(k).strip(".[]'\"")


def jaxpr_symbol(fn, args: Sequence, param_args: Sequence[int] = (0,), arg_names: Optional[Sequence[str]] = None):
    """The autotile Symbol of ``fn(*args)`` (see the module's text), and a dict of what it
    read: ``names`` (every leaf's name in flattening order), ``trees`` (each argument's tree
    structure), ``param_names``, ``data_names``, ``shapes`` (autotile shapes by name),
    ``out_shape`` (the JAX shape of the single output) and ``jaxpr`` (the ClosedJaxpr). The
    function must return one array; constant values it closes over are kept in ``sym.params``."""
    import jax

    from ..autodiff.graph import DATA_ATTR
    from ..symbol.symbol import Variable

    if not callable(fn):
        raise Error(f"autotile.jax.plan needs a function, got {type(fn).__name__}")
    arg_names = list(arg_names or positional_names(fn, len(args)))
    names, trees = leaf_names(args, arg_names)
    try:
        closed = jax.make_jaxpr(fn)(*args)
    except Error:
        raise
    except Exception as e:
        raise Error(f"jax.make_jaxpr could not trace the function on the example arguments: "
                    f"{type(e).__name__}: {str(e).splitlines()[0][:300]}") from e
    if len(closed.jaxpr.outvars) != 1:
        raise Error(f"the function returns {len(closed.jaxpr.outvars)} arrays; autotile.jax.plan needs one scalar loss "
                    "(or a model function and loss=)")
    flat = jax.tree_util.tree_leaves(list(args))
    reader = Reader()
    values, param_names, data_names, shapes, owner = [], [], [], {}, []
    for i, arg in enumerate(args):
        owner += [i] * len(jax.tree_util.tree_leaves(arg))
    for name, leaf, i in zip(names, flat, owner):
        shape = tuple(np.shape(leaf))
        dtype = np.dtype(getattr(leaf, "dtype", np.asarray(leaf).dtype))
        trained = i in param_args
        if trained and dtype.kind != "f":
            raise Error(f"parameter '{name}' holds {dtype} values: the parameter argument's leaves must be "
                        "floating point")
        kwargs = {} if trained else {"attr": {DATA_ATTR: "1"}}
        if dtype != np.float32:
            kwargs["dtype"] = dtype
        reader.names.add(name)
        var = Variable(name, shape=shape or (1,), **kwargs)
        (param_names if trained else data_names).append(name)
        shapes[name] = shape or (1,)
        values.append(T(var, shape, dtype))
    (out,) = reader.read(closed.jaxpr, closed.consts, values)
    if not isinstance(out, T):
        raise Error("the function's output does not depend on its arguments (a constant): nothing to train")
    sym = out.sym
    sym.params = {k: v for k, v in reader.params.items() if k in set(sym.list_arguments())}
    used = set(sym.list_arguments())
    unused = [n for n in param_names if n not in used]
    info = {"names": names, "trees": trees, "param_names": [n for n in param_names if n in used],
            "unused_params": unused, "data_names": [n for n in data_names if n in used], "shapes": shapes,
            "out_shape": out.shape, "out_dtype": out.dtype, "jaxpr": closed, "arg_names": arg_names}
    return sym, info


def positional_names(fn, n: int) -> List[str]:
    """Names of the first `n` positional parameters of `fn` (``arg<i>`` where unknown)."""
    import inspect

    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params[:n]]
    return names + [f"arg{i}" for i in range(len(names), n)]
