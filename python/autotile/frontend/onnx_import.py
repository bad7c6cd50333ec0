"""ONNX graph walk: turns an ``onnx.ModelProto`` into an autotile Symbol.

The walk visits ONNX nodes in topological order. Each ONNX tensor maps to one of
  - a constant (NumPy array): initializers, Constant nodes and every node whose inputs are all
    constant (folded in NumPy, see onnx_fold); a constant consumed by an operator becomes a
    parameter Variable whose value is carried in ``sym.params``;
  - a single-output Symbol built by the per-op converters (the onnx_ops* families, gathered in
    onnx_converters);
  - an :class:`Unavailable` marker for outputs autotile does not compute (Dropout's mask,
    MaxPool's indices): consuming one raises Error.

Static shapes come from ONNX shape inference, run once on the model with the batch size
applied; dimensions it cannot fix stay symbolic (:class:`SymDim`).
"""
from __future__ import annotations

import itertools
from typing import Dict, List, Optional

import numpy as np

from ..errors import Error
from ..symbol.ops_api import create
from ..symbol.symbol import Group, Symbol, Variable
from .onnx_load import load_model, onnx_module as _onnx
from .onnx_names import NameTable  # noqa: F401  (NameTable was defined here)
from .onnx_fold import NotFoldable, SymDim, fold, has_symbolic
from .onnx_trainable import NO_GRADIENT, trainable_initializers
from .onnx_weight_views import WeightViews, relayout

#: ONNX opsets the converters are written for (later opsets are accepted: the supported ops
#: did not change their semantics after 21, only their type lists).
MIN_OPSET = 7
TESTED_MAX_OPSET = 21



class Unavailable:
    """An ONNX output autotile does not produce (e.g. Dropout's mask)."""

    def __init__(self, reason: str):
        self.reason = reason


# ----------------------------------------------------------------------------- loading

def _main_opset(model, where="model") -> int:
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if not versions:
        if model.ir_version < 3:  # IR 1-2 had no opset_import; those models are opset 1
            versions = [1]
        else:
            raise Error(f"ONNX {where} declares no opset for the default domain")
    opset = int(versions[0])
    if opset < MIN_OPSET:
        raise Error(f"ONNX {where} uses opset {opset}; autotile imports opsets {MIN_OPSET} and later "
                    f"(convert it with onnx.version_converter.convert_version(model, {MIN_OPSET}))")
    return opset


# ----------------------------------------------------------------------------- node context

class NodeContext:
    """What a converter sees of one ONNX node: attributes, inputs (as Symbols or constants),
    static shapes, and helpers to emit autotile ops with unique names."""

    def __init__(self, importer: "Importer", node, index: int):
        self.imp = importer
        self.node = node
        self.op_type = node.op_type
        self.opset = importer.opset
        self.display = node.name or (node.output[0] if node.output else f"#{index}")
        self.base = node.name or (node.output[0] if node.output and node.output[0] else f"node{index}")
        self._attrs = {a.name: a for a in node.attribute}
        self._count = 0
        #: why onnx_fold left this all-constant node unfolded (its size), for the converter's error
        self.fold_refused: Optional[str] = None

    # -- errors and attributes
    def error(self, message: str) -> Error:
        """An Error naming this node and its op type."""
        return Error(f"ONNX node '{self.display}' ({self.op_type}): {message}")

    def attr(self, name: str, default=None):
        """An attribute's Python value (bytes decoded to str, tensors as NumPy arrays)."""
        a = self._attrs.get(name)
        if a is None:
            return default
        from onnx import helper, numpy_helper

        self._check_attr_type(a)
        try:
            value = helper.get_attribute_value(a)
            if isinstance(value, bytes):
                return value.decode("utf-8")
            if a.type == a.TENSOR:
                return numpy_helper.to_array(value)
            if a.type in (a.INTS, a.FLOATS):
                return list(value)
            if a.type == a.STRINGS:
                return [v.decode("utf-8") for v in value]
        except (ValueError, TypeError, KeyError) as e:  # undecodable text, a tensor of no known type
            raise self.error(f"attribute '{name}' cannot be read: {type(e).__name__}: {e}") from None
        return value

    def _check_attr_type(self, a):
        """Error unless the attribute has the type the operator's schema declares (a file
        that stores kernel_shape as a float would otherwise reach the converter)."""
        from onnx import AttributeProto, defs

        try:
            declared = defs.get_schema(self.op_type, self.opset, "" if self.node.domain == "ai.onnx"
                                       else self.node.domain).attributes.get(a.name)
        except Exception:  # unknown op or domain: no schema to check against
            declared = None
        want = None if declared is None else int(declared.type.value)
        if a.type not in AttributeProto.AttributeType.values() or a.type == AttributeProto.UNDEFINED or (
                want is not None and a.type != want):
            got = AttributeProto.AttributeType.Name(a.type) if a.type in AttributeProto.AttributeType.values() \
                else str(a.type)
            need = f"; {self.op_type} takes {AttributeProto.AttributeType.Name(want)}" if want is not None else ""
            raise self.error(f"attribute '{a.name}' has type {got}{need}")

    def has_attr(self, name: str) -> bool:
        return name in self._attrs

    def constant_attr_value(self) -> np.ndarray:
        """The value of a Constant node (value, value_float(s), value_int(s))."""
        for key, dtype in (("value", None), ("value_float", np.float32), ("value_floats", np.float32),
                           ("value_int", np.int64), ("value_ints", np.int64)):
            if key in self._attrs:
                value = self.attr(key)
                return np.asarray(value) if dtype is None else np.asarray(value, dtype=dtype)
        kinds = ", ".join(sorted(self._attrs)) or "none"
        raise self.error(f"unsupported constant kind (attributes: {kinds}); autotile takes numeric tensors")

    # -- inputs
    @property
    def num_inputs(self) -> int:
        return len(self.node.input)

    def has_input(self, i: int) -> bool:
        return i < len(self.node.input) and self.node.input[i] != ""

    def input_name(self, i: int) -> str:
        return self.node.input[i]

    def is_const(self, i: int) -> bool:
        return self.has_input(i) and isinstance(self.imp.lookup(self.node.input[i], self), np.ndarray)

    def const(self, i: int, what: str = "") -> np.ndarray:
        """The constant value of input i; Error if it is computed at run time."""
        if not self.has_input(i):
            raise self.error(f"input {i} ({what or 'required'}) is missing")
        value = self.imp.lookup(self.node.input[i], self)
        if not isinstance(value, np.ndarray):
            what = f" ({what})" if what else ""
            raise self.error(f"input {i} '{self.node.input[i]}'{what} must be a constant (an initializer or "
                             f"a constant subgraph); autotile does not support data-dependent values here")
        return value

    def is_weight(self, i: int) -> bool:
        """Whether input i is a trainable weight (a float initializer, or folded from one):
        converters keep it a Variable instead of baking a transformed copy, so the gradient
        reaches the model's own tensor."""
        return self.has_input(i) and self.node.input[i] in self.imp.weights

    def input(self, i: int) -> Symbol:
        """Input i as a Symbol (a constant becomes a parameter Variable)."""
        if not self.has_input(i):
            raise self.error(f"input {i} is missing")
        return self.imp.as_symbol(self.node.input[i], self)

    def dims(self, i: int) -> Optional[tuple]:
        """Static shape of input i: ints, SymDim for unknown dimensions; None if unknown rank."""
        if not self.has_input(i):
            return None
        return self.imp.dims_of(self.node.input[i])

    def shape(self, i: int) -> Optional[tuple]:
        """Static shape of input i with None for unknown dimensions; None if the rank is unknown."""
        d = self.dims(i)
        return None if d is None else tuple(x if isinstance(x, int) else None for x in d)

    def rank(self, i: int) -> Optional[int]:
        d = self.dims(i)
        return None if d is None else len(d)

    def need_rank(self, i: int, why: str) -> int:
        r = self.rank(i)
        if r is None:
            raise self.error(f"the rank of input '{self.node.input[i]}' is unknown (needed {why}); "
                             f"{self.imp.unbound_hint()}")
        return r

    def need_shape(self, i: int, why: str, dims: Optional[slice] = None) -> tuple:
        s = self.shape(i)
        part = None if s is None else (s if dims is None else s[dims])
        if part is None or any(d is None for d in part):
            raise self.error(f"the shape of input '{self.node.input[i]}' is not known statically "
                             f"(got {s}; needed {why}); {self.imp.unbound_hint()}")
        return part

    def out_dims(self, i: int = 0) -> Optional[tuple]:
        if i >= len(self.node.output) or not self.node.output[i]:
            return None
        return self.imp.dims_of(self.node.output[i])

    # -- emitting
    def name(self, suffix: str = "") -> str:
        """A fresh unique node name derived from this ONNX node."""
        return self.imp.names.unique(f"{self.base}_{suffix}" if suffix else self.base)

    def op(self, op_name: str, *inputs, suffix: str = "", **kwargs) -> Symbol:
        """Apply registered op `op_name`; a helper op gets a name `<node>_<suffix>`."""
        from ..ops import registry

        if not registry.exists(op_name):
            raise self.error(f"needs autotile operator '{op_name}', which is not registered")
        return create(op_name, *inputs, name=self.name(suffix), **kwargs)

    def param(self, value: np.ndarray, source: Optional[str] = None, tag: str = "") -> Symbol:
        """A parameter Variable holding a value derived at import time (e.g. a transposed
        weight); named after the ONNX tensor `source` it comes from."""
        return self.imp.new_param(value, source or f"{self.base}_{tag or 'const'}", tag, ctx=self)


# ----------------------------------------------------------------------------- importer

class Importer:
    """One import: holds the tensor table, names and parameters while the graph is walked."""

    def __init__(self, model, batch_size: Optional[int] = None, shapes: Optional[Dict[str, tuple]] = None,
                 trainable=None):
        self.onnx = _onnx()
        self.model = model
        self.graph = model.graph
        self.opset = _main_opset(model)
        from .onnx_validate import validate

        validate(model, self.opset)
        if batch_size is not None:
            if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
                raise Error(f"batch_size must be a positive integer, got {batch_size!r}")
            batch_size = int(batch_size)
        self.batch_size = batch_size
        self.names = NameTable()
        self.values: Dict[str, object] = {}
        self.params: Dict[str, np.ndarray] = {}
        self.var_names: Dict[str, str] = {}  # ONNX tensor name -> Variable name
        self.onnx_names: Dict[str, str] = {}  # ONNX tensor name -> autotile entry name
        self._param_syms: Dict[str, Symbol] = {}
        self._derived: Dict[tuple, list] = {}  # (ONNX source, tag) -> [(name, Variable)] made by new_param
        self._aliases: Dict[str, str] = {}  # ONNX name -> the weight initializer it is (Identity)
        self.views = WeightViews()  # each weight's one Variable; other readers' layouts are ops on it
        self._anon = itertools.count()
        from onnx import numpy_helper

        self.initializers = {}
        for t in self.graph.initializer:
            try:
                self.initializers[t.name] = numpy_helper.to_array(t)
            except Exception as e:
                raise Error(f"ONNX initializer '{t.name}' cannot be read: {e}") from None
        if len(self.graph.sparse_initializer):
            raise Error("ONNX sparse initializers are not supported: "
                        + ", ".join(repr(t.values.name) for t in self.graph.sparse_initializer))
        #: ONNX tensors that are trainable weights (onnx_trainable's rule) and what folds from them
        self.weights = trainable_initializers(self.graph, self.initializers, trainable)
        self.data_inputs = [i for i in self.graph.input if i.name not in self.initializers]
        # Variable names: data inputs first, so they keep their ONNX names when those are valid.
        for vi in self.data_inputs:
            self.var_names[vi.name] = self.names.unique_kept(vi.name)
        for name in self.initializers:
            self.var_names[name] = self.names.unique_kept(name)
        self.input_dims = {vi.name: self._input_dims(vi) for vi in self.data_inputs}
        self._bind_shapes(shapes)
        if batch_size is not None or shapes is not None:
            # Shapes for planning: a declared 0 would read as "unknown" in a Variable's shape (and
            # be reported as a missing shape). Without them an input may stay empty: a 1-device
            # run takes the fed array's shape (ONNX's empty-set reductions).
            for name, dims in self.input_dims.items():
                k = next((k for k, d in enumerate(dims or ()) if isinstance(d, int) and d == 0), None)
                if k is not None:
                    raise Error(f"ONNX input '{name}' has dimension {k} of size 0 (shape {self._show(dims)}); "
                                f"autotile plans no empty tensors: give it a positive size with shapes=")
        self.orig_batch = {vi.name: self._type_dims(vi.type)[0] if self._type_dims(vi.type) else None
                           for vi in self.data_inputs}
        self.shapes = self._infer_shapes()

    # -- shapes
    def _type_dims(self, tp) -> Optional[tuple]:
        if not tp.HasField("tensor_type") or not tp.tensor_type.HasField("shape"):
            return None
        dims = []
        for d in tp.tensor_type.shape.dim:
            if d.HasField("dim_value") and d.dim_value > 0:
                dims.append(int(d.dim_value))
            elif d.HasField("dim_value") and d.dim_value == 0:
                dims.append(0)
            else:
                dims.append(SymDim(d.dim_param or f"?{next(self._anon)}"))
        return tuple(dims)

    def _input_dims(self, vi) -> Optional[tuple]:
        dims = self._type_dims(vi.type)
        if self.batch_size is not None:
            if not dims:
                raise Error(f"batch_size: ONNX input '{vi.name}' has no leading dimension to set "
                            f"(shape {dims})")
            dims = (self.batch_size,) + tuple(dims[1:])
        return dims

    def _bind_shapes(self, shapes: Optional[Dict[str, tuple]]):
        """Apply ``shapes=`` (by the model's input names): each given shape replaces the
        input's, and the symbolic dimensions it fixes (``sequence``) are bound in every input."""
        if shapes is None:
            return
        if not isinstance(shapes, dict):
            raise Error(f"shapes must be a dict of input name -> shape, got {type(shapes).__name__}")
        bound: Dict[str, int] = {}
        for name, shape in shapes.items():
            if name not in self.input_dims:
                raise Error(f"shapes names '{name}', which is not a data input of the model "
                            f"(inputs: {', '.join(self.input_dims) or 'none'})")
            if not isinstance(shape, (tuple, list)) or not all(
                    isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d > 0 for d in shape):
                raise Error(f"shapes['{name}'] must be a tuple of positive integers, got {shape!r}")
            declared = self.input_dims[name]
            if declared is not None and len(declared) != len(shape):
                raise Error(f"shapes['{name}'] = {tuple(shape)} has rank {len(shape)}; the model declares "
                            f"rank {len(declared)} ({self._show(declared)})")
            for k, (d, v) in enumerate(zip(declared or (), shape)):
                if isinstance(d, int) and d != v and not (k == 0 and self.batch_size is None):
                    raise Error(f"shapes['{name}'] = {tuple(shape)}: dimension {k} is {d} in the model")
                if isinstance(d, SymDim) and not d.name.startswith("?"):
                    if bound.setdefault(d.name, int(v)) != int(v):
                        raise Error(f"shapes give the dimension '{d.name}' two values: {bound[d.name]} and {v}")
            self.input_dims[name] = tuple(int(v) for v in shape)
        for name, dims in self.input_dims.items():
            if dims is not None:
                self.input_dims[name] = tuple(bound.get(d.name, d) if isinstance(d, SymDim) else d for d in dims)

    @staticmethod
    def _show(dims) -> str:
        return "(" + ", ".join(d.name if isinstance(d, SymDim) else str(d) for d in dims) + ")"

    def unbound_hint(self) -> str:
        """Which inputs still have unknown dimensions, and how to bind them."""
        parts = [f"'{n}' {self._show(d)}" for n, d in self.input_dims.items()
                 if d is not None and any(isinstance(x, SymDim) for x in d)]
        if not parts:
            return "give the model static shapes"
        return f"unbound dimensions in input {', '.join(parts)}: pass batch_size= or shapes={{name: shape}}"

    def _infer_shapes(self) -> Dict[str, tuple]:
        """Static shapes of every tensor ONNX shape inference can determine, with the batch
        size applied. Large initializers are passed as typed inputs to keep this cheap."""
        onnx = self.onnx
        m = onnx.ModelProto()
        m.ir_version = max(self.model.ir_version, 4)
        m.opset_import.extend(self.model.opset_import)
        g = m.graph
        try:
            g.node.extend(self.graph.node)
        except Exception as e:  # protobuf's DecodeError: subgraph attributes nested too deep to copy
            raise Error(f"ONNX graph cannot be read: {e} (subgraphs nested deeper than protobuf's "
                        f"limit of 100 messages?)") from None
        for vi in self.graph.input:
            if vi.name in self.initializers:
                continue
            new = g.input.add()
            new.CopyFrom(vi)
            dims = self.input_dims.get(vi.name)
            if dims is not None and new.type.HasField("tensor_type"):
                del new.type.tensor_type.shape.dim[:]
                for d in dims:
                    nd = new.type.tensor_type.shape.dim.add()
                    if isinstance(d, SymDim):
                        if not d.name.startswith("?"):
                            nd.dim_param = d.name
                    else:
                        nd.dim_value = d
        for t in self.graph.initializer:
            if self.initializers[t.name].size <= 64:
                g.initializer.add().CopyFrom(t)
            else:
                g.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        for o in self.graph.output:  # names only: declared output shapes may fix the old batch
            g.output.add().name = o.name
        if self.batch_size is None:
            g.value_info.extend(self.graph.value_info)
        for f in self.model.functions:
            m.functions.add().CopyFrom(f)
        try:
            inferred = onnx.shape_inference.infer_shapes(m, check_type=False, strict_mode=False, data_prop=True)
        except Exception:  # inference is a help, not a requirement: converters ask when they need a shape
            inferred = m
        shapes: Dict[str, tuple] = {}
        self.elem_types: Dict[str, int] = {}
        for vi in itertools.chain(inferred.graph.value_info, inferred.graph.output, inferred.graph.input):
            dims = self._type_dims(vi.type)
            if dims is not None:
                shapes[vi.name] = dims
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                self.elem_types[vi.name] = vi.type.tensor_type.elem_type
        for name, dims in self.input_dims.items():
            if dims is not None:
                shapes[name] = dims
        return shapes

    def elem_type(self, name: str):
        """The NumPy dtype of a tensor if ONNX inference knows it, else None."""
        value = self.values.get(name)
        if isinstance(value, np.ndarray):
            return value.dtype
        elem = self.elem_types.get(name)
        return None if elem is None else self._np_dtype(elem, f"ONNX tensor '{name}'")

    def _np_dtype(self, elem: int, what: str) -> np.dtype:
        try:
            return np.dtype(self.onnx.helper.tensor_dtype_to_np_dtype(elem))
        except (KeyError, TypeError, ValueError):
            raise Error(f"{what} has element type {elem}, which is not an ONNX tensor type") from None

    def dims_of(self, name: str) -> Optional[tuple]:
        value = self.values.get(name)
        if isinstance(value, np.ndarray):
            return tuple(int(d) for d in value.shape)
        dims = self.shapes.get(name)
        if dims is not None and all(isinstance(d, int) for d in dims):
            return dims
        if isinstance(value, Symbol):  # ONNX inference lacks it: ask autotile's own inference
            try:
                _, out, _ = value.infer_shape_partial()
            except Error:
                return None
            if out and out[0] is not None and all(int(d) > 0 for d in out[0]):
                self.shapes[name] = tuple(int(d) for d in out[0])
                return self.shapes[name]
        return dims

    # -- values
    def lookup(self, name: str, ctx: Optional[NodeContext] = None):
        if name not in self.values:
            where = f"ONNX node '{ctx.display}' ({ctx.op_type})" if ctx else "the graph"
            raise Error(f"{where} uses tensor '{name}', which no node, input or initializer defines")
        value = self.values[name]
        if isinstance(value, Unavailable):
            where = f"ONNX node '{ctx.display}' ({ctx.op_type}) uses " if ctx else "the graph uses "
            raise Error(where + value.reason)
        return value

    def alias_weight(self, name: str, source: str) -> None:
        """ONNX tensor `name` is weight `source` under another name (an Identity of it): it is a
        weight too, and its Variable and derived copies are `source`'s."""
        self._aliases[name] = self._aliases.get(source, source)
        self.weights.add(name)

    def as_symbol(self, name: str, ctx: Optional[NodeContext] = None) -> Symbol:
        value = self.lookup(name, ctx)
        if isinstance(value, Symbol):
            return value
        name = self._aliases.get(name, name)
        sym = self._param_syms.get(name)
        if sym is None and name in self.weights:  # read as stored after a reader made it W^T, say
            sym = self.views.view(name, value, ("id",), self._op_maker(name, ctx))
            if sym is not None:
                self._param_syms[name] = sym
                return sym
        if sym is None:
            if has_symbolic(value):
                unknown = sorted({v.name for v in value.flat if isinstance(v, SymDim)})
                where = f"ONNX node '{ctx.display}' ({ctx.op_type}): " if ctx else ""
                raise Error(f"{where}tensor '{name}' depends on the unknown dimension(s) {unknown}; "
                            f"{self.unbound_hint()}")
            var_name = self.var_names.get(name) or self.names.unique(name)
            self.var_names[name] = var_name
            sym = self._make_param(var_name, value, name)
            self._param_syms[name] = sym
            if name in self.weights:
                self.views.record(name, ("id",), sym)
        return sym

    def _op_maker(self, source: str, ctx: Optional[NodeContext]):
        """``op(op_name, *inputs, suffix=..., **attrs)`` for the ops relaying out a weight: the
        reading node's (named after it), or named after the weight when no node reads it."""
        if ctx is not None:
            return ctx.op

        def op(op_name, *inputs, suffix="", **kwargs):
            return create(op_name, *inputs, name=self.names.unique(f"{source}_{suffix}"), **kwargs)

        return op

    def _make_param(self, var_name: str, value: np.ndarray, onnx_name: str) -> Symbol:
        value = np.asarray(value)
        if value.size == 0:
            raise Error(f"ONNX tensor '{onnx_name}' has shape {value.shape} with no elements; "
                        f"autotile does not compute empty tensors")
        if value.ndim == 0:  # autotile tensors have rank >= 1 (as MXNet's)
            value = value.reshape(1)
        self.params[var_name] = value
        kwargs = {"shape": value.shape, "onnx_name": onnx_name}
        if onnx_name not in self.weights:  # Constant nodes, masks, fill values, buffers: not trained
            kwargs["const"] = 1
        if value.dtype != np.float32:
            kwargs["dtype"] = value.dtype
        self.onnx_names.setdefault(onnx_name, var_name)
        return Variable(var_name, **kwargs)

    def new_param(self, value: np.ndarray, source: str, tag: str, ctx: Optional[NodeContext] = None) -> Symbol:
        # one Variable per value derived twice (ALBERT's shared layer), per weight whatever its readers
        value = np.asarray(value)
        source = self._aliases.get(source, source)
        weight = self.values.get(source)
        if source in self.weights and isinstance(weight, np.ndarray) and not has_symbolic(weight):
            # relaid out (MatMul's W^T where Gemm read W), maybe times the reader's alpha/beta
            scales = [a.f for a in ctx.node.attribute if a.type == self.onnx.AttributeProto.FLOAT] if ctx else []
            def make(layout, scale):  # the weight's Variable, in its first reader's layout
                if layout == ("id",):
                    return self.as_symbol(source)
                t = tag if scale == 1.0 else ("T" if layout == ("T",) else "reshape")
                return self._make_param(self.names.unique(f"{source}_{t}" if t else source),
                                        relayout(weight, layout), source)

            sym = self.views.derive(source, value, weight, scales, self._op_maker(source, ctx), make)
            if sym is not None:
                return sym
        for name, sym in self._derived.get((source, tag), ()):
            kept = self.params[name]
            if kept.dtype == value.dtype and kept.shape == value.shape and np.array_equal(kept, value):
                return sym
        name = self.names.unique(f"{source}_{tag}" if tag and source in self.var_names else source)
        sym = self._make_param(name, value, source)
        self._derived.setdefault((source, tag), []).append((name, sym))
        return sym

    # -- walk
    def _topo_order(self) -> List:
        nodes = list(self.graph.node)
        producer = {}
        for i, n in enumerate(nodes):
            for o in n.output:
                if o:
                    producer[o] = i
        order, state = [], [0] * len(nodes)
        produced_inputs: Dict[int, list] = {}  # computed once per node: a Sum of 10^5 inputs stays linear
        for start in range(len(nodes)):
            if state[start]:
                continue
            stack = [(start, 0)]
            state[start] = 1
            while stack:
                i, k = stack.pop()
                ins = produced_inputs.get(i)
                if ins is None:
                    ins = produced_inputs[i] = [x for x in nodes[i].input if x in producer]
                if k < len(ins):
                    stack.append((i, k + 1))
                    j = producer[ins[k]]
                    if state[j] == 1:
                        raise Error(f"ONNX graph has a cycle through node '{nodes[j].name or nodes[j].output[0]}'")
                    if state[j] == 0:
                        state[j] = 1
                        stack.append((j, 0))
                else:
                    state[i] = 2
                    order.append(nodes[i])
        return order

    @staticmethod
    def _unsupported_label(node, index: int) -> str:
        op = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"
        return f"{op} (node '{node.name or (node.output[0] if node.output else index)}')"

    def run(self) -> Symbol:
        from .onnx_converters import CONVERTERS

        for vi in self.data_inputs:
            dims = self.input_dims[vi.name]
            kwargs = {"onnx_name": vi.name, "data": 1}  # graph inputs are data, whatever their names
            if dims is not None:
                kwargs["shape"] = tuple(d if isinstance(d, int) else 0 for d in dims)
            elem = vi.type.tensor_type.elem_type if vi.type.HasField("tensor_type") else 0
            if elem == self.onnx.TensorProto.STRING:
                raise Error(f"ONNX input '{vi.name}' holds strings; autotile computes numeric tensors only")
            if elem and elem != self.onnx.TensorProto.FLOAT:
                kwargs["dtype"] = self._np_dtype(elem, f"ONNX input '{vi.name}'")
            self.values[vi.name] = Variable(self.var_names[vi.name], **kwargs)
            self.onnx_names[vi.name] = self.var_names[vi.name]
        self.values.update(self.initializers)
        # Constant subgraphs fold first; only the nodes left to convert must have a converter.
        # Unsupported nodes are collected (their outputs poisoned, so what depends on them is
        # skipped) and reported together, with every op type and node name.
        unsupported: List[str] = []
        poisoned: set = set()
        for index, node in enumerate(self._topo_order()):
            self.current_output = node.output[0] if node.output else None  # for an error's batch hint
            present = [x for x in node.input if x]
            if any(x in poisoned for x in present):  # downstream of an unsupported node
                poisoned.update(o for o in node.output if o)
                if node.domain not in ("", "ai.onnx") or node.op_type not in CONVERTERS:
                    unsupported.append(self._unsupported_label(node, index))
                continue
            ctx = NodeContext(self, node, index)
            values = [self.lookup(x, ctx) if x else None for x in node.input]
            outs = None
            known = node.domain in ("", "ai.onnx") and node.op_type in CONVERTERS
            from_weights = any(x in self.weights for x in present) and node.op_type not in NO_GRADIENT
            if all(isinstance(self.values.get(x), np.ndarray) for x in present) and not (from_weights and known):
                # A weight is not folded into a new constant when the op can run in the
                # graph: training must update the model's own tensor, not a copy of it.
                outs = fold(ctx, values, generic=node.domain in ("", "ai.onnx"))
                if outs is not None and from_weights:
                    self.weights.update(o for o in node.output if o)
            if outs is None and not known:
                unsupported.append(self._unsupported_label(node, index))
                poisoned.update(o for o in node.output if o)
                continue
            if outs is None:
                try:
                    outs = CONVERTERS[node.op_type](ctx)
                except NotFoldable as e:  # a converter needed a constant that holds an unknown dim
                    raise ctx.error(f"needs a constant input, but {e}; {self.unbound_hint()}") from None
                except Error as e:
                    if ctx.fold_refused is None:
                        raise
                    raise ctx.error(f"not folded at import time: {ctx.fold_refused} "
                                    f"(and it cannot run in the graph: {e})") from None
            self._bind(ctx, outs)
        if unsupported:
            raise Error(f"ONNX model has {len(unsupported)} node(s) with operators autotile does not support: "
                        + ", ".join(unsupported))
        outputs = []
        renamed = set()
        for o in self.graph.output:
            sym = self.as_symbol(o.name)
            node = sym.entries[0][0]
            if not node.is_variable and id(node) not in renamed:
                # The op computing a graph output takes the output's name (``logits``), so the
                # result comes back as ``logits_output`` rather than a helper op's name.
                name = self.names.keep(o.name)
                if name not in self.names.used:
                    self.names.used.add(name)
                    node.name = name
                    renamed.add(id(node))
                    self.onnx_names[o.name] = sym.list_outputs()[0]
            outputs.append(sym)
        if not outputs:
            raise Error("ONNX graph has no outputs")
        result = Group(outputs)
        used = set(result.list_inputs())
        result.params = {k: v for k, v in self.params.items() if k in used}
        result.onnx_names = dict(self.onnx_names)
        return result

    def _bind(self, ctx: NodeContext, outs):
        outs = list(outs)
        for i, name in enumerate(ctx.node.output):
            if not name:
                continue
            value = outs[i] if i < len(outs) else None
            if value is None:
                value = Unavailable(f"output {i} '{name}' of ONNX node '{ctx.display}' ({ctx.op_type}), "
                                    f"which autotile does not compute")
            elif isinstance(value, Symbol):
                if len(value.entries) != 1:
                    raise ctx.error(f"converter produced {len(value.entries)} outputs for '{name}'")
                self.onnx_names[name] = value.list_outputs()[0]
            elif isinstance(value, np.ndarray):
                pass
            else:
                raise ctx.error(f"internal: converter returned {type(value).__name__} for output '{name}'")
            self.values[name] = value


def import_model(path_or_model, batch_size: Optional[int] = None, shapes: Optional[Dict[str, tuple]] = None,
                 trainable=None) -> Symbol:
    """Import an ONNX model (path, bytes or ModelProto) as a Symbol; see :func:`autotile.onnx.load`."""
    from .onnx_batch import check_outputs, pin_hint, rebatch

    model = load_model(path_or_model)
    report = None
    if isinstance(batch_size, (int, np.integer)) and not isinstance(batch_size, bool) and batch_size > 0:
        # a fixed-batch export: rewrite the Reshape constants that provably hold the batch
        model, report = rebatch(model, int(batch_size), own=model is not path_or_model)
    importer = Importer(model, batch_size, shapes, trainable)
    importer.current_output = None
    try:
        sym = importer.run()
        if report is not None:
            check_outputs(importer, report)
        return sym
    except Error as e:
        hint = pin_hint(report, model.graph, importer.current_output)
        if not hint:
            raise
        raise Error(f"{e}; {hint}") from None
