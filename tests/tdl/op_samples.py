"""Small sample configurations (attrs, input shapes) for every registered op that has a TDL
description, so TDL tests cover whatever op families have landed.

Each op gets hand-written configurations where it needs them (convolution windows, FC
flattening) and otherwise a generic guess: required attributes from a table of typical
values, inputs of a few base shapes with weights left to the op's shape inference."""
from __future__ import annotations

import itertools
from typing import Dict, Iterator, List, Tuple

from autotile.ops import registry

# Typical values of required or shape-determining attributes, by attribute name.
_ATTR_SAMPLES: Dict[str, list] = {
    "num_hidden": [4],
    "num_filter": [4],
    "kernel": [(3, 3)],
    "num_args": [2],
    "num_outputs": [2],
    "dtype": ["float32"],
    "a_min": [-0.5],
    "a_max": [0.5],
    "axis": [1],
    "dim": [1],
    "sizes": [(2, 2)],
    "data_spatial": [(6, 6)],
    "lr": [0.1],
}

# Explicit configurations: op name -> list of (raw attrs, input shapes with None = inferred).
_EXPLICIT: Dict[str, List[Tuple[dict, list]]] = {
    "FullyConnected": [
        ({"num_hidden": "4"}, [(4, 6), None, None]),
        ({"num_hidden": "4", "no_bias": "True"}, [(2, 3, 4), None]),
        ({"num_hidden": "6", "flatten": "False"}, [(2, 3, 4), None, None]),
        ({"num_hidden": "2"}, [(4,), None, None]),
    ],
    "Convolution": [
        ({"kernel": "(3, 3)", "num_filter": "4"}, [(2, 2, 6, 6), None, None]),
        ({"kernel": "(3, 3)", "num_filter": "2", "stride": "(2, 2)", "pad": "(1, 1)"}, [(2, 2, 7, 8), None, None]),
        ({"kernel": "(2, 3)", "num_filter": "2", "dilate": "(2, 1)", "pad": "(1, 2)", "no_bias": "True"},
         [(2, 2, 8, 6), None]),
        ({"kernel": "(3,)", "num_filter": "4", "stride": "(3,)", "pad": "(2,)"}, [(2, 4, 12), None, None]),
        ({"kernel": "(3, 3)", "num_filter": "4", "num_group": "2"}, [(2, 4, 6, 6), None, None]),
    ],
    "_backward_FullyConnected_data": [
        ({"num_hidden": "4"}, [(2, 4), (4, 12), (2, 3, 4)]),
        ({"num_hidden": "4", "flatten": "False"}, [(2, 3, 4), (4, 6), (2, 3, 6)]),
    ],
    "_backward_FullyConnected_weight": [
        ({"num_hidden": "4"}, [(2, 4), (2, 3, 4)]),
        ({"num_hidden": "4"}, [(4, 4), (4, 6)]),
    ],
    "_backward_FullyConnected_bias": [({"num_hidden": "4"}, [(6, 4)])],
    "_backward_Convolution_data": [
        ({"kernel": "(3, 3)", "num_filter": "4", "data_spatial": "(6, 6)"}, [(2, 4, 4, 4), (4, 2, 3, 3)]),
        ({"kernel": "(3, 3)", "num_filter": "2", "stride": "(2, 2)", "pad": "(1, 1)", "data_spatial": "(7, 8)"},
         [(2, 2, 4, 4), (2, 2, 3, 3)]),
        ({"kernel": "(2, 3)", "num_filter": "2", "dilate": "(2, 1)", "pad": "(1, 2)", "data_spatial": "(8, 6)"},
         [(2, 2, 8, 8), (2, 2, 2, 3)]),
    ],
    "_backward_Convolution_weight": [
        ({"kernel": "(3, 3)", "num_filter": "4"}, [(2, 4, 4, 4), (2, 2, 6, 6)]),
        ({"kernel": "(3, 3)", "num_filter": "2", "stride": "(2, 2)", "pad": "(1, 1)"}, [(2, 2, 4, 4), (2, 2, 7, 8)]),
    ],
    "_backward_LeakyReLU_gamma": [({"act_type": "prelu"}, [(4, 6), (4, 6), (6,)])],
    "LeakyReLU": [({"act_type": "leaky"}, [(4, 6)]), ({"act_type": "prelu"}, [(4, 6), (6,)])],
    "Reshape": [({"shape": "(6, 4)"}, [(2, 3, 4)]), ({"shape": "(2, -1)"}, [(4, 6)]), ({"shape": "(3, 8)"}, [(4, 6)])],
    "broadcast_to": [({"shape": "(4, 6)"}, [(1, 6)]), ({"shape": "(2, 3, 4)"}, [(3, 1)])],
    "_backward_take": [({"axis_size": "6"}, [(2, 3, 4), (2, 3)]), ({"axis": "1", "axis_size": "4"}, [(6, 2, 3), (2,)])],
    "_backward_gather_nd": [({"shape": "(6, 4)"}, [(2, 3, 4), (1, 2, 3)]), ({"shape": "(4, 6, 2)"}, [(4, 2), (2, 4)])],
    "_backward_gather_elements": [({"shape": "(6, 4)"}, [(6, 4), (6, 4)]),
                                  ({"axis": "1", "shape": "(6, 4)"}, [(3, 6), (3, 6)])],
    "Embedding": [({"input_dim": "6", "output_dim": "4"}, [(4, 3), (6, 4)])],
    "LRN": [({"nsize": "3"}, [(2, 4, 6, 6)])],
    "slice_axis": [({"axis": "1", "begin": "1", "end": "5"}, [(4, 6)])],
    "tile": [({"reps": "(2, 1)"}, [(4, 6)])],
    "pad": [({"pad_width": "(0, 0, 0, 0, 1, 1, 2, 2)"}, [(2, 4, 6, 6)])],
    "resize": [({"axes": "(1,)", "sizes": "(9,)", "mode": "linear"}, [(4, 6)]),
               ({"axes": "(2, 3)", "sizes": "(8, 6)"}, [(2, 3, 4, 3)])],
    "ScatterND": [({}, [(6, 4), (3, 1), (3, 4)])],
}

_BASE_SHAPES = [(4, 6), (2, 4, 6, 6), (2, 3, 4), (6,), (4, 1, 6)]


def _generic_attrs(op) -> List[dict]:
    names = [k for k, p in op.params.items() if p.required or k in ("kernel",)]
    choices = []
    for k in names:
        p = op.params[k]
        if p.choices:
            choices.append([str(c) for c in p.choices])
        elif k in _ATTR_SAMPLES:
            choices.append([registry.format_value(v) for v in _ATTR_SAMPLES[k]])
        else:
            return []
    return [dict(zip(names, combo)) for combo in itertools.product(*choices)]


def _infer(op, attrs, in_shapes):
    res = op.infer_shape(attrs, list(in_shapes))
    ins, outs = res[0], res[1]
    if any(s is None for s in ins) or any(s is None for s in outs):
        return None
    return [tuple(int(d) for d in s) for s in ins], [tuple(int(d) for d in s) for s in outs]


def samples(base_shapes=None) -> Iterator[Tuple[str, dict, list, list]]:
    """(op name, typed attrs, input shapes, output shapes) for every op with a TDL that a
    sample could be built for. Aliases are visited once (by their first name). Ops without
    hand-written configurations are tried on `base_shapes` (default: a fixed small set)."""
    base_shapes = base_shapes or _BASE_SHAPES
    seen = set()
    for name, op in sorted(registry.all_ops().items()):
        if op.tdl is None or op.infer_shape is None or id(op) in seen:
            continue
        seen.add(id(op))
        configs = list(_EXPLICIT.get(name, []))
        if not configs:
            for raw in _generic_attrs(op) or [{}]:
                for base in base_shapes:
                    configs.append((raw, "base", base))
        found = 0
        for cfg in configs:
            try:
                if len(cfg) == 3:
                    raw, _, base = cfg
                    attrs = registry.parse_attrs(op, raw)
                    nargs = len(op.arguments(attrs))
                    variants = [[base] + [None] * (nargs - 1), [base] * nargs]
                else:
                    raw, shapes = cfg
                    attrs = registry.parse_attrs(op, raw)
                    variants = [shapes]
                for shapes in variants:
                    try:
                        got = _infer(op, attrs, shapes)
                    except Exception:
                        continue
                    if got is None:
                        continue
                    yield name, attrs, got[0], got[1]
                    found += 1
                    break
            except Exception:
                continue
            if found >= 3 and len(cfg) == 3:
                break
