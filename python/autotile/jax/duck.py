"""Registry kernels (written against NumPy) run on traced ``jax.numpy`` arrays: each traced
array is handed to the kernel wrapped in :class:`Duck`, which takes NumPy's dispatch
protocols (``__array_ufunc__``, ``__array_function__``) to the ``jax.numpy`` function of the
same name and forwards array methods, so ``np.exp(x)`` or ``x.reshape(...).sum(1)`` in a
kernel trace into the jitted step. JAX arrays are immutable: a write (``out=``, ``x[i] = v``,
``x += v``) replaces the wrapped value, which is what the kernel then reads or returns.
A kernel that needs more (strided views, ``np.add.at`` into a NumPy buffer, a value read
back to Python) fails while tracing; the step then names the node and op."""
from __future__ import annotations

import operator
import warnings

import numpy as np


def _jnp():
    import jax.numpy as jnp

    return jnp


def unwrap(x):
    if isinstance(x, Duck):
        return x.a
    if isinstance(x, (list, tuple)):
        return type(x)(unwrap(v) for v in x)
    if isinstance(x, dict):
        return {k: unwrap(v) for k, v in x.items()}
    return x


def wrap(x):
    import jax

    if isinstance(x, jax.Array):
        return Duck(x)
    if isinstance(x, (list, tuple)):
        return type(x)(wrap(v) for v in x)
    return x


def _store(out, result):
    """Emulate NumPy's ``out=``: the Duck(s) in `out` now hold `result`."""
    outs = out if isinstance(out, tuple) else (out,)
    results = result if isinstance(result, tuple) else (result,)
    for o, r in zip(outs, results):
        if not isinstance(o, Duck):
            raise TypeError("out= must be a traced array in the JAX step")
        o.a = _jnp().asarray(r).astype(o.a.dtype).reshape(o.a.shape)
    return out if isinstance(out, tuple) and len(out) > 1 else outs[0]


def _special(ufunc):
    """jax.scipy.special's function of a ufunc jax.numpy lacks (scipy.special's erf, which the
    GELU kernels call), else None."""
    import jax.scipy.special as jss

    return getattr(jss, ufunc.__name__, None)


_REDUCE = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min", "logical_and": "all",
           "logical_or": "any"}


class Duck:
    """A traced jax array seen by a NumPy kernel (module docstring)."""

    __slots__ = ("a",)
    __array_priority__ = 1000

    def __init__(self, a):
        self.a = a

    # ------------------------------------------------------------------ NumPy protocols
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        jnp = _jnp()
        out = kwargs.pop("out", None)
        args, kwargs = unwrap(inputs), unwrap(kwargs)
        if method == "__call__":
            fn = getattr(jnp, ufunc.__name__, None) or _special(ufunc)
        elif method == "reduce" and ufunc.__name__ in _REDUCE:
            fn = getattr(jnp, _REDUCE[ufunc.__name__])
        elif method == "at" and ufunc.__name__ in ("add", "subtract", "multiply", "maximum", "minimum"):
            # np.add.at(buffer, idx, values): the buffer Duck now holds the scattered result
            buf, idx = inputs[0], unwrap(inputs[1])
            vals = args[2] if len(args) > 2 else None
            if not isinstance(buf, Duck):
                raise TypeError(f"numpy.{ufunc.__name__}.at into a NumPy buffer cannot take traced values")
            ref = buf.a.at[idx]
            name = {"subtract": "add", "multiply": "multiply", "add": "add", "maximum": "max", "minimum": "min"}
            vals = -vals if ufunc.__name__ == "subtract" else vals
            buf.a = getattr(ref, name[ufunc.__name__])(vals)
            return None
        elif method == "outer" and ufunc.__name__ == "multiply":
            fn = jnp.multiply.outer if hasattr(jnp.multiply, "outer") else \
                (lambda a, b, **k: jnp.multiply(jnp.asarray(a)[(...,) + (None,) * jnp.ndim(b)], b, **k))
        else:
            fn = None
        if fn is None:
            raise TypeError(f"numpy.{ufunc.__name__}.{method} has no jax.numpy equivalent")
        result = fn(*args, **kwargs)
        if out is not None and any(o is not None for o in (out if isinstance(out, tuple) else (out,))):
            return _store(out, result)
        return wrap(result)

    def __array_function__(self, func, types, args, kwargs):
        jnp = _jnp()
        module = func.__module__ or ""
        space = jnp.linalg if "linalg" in module else jnp
        fn = getattr(space, func.__name__, None)
        if fn is None:
            raise TypeError(f"numpy.{func.__name__} has no jax.numpy equivalent")
        kwargs = dict(kwargs)
        out = kwargs.pop("out", None)
        result = fn(*unwrap(args), **unwrap(kwargs))
        if out is not None:
            return _store(out, result)
        return wrap(result)

    def __array__(self, *args, **kwargs):
        raise TypeError("a traced array cannot become a NumPy array (the kernel needs concrete values)")

    # ------------------------------------------------------------------ array surface
    def __getattr__(self, name):
        value = getattr(self.a, name)
        if callable(value):
            return lambda *a, **k: wrap(value(*unwrap(a), **unwrap(k)))
        return wrap(value)

    @property
    def T(self):
        return Duck(self.a.T)

    def __getitem__(self, idx):
        return Duck(self.a[unwrap(idx)])

    def __setitem__(self, idx, value):
        self.a = self.a.at[unwrap(idx)].set(_jnp().asarray(unwrap(value)).astype(self.a.dtype))

    def __len__(self):
        return len(self.a)

    def __iter__(self):
        return (Duck(self.a[i]) for i in range(len(self.a)))

    def __bool__(self):
        return bool(self.a)

    def __float__(self):
        return float(self.a)

    def __int__(self):
        return int(self.a)

    def __index__(self):
        return operator.index(self.a)


def _binary(op, reflected=False):
    def f(self, other):
        a, b = self.a, unwrap(other)
        return wrap(op(b, a) if reflected else op(a, b))
    return f


def _inplace(op):
    def f(self, other):
        self.a = op(self.a, unwrap(other)).astype(self.a.dtype)
        return self
    return f


for _name, _op in {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
                   "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow,
                   "matmul": operator.matmul, "and": operator.and_, "or": operator.or_, "xor": operator.xor,
                   "lshift": operator.lshift, "rshift": operator.rshift}.items():
    setattr(Duck, f"__{_name}__", _binary(_op))
    setattr(Duck, f"__r{_name}__", _binary(_op, reflected=True))
    setattr(Duck, f"__i{_name}__", _inplace(_op))
for _name, _op in {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge, "eq": operator.eq,
                   "ne": operator.ne}.items():
    setattr(Duck, f"__{_name}__", _binary(_op))
for _name, _op in {"neg": operator.neg, "pos": operator.pos, "abs": operator.abs, "invert": operator.invert}.items():
    setattr(Duck, f"__{_name}__", (lambda op: lambda self: Duck(op(self.a)))(_op))
Duck.__hash__ = None  # mutable, compared element-wise


def _has_duck(x) -> bool:
    return isinstance(x, Duck) or (isinstance(x, (list, tuple)) and any(_has_duck(v) for v in x))


def _converting(original):
    """np.asarray-like: a Duck (or a list holding one) stays traced, with the dtype asked for."""
    def f(a, dtype=None, *args, **kwargs):
        if not _has_duck(a):
            return original(a, dtype, *args, **kwargs)
        jnp = _jnp()
        value = jnp.asarray(unwrap(a)) if not isinstance(a, (list, tuple)) else jnp.stack(unwrap(a))
        return Duck(value if dtype is None else value.astype(dtype))
    return f


def _buffer(original, fill):
    """np.zeros-like: a float buffer is a traced Duck (the kernel writes traced values into
    it); others stay NumPy."""
    def f(shape, dtype=float, *args, **kwargs):
        if np.dtype(dtype).kind != "f" or args or kwargs.get("order", "C") != "C" or kwargs.get("like") is not None:
            return original(shape, dtype, *args, **kwargs)
        return Duck(_jnp().full(shape, fill, dtype=dtype))
    return f


class numpy_on_jax:
    """While tracing one registry kernel: np.asarray / np.ascontiguousarray / np.array keep a
    traced array traced (NumPy does not dispatch them), and float np.zeros / np.empty
    buffers are traced, so a kernel's writes into them (``dx[idx] = dy``, ``np.add.at``)
    trace too. Non-traced arguments get NumPy's own functions."""

    _NAMES = {"asarray": None, "ascontiguousarray": None, "array": None, "zeros": 0.0, "empty": 0.0}

    def __enter__(self):
        self.saved = {n: getattr(np, n) for n in self._NAMES}
        for n, fill in self._NAMES.items():
            setattr(np, n, _converting(self.saved[n]) if fill is None else _buffer(self.saved[n], fill))
        return self

    def __exit__(self, *exc):
        for n, f in self.saved.items():
            setattr(np, n, f)
        return False


def run_kernel(kernel, attrs, inputs, ctx):
    """`kernel` (a registry kernel written against NumPy) on traced `inputs`: the outputs as
    jax arrays."""
    ctx.xp = np  # NumPy calls dispatch to jax.numpy through the Duck protocols
    ctx.aux = [Duck(a) for a in ctx.aux]
    with numpy_on_jax(), warnings.catch_warnings():
        # astype(np.int64) of indices gives int32 unless jax_enable_x64: what the step wants
        warnings.filterwarnings("ignore", message="Explicitly requested dtype")
        outs = kernel(attrs, [Duck(x) for x in inputs], ctx)
    ctx.aux = [unwrap(a) for a in ctx.aux]
    return [_jnp().asarray(unwrap(o)) for o in outs]
