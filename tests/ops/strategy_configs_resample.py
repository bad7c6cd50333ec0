"""Strategy-validator configurations of the resampling and index ops (issue 22's missing
operators): Deconvolution (groups 1, 2 and depthwise; stride 1, 2 and 3; pad; dilation;
output padding, negative and past the stride as ONNX's asymmetric pads give), resize
(nearest and linear, every coordinate transformation, up and down), argmax/argmin
(keepdims, select_last_index), ScatterND (reductions none and add) and topk (issue 31)."""
from __future__ import annotations

from typing import List

from strategy_validator import Case, In


def deconv_cases() -> List[Case]:
    cases = []
    for (cin, cout, group), k, stride, pad, adj, dil in [
            ((4, 4, 1), 3, 2, 1, 1, 1), ((4, 4, 4), 3, 2, 1, 0, 1), ((4, 6, 2), 2, 2, 0, 0, 1),
            ((2, 4, 1), 3, 1, 1, 0, 2), ((2, 3, 1), 4, 3, 2, 2, 1), ((2, 4, 1), 3, 2, 1, -1, 1),
            ((2, 2, 1), 1, 1, 0, 0, 1), ((2, 4, 1), 3, 2, 0, 3, 1)]:
        attrs = {"kernel": (k, k), "num_filter": cout, "num_group": group, "stride": (stride, stride),
                 "pad": (pad, pad), "adj": (adj, adj), "dilate": (dil, dil), "no_bias": False}
        cases.append(Case("Deconvolution", attrs, [In((2, cin, 5, 4)), In((cin, cout // group, k, k)), In((cout,))]))
    cases.append(Case("Deconvolution", {"kernel": (4,), "num_filter": 3, "stride": (2,), "pad": (1,)},
                      [In((3, 2, 6)), In((2, 3, 4))]))
    return cases


def resize_cases() -> List[Case]:
    cases = []
    for mode, coord, nearest, sizes, scales in [
            ("nearest", "asymmetric", "floor", (8, 6), "2,2"),
            ("nearest", "half_pixel", "round_prefer_floor", (10, 3), ""),
            ("nearest", "asymmetric", "ceil", (12, 6), "3,3/2"),
            ("nearest", "align_corners", "round_prefer_ceil", (7, 5), ""),
            ("linear", "half_pixel", "round_prefer_floor", (8, 6), "2,2"),
            ("linear", "pytorch_half_pixel", "round_prefer_floor", (3, 1), ""),
            ("linear", "align_corners", "round_prefer_floor", (9, 7), ""),
            ("linear", "asymmetric", "round_prefer_floor", (6, 2), "3/2,2/3"),
            ("cubic", "half_pixel", "round_prefer_floor", (8, 2), "2,2/3"),
            ("cubic", "align_corners", "round_prefer_floor", (7, 5), "")]:
        attrs = {"axes": (2, 3), "sizes": sizes, "scales": scales, "mode": mode, "coord": coord,
                 "nearest_mode": nearest}
        cases.append(Case("resize", attrs, [In((2, 3, 4, 3))]))
    cases.append(Case("resize", {"axes": (1,), "sizes": (9,), "mode": "linear"}, [In((4, 6))]))
    cases.append(Case("resize", {"axes": (1,), "sizes": (9,), "mode": "cubic", "cubic_coeff_a": -0.5,
                                 "exclude_outside": True, "coord": "asymmetric"}, [In((4, 6))]))
    return cases


def index_cases() -> List[Case]:
    cases = []
    for op in ("argmax", "argmin"):
        cases += [Case(op, {"axis": 1}, [In((4, 6, 3))]),
                  Case(op, {"axis": -1, "keepdims": True, "select_last_index": True}, [In((4, 6, 3), "binary")]),
                  Case(op, {}, [In((4, 6))])]
    for reduction in ("none", "add"):
        cases += [Case("ScatterND", {"reduction": reduction},
                       [In((6, 4, 3)), In((2, 2, 2), "index:4", data=True), In((2, 2, 3))]),
                  Case("ScatterND", {"reduction": reduction},
                       [In((6, 4)), In((3, 1), "index:6", data=True), In((3, 4))])]
    # full index tuples (M = rank, no trailing dims): ONNX ScatterElements imports this way
    cases += [Case("ScatterND", {"reduction": reduction}, [In((6, 4)), In((5, 2), "index:4", data=True), In((5,))])
              for reduction in ("none", "add")]
    # topk: the searched axis is vetoed; the others split (its backward op with it)
    cases += [Case("topk", {"k": 2, "axis": 1}, [In((4, 6, 3))]),
              Case("topk", {"k": 3, "axis": 0, "largest": False}, [In((6, 4))])]
    return cases


def resample_cases() -> List[Case]:
    return deconv_cases() + resize_cases() + index_cases()
