"""TDL parsing and interval analysis (csrc/tdl) through the Python bindings.

Expected values are worked out by hand from the index expressions (Tofu Sec 4.2's
shift_two example included) or enumerated by the brute-force oracle in tdl_oracle.py."""
import random

import pytest
from hypothesis import given, settings, HealthCheck
from hypothesis import strategies as st

from autotile import _core
from autotile.errors import Error

import tdl_oracle

FC = "data, weight, bias -> out: out[n, o] = sum(k) { data[n, k] * weight[o, k] } + bias[o]"
FC_NB = "data, weight -> out: out[n, o] = sum(k) { data[n, k] * weight[o, k] }"
CONV = ("data, weight -> out: out[n, co, y, x] = sum(ci, ky, kx) "
        "{ data[n, ci, y + ky - 1, x + kx - 1] * weight[co, ci, ky, kx] }")


def analyze(text, ins, outs, k):
    res = _core.analyze_tdl(text, ins, outs, k)
    return res, {s["var"]: s for s in res["strategies"]}


def need(s, i):
    n = s["inputs"][i]
    return "replicate" if n["replicate"] else (n["dim"], n["per_worker"])


# ----------------------------------------------------------------------------- hand-worked

def test_tofu_shift_two():
    # Tofu Sec 4.2: B = lambda i: A[i+2], i in [0, 9] -> A[2..6] and A[7..11].
    _, by = analyze("A -> B: B[i] = A[i + 2]", [(12,)], [(10,)], 2)
    assert list(by) == ["i"]
    assert need(by["i"], 0) == (0, [(2, 7), (7, 12)])
    assert by["i"]["outputs"] == [{"partial": False, "reducer": None, "dim": 0}]


def test_fully_connected_strategies():
    res, by = analyze(FC_NB, [(4, 6), (8, 6)], [(4, 8)], 2)
    assert list(by) == ["n", "o", "k"]
    assert not res["elementwise"]
    assert need(by["n"], 0) == (0, [(0, 2), (2, 4)])
    assert need(by["n"], 1) == "replicate"
    assert need(by["o"], 0) == "replicate"
    assert need(by["o"], 1) == (0, [(0, 4), (4, 8)])
    k = by["k"]
    assert k["reduction"] and k["outputs"] == [{"partial": True, "reducer": "sum", "dim": -1}]
    assert need(k, 0) == (1, [(0, 3), (3, 6)]) and need(k, 1) == (1, [(0, 3), (3, 6)])


def test_fully_connected_with_bias_has_no_reduction_split():
    # Every worker's kernel would add the bias: summing k partial results counts it k times.
    _, by = analyze(FC, [(4, 6), (8, 6), (8,)], [(4, 8)], 2)
    assert list(by) == ["n", "o"]
    assert need(by["n"], 2) == "replicate"
    assert need(by["o"], 1) == (0, [(0, 4), (4, 8)]) and need(by["o"], 2) == (0, [(0, 4), (4, 8)])


def test_fully_connected_k3_skips_indivisible():
    _, by = analyze(FC_NB, [(4, 6), (8, 6)], [(4, 8)], 3)
    assert list(by) == ["k"]
    assert need(by["k"], 0) == (1, [(0, 2), (2, 4), (4, 6)])


def test_conv_halo_same_padding():
    _, by = analyze(CONV, [(2, 4, 8, 8), (6, 4, 3, 3)], [(2, 6, 8, 8)], 2)
    assert list(by) == ["n", "co", "y", "x", "ci"]  # ky, kx: extent 3
    # worker 0: y in [0,3], ky in [0,2] -> y+ky-1 in [-1, 4] -> clipped [0, 4]
    # worker 1: y in [4,7] -> [3, 8] -> clipped [3, 7]
    assert need(by["y"], 0) == (2, [(0, 5), (3, 8)])
    assert need(by["y"], 1) == "replicate"
    assert need(by["ci"], 1) == (1, [(0, 2), (2, 4)])


def test_conv_stride_pad_dilation():
    # stride 2, dilation 3, pad 2: index 2*y + 3*ky - 2, y in [0, 6), ky in [0, 3); data 12.
    text = "data, w -> out: out[y] = sum(ky) { data[2*y + 3*ky - 2] * w[ky] }"
    _, by = analyze(text, [(12,), (3,)], [(6,)], 2)
    # worker 0: y 0..2 -> [-2, 4+6-2=8]; worker 1: y 3..5 -> [4, 10+6-2=14] -> clip 11
    assert need(by["y"], 0) == (0, [(0, 9), (4, 12)])
    _, by3 = analyze(text, [(12,), (3,)], [(6,)], 3)
    assert need(by3["ky"], 0) == (0, [(0, 9), (1, 12), (4, 12)])
    assert need(by3["ky"], 1) == (0, [(0, 1), (1, 2), (2, 3)])


def test_floor_division_indices():
    # nearest upsampling: out[i] = x[i / 2]
    _, by = analyze("x -> out: out[i] = x[i / 2]", [(4,)], [(8,)], 2)
    assert need(by["i"], 0) == (0, [(0, 2), (2, 4)])
    # (i + 1) / 2: worker 0 i 0..3 -> 0..2; worker 1 i 4..7 -> 2..4
    _, by = analyze("x -> out: out[i] = x[(i + 1) / 2]", [(5,)], [(8,)], 2)
    assert need(by["i"], 0) == (0, [(0, 3), (2, 5)])
    # nested: ((i + 1) / 2 + 1) / 2 = (i + 3) / 4; i 0..3 -> 0..1, 4..7 -> 1..2
    _, by = analyze("x -> out: out[i] = x[((i + 1) / 2 + 1) / 2]", [(3,)], [(8,)], 2)
    assert need(by["i"], 0) == (0, [(0, 2), (1, 3)])
    # negative numerators floor towards -inf: (i - 3) / 2 for i 0..3 -> -2..0 -> clipped 0..0
    _, by = analyze("x -> out: out[i] = x[(i - 3) / 2]", [(3,)], [(8,)], 2)
    assert need(by["i"], 0) == (0, [(0, 1), (0, 3)])


def test_negative_coefficients_and_parentheses():
    _, by = analyze("x -> y: y[i] = x[7 - i]", [(8,)], [(8,)], 2)
    assert need(by["i"], 0) == (0, [(4, 8), (0, 4)])
    _, by = analyze("x -> y: y[i] = x[-(2 * (i - 4)) + -(-1)]", [(9,)], [(4,)], 2)
    # -2i + 9: i 0..1 -> 7..9 -> clip 7..8; i 2..3 -> 3..5
    assert need(by["i"], 0) == (0, [(7, 9), (3, 6)])


def test_softmax_nested_reduction_gives_no_reduction_strategy():
    text = "data -> out: out[n, c] = exp(data[n, c]) / sum(k) { exp(data[n, k]) }"
    res, by = analyze(text, [(4, 6)], [(4, 6)], 2)
    assert list(by) == ["n", "c"]
    assert need(by["c"], 0) == (1, [(0, 6), (0, 6)])  # the whole row is needed
    assert not res["elementwise"]
    assert _core.parse_tdl(text)["statements"][0]["top_reducer"] is None


def test_multi_output_matched_by_name():
    res, by = analyze("x -> lo, hi: lo[i] = x[i]; hi[i] = x[i + 4]", [(8,)], [(4,), (4,)], 2)
    assert need(by["i"], 0) == (0, [(0, 6), (2, 8)])
    assert [o["dim"] for o in by["i"]["outputs"]] == [0, 0]
    assert not res["elementwise"]  # x is 8 long, the outputs 4: a slice, not element-wise


def test_multi_output_mixed_split_and_partial():
    text = "x -> rs, cs: rs[i] = sum(j) { x[i, j] }; cs[j] = sum(i) { x[i, j] }"
    _, by = analyze(text, [(4, 6)], [(4,), (6,)], 2)
    assert list(by) == ["i", "j"]
    assert by["i"]["outputs"] == [{"partial": False, "reducer": None, "dim": 0},
                                  {"partial": True, "reducer": "sum", "dim": -1}]
    assert by["i"]["reduction"]
    assert need(by["j"], 0) == (1, [(0, 3), (3, 6)])


def test_output_var_missing_from_a_statement_is_no_strategy():
    _, by = analyze("x -> a, b: a[i, j] = x[i, j]; b[i] = x[i, 0]", [(4, 6)], [(4, 6), (4,)], 2)
    assert list(by) == ["i"]
    # extents that disagree across statements: no strategy either
    _, by = analyze("x -> a, b: a[i] = x[i]; b[i] = x[i]", [(8,)], [(4,), (6,)], 2)
    assert by == {}


def test_variable_in_two_dims_is_no_strategy():
    _, by = analyze("x -> y: y[i] = x[i, i]", [(4, 4)], [(4,)], 2)
    assert by == {}
    _, by = analyze("a -> y: y[i, j] = a[i, j] * a[j, i]", [(4, 4)], [(4, 4)], 2)
    assert by == {}
    _, by = analyze("a, b -> y: y[i, j] = a[i, j] * b[j, i]", [(4, 6), (6, 4)], [(4, 6)], 2)
    assert need(by["i"], 0) == (0, [(0, 2), (2, 4)]) and need(by["i"], 1) == (1, [(0, 2), (2, 4)])


def test_k1_and_zero_extents():
    _, by = analyze(FC_NB, [(4, 6), (8, 6)], [(4, 8)], 1)
    assert list(by) == ["n", "o", "k"]
    assert need(by["k"], 0) == (1, [(0, 6)])
    _, by = analyze("x -> y: y[i, j] = x[i, j]", [(0, 4)], [(0, 4)], 2)
    assert list(by) == ["j"]


def test_unread_and_bare_inputs():
    res, by = analyze("dy, w, shape_src -> dx: dx[n] = sum(o) { dy[n, o] * w[o] }", [(4, 3), (3,), (4, 7)], [(4,)], 2)
    n = by["n"]["inputs"][2]
    assert n["read"] is False and n["replicate"] is True
    res, by = analyze("x, lr -> y: y[i] = x[i] * lr", [(4,), (1,)], [(4,)], 2)
    assert by["i"]["inputs"][1] == {"replicate": True, "read": True, "dim": -1, "per_worker": []}
    assert not res["elementwise"]
    # a bare input read alongside a split access needs its whole dim
    _, by = analyze("x -> y: y[i] = x[i] + f(x)", [(4,)], [(4,)], 2)
    assert need(by["i"], 0) == (0, [(0, 4), (0, 4)])


def test_reduction_range_from_coefficient_one():
    # window sum: r has no dim of its own; extent = 10 - (8 - 1) = 3
    text = "x -> y: y[i] = sum(r) { x[i + r] }"
    _, by = analyze(text, [(10,)], [(8,)], 3)
    assert list(by) == ["r"]
    assert need(by["r"], 0) == (0, [(0, 8), (1, 9), (2, 10)])


def test_reducers_and_top_level_rules():
    _, by = analyze("x, b -> y: y[i] = max(j) { x[i, j] } + b[i]", [(4, 6), (4,)], [(4,)], 2)
    assert by["j"]["outputs"][0] == {"partial": True, "reducer": "max", "dim": -1}
    _, by = analyze("x, b -> y: y[i] = b[i] + min(j) { x[i, j] }", [(4, 6), (4,)], [(4,)], 2)
    assert by["j"]["outputs"][0]["reducer"] == "min"
    _, by = analyze("x -> y: y[i] = prod(j) { x[i, j] }", [(4, 6)], [(4,)], 2)
    assert by["j"]["outputs"][0]["reducer"] == "prod"
    _, by = analyze("x, b -> y: y[i] = max(j) { x[i, j] } - b[i]", [(4, 6), (4,)], [(4,)], 2)
    assert by["j"]["outputs"][0]["reducer"] == "max"
    for text in ["x, b -> y: y[i] = prod(j) { x[i, j] } + b[i]",     # a term every worker adds would
                 "x, b -> y: y[i] = sum(j) { x[i, j] } + b[i]",      # count k times in sum/prod
                 "x, b -> y: y[i] = b[i] - sum(j) { x[i, j] }",       # negated reduction
                 "x, b -> y: y[i] = b[i] - max(j) { x[i, j] }",
                 "x -> y: y[i] = 2 * sum(j) { x[i, j] }",
                 "x -> y: y[i] = max(j) { x[i, j] } + max(k) { x[i, k] }",
                 "x -> y: y[i] = sum(j) { x[i, j] } > 0"]:
        ins = [(4, 6), (4,)] if text.startswith("x, b") else [(4, 6)]
        _, by = analyze(text, ins, [(4,)], 2)
        assert list(by) == ["i"], text
    _, by = analyze("x -> y: y[i] = (sum(j) { x[i, j] })", [(4, 6)], [(4,)], 2)
    assert list(by) == ["i", "j"]
    # directly nested reductions with one reducer are one reduction over both variables
    _, by = analyze("x -> y: y[] = sum(a) { sum(b) { x[a, b] } }", [(4, 6)], [()], 2)
    assert list(by) == ["a", "b"]
    _, by = analyze("x -> y: y[] = sum(a) { max(b) { x[a, b] } }", [(4, 6)], [()], 2)
    assert list(by) == ["a"]


def test_empty_reduction_is_its_body():
    res, by = analyze("x -> y: y[i] = x[i] * sum() { x[i] }", [(4,)], [(4,)], 2)
    assert list(by) == ["i"] and res["elementwise"]
    assert _core.parse_tdl("x -> y: y[i] = sum() { x[i] }")["statements"][0]["top_reduction_vars"] == []


def test_sibling_reductions_may_reuse_names():
    text = "x -> y: y[i] = sum(k) { x[i, k] } / sum(k) { x[i, k] * x[i, k] }"
    _, by = analyze(text, [(4, 6)], [(4,)], 2)
    assert list(by) == ["i"]


def test_rank0_accesses_and_scalars():
    res, by = analyze("s, x -> y: y[i] = x[i] * s[]", [(), (4,)], [(4,)], 2)
    assert need(by["i"], 0) == "replicate" and need(by["i"], 1) == (0, [(0, 2), (2, 4)])
    assert res["elementwise"]
    _, by = analyze("x -> y: y[] = sum(i) { x[i] }", [(6,)], [()], 2)
    assert by["i"]["outputs"][0]["partial"]


def test_elementwise_detection():
    ew = lambda t, i, o: _core.analyze_tdl(t, i, o, 2)["elementwise"]  # noqa: E731
    assert ew("a, b -> out: out[i, j] = a[i, j] + b[i, j]", [(4, 6), (4, 6)], [(4, 6)])
    assert ew("a, b -> out: out[i, j] = a[i, j] + b[j]", [(4, 6), (6,)], [(4, 6)])
    assert ew("a, b -> out: out[i, j] = a[i, j] + b[0, j]", [(4, 6), (1, 6)], [(4, 6)])
    assert not ew("a, b -> out: out[i, j] = a[i, j] + b[0, j]", [(4, 6), (2, 6)], [(4, 6)])
    assert not ew("a -> out: out[i, j] = a[j, i]", [(4, 4)], [(4, 4)])
    assert not ew("a -> out: out[i] = a[i + 1]", [(5,)], [(4,)])
    assert not ew("a -> out: out[i] = sum(j) { a[i, j] }", [(4, 6)], [(4,)])
    assert ew("a -> p, q: p[i] = f(a[i]); q[j] = g(a[j])", [(4,)], [(4,), (4,)])
    assert not ew("a -> p, q: p[i] = f(a[i]); q[j] = g(a[0])", [(4,)], [(4,), (1,)])


def test_grammar_extras():
    # comments, newlines, floats and exponents in arithmetic, comparisons, % outside
    # indices, calls named like reducers, trailing ';', no inputs
    text = """x, y -> out:   # header
      out[i, j] = max(x[i, j], 1.5e-3) * (y[i, j] % 2) + (x[i, j] >= .5) - -3 ;"""
    res, by = analyze(text, [(4, 6), (4, 6)], [(4, 6)], 2)
    assert list(by) == ["i", "j"] and res["elementwise"]
    res, by = analyze("-> out: out[i] = 0", [], [(4,)], 2)
    assert list(by) == ["i"] and by["i"]["inputs"] == []


def test_parse_tdl_description():
    d = _core.parse_tdl(FC)
    assert d["inputs"] == ["data", "weight", "bias"] and d["outputs"] == ["out"]
    st0 = d["statements"][0]
    assert st0["vars"] == ["n", "o"] and st0["reduction_vars"] == ["k"]
    assert st0["top_reducer"] is None and st0["top_reduction_vars"] == []  # the bias term
    assert d["split_vars"] == ["n", "o"] and d["input_arity"] == [2, 2, 1]
    st0 = _core.parse_tdl(FC_NB)["statements"][0]
    assert st0["top_reducer"] == "sum" and st0["top_reduction_vars"] == ["k"]


def test_parse_cache_reuses_programs():
    _core.clear_tdl_cache()
    assert _core.tdl_cache_size() == 0
    for n in range(2, 6):
        _core.analyze_tdl(FC, [(n * 2, 6), (8, 6), (8,)], [(n * 2, 8)], 2)
    assert _core.tdl_cache_size() == 1
    _core.parse_tdl(CONV)
    assert _core.tdl_cache_size() == 2


# ----------------------------------------------------------------------------- errors

def raises(text, match, ins=None, outs=None, k=2):
    with pytest.raises(Error, match=match):
        if ins is None:
            _core.parse_tdl(text)
        else:
            _core.analyze_tdl(text, ins, outs, k)


def test_parse_errors_name_position_and_token():
    raises("a -> b: b[i] = a[i", r"expected '\]' or ',' .* found end of text at line 1, column 19")
    raises("a -> b b[i] = a[i]", r"expected ':' after the header but found 'b' at line 1, column 8")
    raises("a -> b:\n  b[i] = a[i] $ 2", r"unexpected character '\$' at line 2, column 15")
    raises("a -> b: b[i] = a[i] a[i]", r"expected ';' or end of text but found 'a' at line 1, column 21")
    raises("a -> b: b[i] = ", r"expected an expression but found end of text")
    raises("a -> b: b[i] = a[i] +", r"expected an expression")
    raises("a -> b: b[i] = sum(k) { a[k] ", r"expected '}'")
    raises("a -> b: b[i] = 12abc", r"malformed number '12a'")
    raises("", r"expected an input name or '->' but found end of text at line 1, column 1")
    raises("a -> : b[i] = a[i]", r"expected an output name but found ':'")
    raises("a -> b: b[i] = a[i]\x01", r"unexpected character byte 0x01")


def test_semantic_parse_errors():
    raises("a -> b: b[i] = c[i]", r"unknown tensor 'c' \(inputs: a\) at line 1, column 16")
    raises("a -> b: b[i] = a[j]", r"unknown index variable 'j' at .*column 18")
    raises("a -> b: b[i] = a[i * i]", r"not affine: product of two index variables")
    raises("a -> b: b[i] = a[i % 2]", r"'%' is not allowed in an index")
    raises("a -> b: b[i] = a[i / 0]", r"divisor must be a positive integer constant")
    raises("a -> b: b[i] = a[i / -2]", r"divisor must be a positive integer constant")
    raises("a -> b: b[i] = a[i / i]", r"divisor must be a positive integer constant")
    raises("a -> b: b[i] = a[i * 0.5]", r"index must be an integer expression, found the number '0.5'")
    raises("a, c -> b: b[i] = a[c[i]]", r"data-dependent index")
    raises("a -> b: b[i, i] = a[i]", r"index variable 'i' is already defined")
    raises("a -> b: b[i] = sum(i) { a[i] }", r"index variable 'i' is already defined")
    raises("a -> b: b[i] = sum(k, k) { a[k] }", r"index variable 'k' is already defined")
    raises("a -> b: b[i] = a[i]; b[i] = a[i]", r"output 'b' has two statements")
    raises("a -> b, c: b[i] = a[i]", r"output 'c' has no statement")
    raises("a -> b: c[i] = a[i]", r"'c' is not an output named in the header")
    raises("a -> b: a[i] = a[i]", r"'a' is an input; a statement must define an output")
    raises("a -> b: b[i] = b[i]", r"output 'b' cannot be read")
    raises("a -> a: a[i] = 1", r"tensor name 'a' appears twice in the header")
    raises("a -> b: b[i] = a[i] + a[i, 0]", r"input 'a' is accessed with 2 indices here but with 1 elsewhere")
    raises("a -> b: b[i] = a[i + 99999999999999999999]", r"does not fit in 64 bits")
    raises("a -> b: b[i] = a[4611686018427387904 * 4 * i]", r"overflows 64 bits")
    raises("a -> b: b[i] = " + "(" * 5000 + "a[i]" + ")" * 5000, r"nested too deeply")
    raises("a -> b: b[i] = a[" + "(" * 5000 + "i" + ")" * 5000 + "]", r"nested too deeply")


def test_analysis_errors_name_the_fault():
    raises(FC, r"input 'weight' has rank 1 \(shape \(8,\)\) but is accessed with 2 indices",
           [(4, 6), (8,), (8,)], [(4, 8)])
    raises(FC, r"output 'out' has rank 3 .* but its statement has 2 index variables",
           [(4, 6), (8, 6), (8,)], [(4, 8, 1)])
    raises(FC, r"header names 3 input\(s\) but 2 input shape\(s\)", [(4, 6), (8, 6)], [(4, 8)])
    raises(FC, r"header names 1 output\(s\) but 2 output shape\(s\)", [(4, 6), (8, 6), (8,)], [(4, 8), (4, 8)])
    raises(FC, r"k must be at least 1 \(got 0\)", [(4, 6), (8, 6), (8,)], [(4, 8)], k=0)
    raises(FC, r"reduction variable 'k' indexes dims of different extents: 'data' dim 1 \(6\) and 'weight' dim 1 \(5\)",
           [(4, 6), (8, 5), (8,)], [(4, 8)])
    raises(FC, r"input 'data' has a negative dimension", [(4, -6), (8, 6), (8,)], [(4, 8)])
    raises("x -> y: y[i] = sum(r) { x[2 * r] }", r"cannot determine the range of reduction variable 'r'",
           [(8,)], [(4,)])
    raises("x -> y: y[i] = sum(r) { x[i + r] }", r"reduction variable 'r' gets no valid range", [(4,)], [(8,)])
    raises(FC, r"shapes", ["ab", (8, 6), (8,)], [(4, 8)])
    raises("a -> b: b[i] = c[i]", r"unknown tensor 'c'", [(4,)], [(4,)])


# ----------------------------------------------------------------------------- fuzz

_ALPHABET = st.sampled_from(list("abijkxyz0123456789 ,;:[](){}+-*/%=<>#.\n->") + ["sum", "->", "max", "e5"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_ALPHABET, max_size=40).map("".join))
def test_fuzz_garbage_never_crashes(text):
    try:
        _core.parse_tdl(text)
    except Error:
        pass


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([FC, CONV, "x -> lo, hi: lo[i] = x[i]; hi[i] = x[(i + 4) / 2]"]),
       st.lists(st.tuples(st.integers(0, 200), st.integers(0, 3), st.sampled_from(list("ij[]()+-*/:,;0 {}"))),
                max_size=4),
       st.lists(st.lists(st.integers(-1, 9), max_size=5), max_size=4),
       st.integers(-1, 5))
def test_fuzz_mutated_text_and_shapes_never_crash(text, edits, shapes, k):
    for pos, op, ch in edits:
        pos = pos % (len(text) + 1)
        text = text[:pos] + ch + text[pos + (op % 2):] if op < 3 else text[:pos] + text[pos + 1:]
    ins, outs = shapes[:-1], shapes[-1:]
    try:
        _core.analyze_tdl(text, ins, outs, k)
    except Error:
        pass


# ----------------------------------------------------------------------------- random affine

def _random_index(rng, names, depth=0):
    """A random affine index (each variable used at most once, so interval arithmetic is exact)."""
    names = list(names)
    rng.shuffle(names)
    terms = []
    for v in names[:rng.randint(1, len(names))]:
        c = rng.choice([1, 1, 2, 3, -1, -2])
        terms.append(f"{c}*{v}" if c != 1 else v)
    # a nonzero offset keeps reduction variables from indexing a dim alone (their extents
    # come from the w<r> inputs below)
    expr = " + ".join(terms) + f" + {rng.choice([-3, -2, -1, 1, 2, 3])}"
    if rng.random() < 0.4:
        expr = f"({expr}) / {rng.randint(1, 4)}"
        if rng.random() < 0.3:
            expr = f"({expr} + {rng.randint(0, 2)}) / {rng.randint(2, 3)}"
    if rng.random() < 0.2:
        expr = f"-({expr}) + {rng.randint(0, 12)}"
    return expr


@pytest.mark.parametrize("seed", range(60))
def test_random_affine_descriptions_match_brute_force(seed):
    rng = random.Random(seed)
    out_rank = rng.randint(1, 3)
    out_vars = [f"o{d}" for d in range(out_rank)]
    out_shape = tuple(rng.choice([2, 3, 4, 6]) for _ in range(out_rank))
    red = [f"r{d}" for d in range(rng.randint(0, 2))]
    red_ext = [rng.choice([2, 3, 4]) for _ in red]
    inputs, shapes, accesses = [], [], []
    pool = out_vars + red
    for n in range(rng.randint(1, 3)):
        rank = rng.randint(1, 3)
        idx = []
        for _ in range(rank):
            if rng.random() < 0.15:
                idx.append(":")
            else:
                k = rng.randint(1, min(2, len(pool)))
                idx.append(_random_index(rng, rng.sample(pool, k)))
        inputs.append(f"in{n}")
        shapes.append(tuple(rng.randint(1, 12) for _ in range(rank)))
        accesses.append(f"in{n}[{', '.join(idx)}]")
    # give every reduction variable a dim of its own so its extent is defined
    for r, e in zip(red, red_ext):
        inputs.append(f"w{r}")
        shapes.append((e,))
        accesses.append(f"w{r}[{r}]")
    body = " * ".join(accesses)
    if red:
        body = f"sum({', '.join(red)}) {{ {body} }}"
    text = f"{', '.join(inputs)} -> out: out[{', '.join(out_vars)}] = {body}"
    for k in (1, 2, 3):
        got = _core.analyze_tdl(text, shapes, [out_shape], k)
        want = tdl_oracle.strategies(text, shapes, [out_shape], k)
        assert [s["var"] for s in got["strategies"]] == list(want), text
        for s in got["strategies"]:
            assert s == want[s["var"]], (text, shapes, out_shape, k)


@pytest.mark.parametrize("seed", range(30))
def test_shared_variable_indices_are_conservative(seed):
    """Where one variable occurs in two terms of an index (i - i/2), interval arithmetic may
    over-approximate; it must never under-approximate what the worker reads."""
    rng = random.Random(1000 + seed)
    a, b = rng.choice([1, 2, 3, -1, -2]), rng.choice([1, -1, 2, -3])
    d = rng.randint(2, 4)
    idx = f"{a}*i + {b}*((i + j) / {d}) + {rng.randint(0, 9)}"
    text = f"x -> y: y[i, j] = x[{idx}]"
    out = (rng.choice([4, 6]), rng.choice([2, 3]))
    ins = [(rng.randint(4, 24),)]
    got = {s["var"]: s for s in _core.analyze_tdl(text, ins, [out], 2)["strategies"]}
    want = tdl_oracle.strategies(text, ins, [out], 2)
    assert set(got) == set(want)
    for v in got:
        for (glo, ghi), (wlo, whi) in zip(got[v]["inputs"][0]["per_worker"], want[v]["inputs"][0]["per_worker"]):
            if whi > wlo:
                assert glo <= wlo and ghi >= whi, (text, v)


def test_shape_arguments_are_validated_in_python():
    with pytest.raises(Error):
        _core.analyze_tdl(FC, [(4, 6), (8, 6), None], [(4, 8)], 2)
    with pytest.raises(Error):
        _core.analyze_tdl(FC, [(4, 6), (8, 6), (2 ** 70,)], [(4, 8)], 2)
    for k in (2.0, "2", 2 ** 40, None):
        with pytest.raises(Error, match="k must be"):
            _core.analyze_tdl(FC, [(4, 6), (8, 6), (8,)], [(4, 8)], k)
