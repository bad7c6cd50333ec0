"""The TDL test oracle (tdl_interp) itself: it must reject what is wrong."""
import numpy as np
import pytest

from tdl_interp import NotEvaluable, TdlSyntaxError, check_reads, evaluate, parse


@pytest.mark.parametrize("text", [
    "x -> y: y[i] = x[i, j]",             # unknown variable / arity
    "x -> y: y[i, j] = x[i]",              # arity of x
    "x -> y: y[i] = x[i * i]",             # not affine
    "x -> y: y[i] = z[i]",                 # not an input
    "x -> y: y[i] = x[i / 0]",             # divisor must be positive
    "x -> y, z: y[i] = x[i]",              # missing statement
    "x -> y: y[i] = sum(i) { x[i] }",      # reduction variable clashes
])
def test_parse_rejects(text):
    with pytest.raises(TdlSyntaxError):
        parse(text, [(4,)], [(4,)] if ", z" not in text else [(4,), (4,)])


def test_evaluate_and_reads():
    x = np.arange(12.0).reshape(3, 4)
    desc = parse("x -> y: y[i, j] = x[j, i]", [(3, 4)], [(4, 3)])
    np.testing.assert_array_equal(evaluate(desc, [x], [(4, 3)])[0], x.T)
    wrong = parse("x -> y: y[i, j] = f(x[i, :])", [(4, 4)], [(4, 4)])
    with pytest.raises(AssertionError):
        check_reads(wrong, lambda xs: [xs[0].T], [np.ones((4, 4))], [(4, 4)])
    right = parse("x -> y: y[i, j] = f(x[:, i])", [(4, 4)], [(4, 4)])
    check_reads(right, lambda xs: [xs[0].T], [np.ones((4, 4))], [(4, 4)])
    with pytest.raises(NotEvaluable):
        evaluate(right, [np.ones((4, 4))], [(4, 4)])


def test_reduction_and_padding():
    x = np.arange(6.0)
    desc = parse("x -> y: y[i] = sum(k) { x[i + k - 1] }", [(6,)], [(6,)])
    # reduction over k ranges over x's dim (6), reads outside are zero padding
    want = [sum(x[j] for j in range(i - 1, i + 5) if 0 <= j < 6) for i in range(6)]
    np.testing.assert_array_equal(evaluate(desc, [x], [(6,)])[0], want)
