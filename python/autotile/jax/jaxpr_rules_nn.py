"""Gathers and convolutions of the jaxpr reader (rules registered in
:data:`autotile.jax.jaxpr_rules.RULES`).

``gather`` is read in the three forms JAX writes for networks: an embedding lookup
(``jnp.take(table, ids, axis=0)``, Flax ``nn.Embed``) as ``Embedding``; ``take_along_axis``
(the label's logit in a cross-entropy) as ``gather_elements``; a gather at indices known at
trace time (``x[:, 0]``) as a ``slice`` and a reshape. Other gathers are an Error naming
their dimension numbers. ``conv_general_dilated`` becomes ``Convolution`` in NCHW order
(the transposes around it that Flax's NHWC layout needs), with strides, symmetric padding,
dilation and feature groups.
"""
from __future__ import annotations

import numpy as np

from .jaxpr_import import T
from .jaxpr_rules import out_aval, reshape, rule, traced, transpose


def _dims(eqn):
    d = eqn.params["dimension_numbers"]
    get = lambda name: tuple(int(x) for x in getattr(d, name, ()) or ())  # noqa: E731
    return (get("offset_dims"), get("collapsed_slice_dims"), get("start_index_map"), get("operand_batching_dims"),
            get("start_indices_batching_dims"))


@rule("gather")
def gather(r, eqn, ins):
    data, idx = ins
    offset, collapsed, start_map, op_batch, idx_batch = _dims(eqn)
    sizes = tuple(int(s) for s in eqn.params["slice_sizes"])
    shape, _ = out_aval(eqn)
    if not isinstance(data, T):
        data = r.value(r.const(data), np.shape(data), np.asarray(data).dtype)
    if not isinstance(idx, T):
        return _constant_gather(r, eqn, data, np.asarray(idx), offset, collapsed, start_map, sizes, shape, ins)
    rank = len(data.shape)
    if (not op_batch and start_map == (0,) and collapsed == (0,) and rank == 2 and sizes == (1, data.shape[1])
            and idx.shape[-1:] == (1,) and offset == (len(idx.shape) - 1,)):
        ids = r.value(reshape(r, idx, idx.shape[:-1] or (1,), "ids"), idx.shape[:-1], idx.dtype)
        sym = r.op("Embedding", ids.sym, data.sym, input_dim=int(data.shape[0]), output_dim=int(data.shape[1]))
        return traced(r, eqn, sym if idx.shape[:-1] else reshape(r, r.value(sym, (1, data.shape[1]), data.dtype),
                                                                  shape), ins=ins)
    if (len(start_map) == 1 and collapsed == start_map and not offset and all(s == 1 for s in sizes)
            and op_batch == tuple(d for d in range(rank) if d != start_map[0])
            and idx_batch == tuple(range(len(op_batch))) and len(idx.shape) == rank + 1 and idx.shape[-1] == 1):
        axis = start_map[0]  # take_along_axis: out[i.., j] = data[i.., idx[i.., j, 0]] along `axis`
        ids = reshape(r, idx, idx.shape[:-1], "ids")
        return traced(r, eqn, r.op("gather_elements", data.sym, ids, axis=axis), ins=ins)
    raise r.error(f"a gather of this form (offset_dims={offset}, collapsed_slice_dims={collapsed}, "
                  f"start_index_map={start_map}, operand_batching_dims={op_batch}, slice_sizes={sizes}) has no rule: "
                  "embedding lookups (jnp.take(table, ids, axis=0)), take_along_axis and gathers at "
                  "constant indices are read")


def _constant_gather(r, eqn, data, idx, offset, collapsed, start_map, sizes, shape, ins):
    """A gather at one start position known at trace time: a slice, then a reshape."""
    if idx.size != len(start_map):
        raise r.error(f"a gather at {idx.size // max(len(start_map), 1)} constant positions (one is read as a slice)")
    begin = [0] * len(data.shape)
    for d, s in zip(start_map, idx.ravel()):
        begin[d] = int(np.clip(int(s), 0, data.shape[d] - sizes[d]))  # XLA clamps the start
    end = [b + s for b, s in zip(begin, sizes)]
    sym = data.sym
    if tuple(begin) != (0,) * len(begin) or tuple(end) != tuple(data.shape):
        sym = r.op("slice", sym, begin=tuple(begin), end=tuple(end), suffix="slice")
    kept = [s for d, s in enumerate(sizes) if d not in collapsed]
    if list(offset) != list(range(len(shape) - len(kept), len(shape))) and len(shape) != len(kept):
        raise r.error(f"a constant gather whose slice dims land at {offset} in the output")
    return traced(r, eqn, reshape(r, r.value(sym, tuple(end[d] - begin[d] for d in range(len(begin))), data.dtype),
                                  shape), ins=ins)


@rule("dynamic_slice")
def dynamic_slice(r, eqn, ins):
    data, *starts = ins
    if any(isinstance(s, T) for s in starts):
        raise r.error("a dynamic_slice at positions computed from the arguments (only constant positions are read)")
    sizes = tuple(int(s) for s in eqn.params["slice_sizes"])
    begin = tuple(int(np.clip(int(np.asarray(s)), 0, n - k)) for s, n, k in zip(starts, data.shape, sizes))
    end = tuple(b + k for b, k in zip(begin, sizes))
    return traced(r, eqn, r.op("slice", data.sym, begin=begin, end=end), ins=ins)


@rule("conv_general_dilated")
def conv(r, eqn, ins):
    """``lax.conv_general_dilated`` as ``Convolution`` (NCHW data, OIHW filter)."""
    p = eqn.params
    data, weight = ins
    if not isinstance(weight, T):
        weight = r.value(r.const(weight), np.shape(weight), np.asarray(weight).dtype)
    if not isinstance(data, T):
        raise r.error("a convolution of constant data")
    lhs_spec, rhs_spec, out_spec = p["dimension_numbers"]
    if any(int(d) != 1 for d in p.get("lhs_dilation") or ()):
        raise r.error(f"lhs_dilation {tuple(p['lhs_dilation'])} (a transposed convolution) is not supported")
    if int(p.get("batch_group_count", 1)) != 1:
        raise r.error("batch_group_count > 1 is not supported")
    pads = [(int(a), int(b)) for a, b in p["padding"]]
    if any(a != b for a, b in pads):
        raise r.error(f"asymmetric padding {pads} (autotile's Convolution pads both sides equally)")
    x = transpose(r, data, tuple(lhs_spec), "nchw")
    w = transpose(r, weight, tuple(rhs_spec), "oihw")
    kernel = tuple(int(weight.shape[d]) for d in rhs_spec[2:])
    n_out = int(weight.shape[rhs_spec[0]])
    sym = r.op("Convolution", x, w, kernel=kernel, stride=tuple(int(s) for s in p["window_strides"]),
               dilate=tuple(int(d) for d in (p.get("rhs_dilation") or (1,) * len(kernel))),
               pad=tuple(a for a, _ in pads), num_filter=n_out, num_group=int(p.get("feature_group_count", 1)),
               no_bias=True)
    shape, _ = out_aval(eqn)
    nchw = tuple(shape[d] for d in out_spec)
    inverse = tuple(int(i) for i in np.argsort(out_spec))
    return traced(r, eqn, transpose(r, r.value(sym, nchw, data.dtype), inverse, "out_layout"), ins=ins)
