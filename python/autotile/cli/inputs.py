"""The synthetic inputs ``autotile run`` (and :func:`autotile.backend.run` without given
values) starts from: data, labels and ids of each input's kind, parameters as MXNet's
initializers set them."""
from __future__ import annotations

from ..errors import Error

#: ops that pass their first input's values on unchanged (moved, reshaped, cast): an index
#: reaches an Embedding or a take through them (``input_ids -> Reshape -> Gather``)
_VALUE_PRESERVING = {"Reshape", "reshape", "expand_dims", "squeeze", "Flatten", "flatten", "transpose", "SwapAxis",
                     "slice_axis", "slice", "broadcast_to", "tile", "Cast", "cast", "_copy", "identity"}


def _index_ranges(sym, known) -> dict:
    """Variable name -> how many rows the ids it holds index: an Embedding's input_dim, the
    size of the gathered axis of a take or gather_elements (the smallest where several use it)."""
    ranges = {}

    def source(entry):
        node = entry[0]
        while not node.is_variable and node.op in _VALUE_PRESERVING and node.inputs:
            node = node.inputs[0][0]
        return node.name if node.is_variable else None

    for n in sym.topo_nodes():
        uses = []
        if n.op == "Embedding" and n.inputs:
            uses.append((n.inputs[0], int(n.parsed_attrs()["input_dim"])))
        elif n.op in ("take", "gather_elements") and len(n.inputs) > 1:
            table = known.get((id(n.inputs[0][0]), n.inputs[0][1]))
            axis = int(n.parsed_attrs().get("axis", 0))
            if table is not None and -len(table) <= axis < len(table):
                uses.append((n.inputs[1], int(table[axis])))
        for entry, size in uses:
            name = source(entry)
            if name is not None and size > 0:
                ranges[name] = min(size, ranges.get(name, size))
    return ranges


#: loss heads whose second input is a regression target (real values of the output's shape)
_REGRESSION = ("LinearRegressionOutput", "MAERegressionOutput", "LogisticRegressionOutput")


def _label_roles(sym, known) -> dict:
    """Variable name -> number of classes (a SoftmaxOutput's label: class ids below its
    width) or None (a regression head's target: real values), from the loss heads' inputs,
    whatever the variables are called."""
    roles = {}
    for n in sym.topo_nodes():
        if n.is_variable or len(n.inputs) < 2 or not n.inputs[1][0].is_variable:
            continue
        name = n.inputs[1][0].name
        if n.op == "SoftmaxOutput":
            shape = known.get((id(n.inputs[0][0]), n.inputs[0][1]))
            axis = 1 if n.parsed_attrs().get("multi_output") else -1
            roles[name] = int(shape[axis]) if shape else 2
        elif n.op in _REGRESSION:
            roles[name] = None
    return roles


def synthetic_inputs(sym, seed: int, init: str = "xavier"):
    """Random inputs for a model, each of its kind: labels (a SoftmaxOutput's, or an input
    named ``*label``) are class ids below the width of the output they label, a regression
    head's target standard normal; ids that index a table (an Embedding's, a take's: ``input_ids``, ``token_type_ids``)
    are drawn below its size; other integer inputs (``attention_mask``) are ones and boolean
    ones all true, so nothing is masked out; other data are standard normal. Inputs keep the
    dtype the model declares. Parameters and auxiliary states start as MXNet's initializers set
    them (`init`: xavier, normal or uniform for weights; biases and BatchNorm beta/mean 0,
    gamma/variance 1; see :mod:`autotile.training_init`)."""
    import numpy as np

    from ..autodiff.graph import default_data_names
    from ..dtype_flags import dtype_name
    from ..symbol.infer import infer_entry_shapes
    from ..training_init import init_value

    known = infer_entry_shapes(sym, {})
    rng = np.random.default_rng(seed)
    param_rng = np.random.default_rng([seed, 1])  # the data do not depend on the initializer
    data_names = set(default_data_names(sym))
    int_range = _index_ranges(sym, known)
    classes = max(2, known.get((id(sym.entries[0][0]), 0), (0, 10))[-1])
    roles = _label_roles(sym, known)
    values = {}
    for n in sym.topo_nodes():
        if not n.is_variable:
            continue
        shape = known.get((id(n), 0))
        if shape is None:
            raise Error(f"cannot run: the shape of input '{n.name}' is unknown")
        dtype = np.dtype(dtype_name(n.attrs["__dtype__"])) if "__dtype__" in n.attrs else np.dtype(np.float32)
        if n.name in roles and roles[n.name] is None:
            values[n.name] = rng.standard_normal(shape).astype(np.float32)
        elif n.name in roles or n.name.endswith("label"):
            values[n.name] = rng.integers(0, roles.get(n.name) or classes, size=shape).astype(np.float32)
        elif n.name in int_range:
            values[n.name] = rng.integers(0, int_range[n.name], size=shape).astype(dtype)
        elif n.name in data_names and dtype.kind in "iub":
            values[n.name] = np.ones(shape, dtype)  # masks keep every position
        elif n.name in data_names:
            values[n.name] = rng.standard_normal(shape).astype(dtype)
        else:
            values[n.name] = init_value(n.name, shape, param_rng, init)
    return values
