"""k devices equal 1 device, with a float64 arbiter for float32 kink flips (issue 31, section 5).

A float32 step on k devices sums in another order than on 1 device. Where a value that is
zero-ish in exact arithmetic meets a kink (ReLU at 0, a max of two near-equal entries), the two
roundings can land on either side of it: one side passes the gradient, the other does not, and
a gradient entry differs by a whole term although the plan is right (Inception v3 on 4
devices: flagged in float32, equal to 5e-13 in float64). So the float32 comparison is only a
first look: when it fails, both steps run again in float64, where such a rounding cannot reach
the kink, and the check fails only if float64 disagrees too, at the strict float64 tolerance
(a wrong tile or a missing partial sum is off by whole terms in any precision)."""
from __future__ import annotations

from typing import Callable, Tuple

import numpy as np

#: float64: 4 devices equal 1 to this (the float64 fixture stage's tolerance)
F64_RTOL, F64_ATOL = 1e-9, 1e-11


def compare_step(ref, res, what: str, float64: bool = False) -> None:
    """Assert the k-device result `res` equals the 1-device `ref` (backend Results): outputs,
    auxiliary states, gradients and updated parameters, at float32 tolerances (gradients with
    an absolute slack that follows their largest entry: float32 sums in another order round
    like the largest of their terms) or, with `float64`, at the strict float64 ones."""
    def close(got, want, msg, rtol=1e-4, atol=1e-6):
        if float64:
            assert np.asarray(got).dtype == np.float64, f"{msg}: {np.asarray(got).dtype}, not float64"
            rtol, atol = F64_RTOL, F64_ATOL
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=msg)

    assert len(res.outputs) == len(ref.outputs), f"{what}: {len(res.outputs)} outputs, want {len(ref.outputs)}"
    for i, (got, want) in enumerate(zip(res.outputs, ref.outputs)):
        close(got, want, f"{what}: output {i}")
    assert set(res.aux or {}) == set(ref.aux or {}), f"{what}: aux {sorted(res.aux or {})}"
    for name, want in (ref.aux or {}).items():
        close(res.aux[name], want, f"{what}: aux {name}")
    assert set(res.grads or {}) == set(ref.grads or {}), f"{what}: gradients of {sorted(res.grads or {})}"
    for p, want in (ref.grads or {}).items():
        # a wrong tile or a missing partial sum is off by the whole entry
        atol = 1e-5 * max(1.0, float(np.max(np.abs(want), initial=0.0)))
        close(res.grads[p], want, f"{what}: grad {p}", 1e-3, atol)
        close(res.params[p], ref.params[p], f"{what}: param {p}", 1e-3, atol)


def assert_k_equals_1(run: Callable[[bool], Tuple[object, object]], what: str) -> str:
    """`run(float64)` -> (1-device Result, k-device Result) of the same step, with float32 or
    float64 values. Passes when the float32 results agree, or, when they do not, the float64
    ones agree strictly; returns which precision decided ("float32" or "float64"). A float64
    disagreement raises with both reports."""
    ref, res = run(False)
    try:
        compare_step(ref, res, what)
        return "float32"
    except AssertionError as first:
        ref64, res64 = run(True)
        try:
            compare_step(ref64, res64, what, float64=True)
        except AssertionError as second:
            raise AssertionError(f"{what}: k devices differ from 1 in float64 too:\n{second}\n"
                                 f"(float32 first: {first})") from None
        return "float64"


def assert_same_float64_step(ref, res) -> None:
    """A float64 step on k devices (backend Result `res`) equals the 1-device one (`ref`): every
    output to rtol 1e-12 (atol 1e-13), the same gradients, each gradient and updated parameter
    to rtol 1e-10 (atol 1e-12)."""
    assert len(res.outputs) == len(ref.outputs), (len(res.outputs), len(ref.outputs))
    for i, (got, want) in enumerate(zip(res.outputs, ref.outputs)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13, err_msg=f"output {i}")
    assert set(res.grads) == set(ref.grads), (sorted(res.grads), sorted(ref.grads))
    for k, g in ref.grads.items():
        np.testing.assert_allclose(res.grads[k], g, rtol=1e-10, atol=1e-12, err_msg=k)
    for k, p in ref.params.items():
        np.testing.assert_allclose(res.params[k], p, rtol=1e-10, atol=1e-12, err_msg=k)
