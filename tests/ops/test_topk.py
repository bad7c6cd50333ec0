"""topk (ONNX TopK with a constant k): values and indices against a NumPy oracle (a stable
sort: of equal elements the lower index first, as the ONNX spec says), the values' gradient
against finite differences, and the TDL descriptions of topk and _backward_topk against their
kernels (tdl_op_checks). Partition strategies: strategy_configs ('topk' cases)."""
import numpy as np
import pytest

import autotile as at
from gradcheck import check_gradient, forward, single_op
from tdl_op_checks import check_tdl


def _oracle(x, k, axis, largest):
    moved = np.moveaxis(x, axis, -1)
    rows = moved.reshape(-1, moved.shape[-1])
    idx = np.array([sorted(range(len(r)), key=lambda j: ((-r[j] if largest else r[j]), j))[:k] for r in rows])
    idx = idx.reshape(moved.shape[:-1] + (k,))
    return np.moveaxis(np.take_along_axis(moved, idx, -1), -1, axis), np.moveaxis(idx, -1, axis)


@pytest.mark.parametrize("k,axis,largest", [(3, 1, True), (2, 0, True), (4, -1, False), (1, 2, True), (6, 1, False)])
def test_values_and_indices_match_a_stable_sort(k, axis, largest):
    x = np.random.default_rng(0).integers(-3, 4, (4, 6, 5)).astype(np.float64)  # many ties
    values, indices = forward(single_op("topk", ["data"], k=k, axis=axis, largest=largest), {"data": x})
    want_v, want_i = _oracle(x, k, axis, largest)
    assert indices.dtype == np.int64
    np.testing.assert_array_equal(indices, want_i)
    np.testing.assert_array_equal(values, want_v)


@pytest.mark.parametrize("axis,largest", [(1, True), (0, False)])
def test_gradient_matches_finite_differences(axis, largest):
    x = np.random.default_rng(1).permutation(24).reshape(4, 6) * 0.37  # distinct: no tie flips
    check_gradient("topk", {"data": x}, {"k": 3, "axis": axis, "largest": largest})


def test_k_out_of_range_names_the_op_and_shape():
    with pytest.raises(at.Error, match=r"topk: k=7 .*\[1, 6\].*\(4, 6\)"):
        single_op("topk", ["data"], k=7, axis=1).infer_shape(data=(4, 6))


def test_tdl():
    x = np.random.default_rng(2).standard_normal((4, 6))
    check_tdl("topk", [x], {"k": 3, "axis": 1})
    dy = np.random.default_rng(3).standard_normal((4, 3))
    check_tdl("_backward_topk", [dy, np.argsort(x, axis=1)[:, :3]], {"axis": 1, "size": 6},
              perturb={1: lambda r, s: np.argsort(r.random((s[0], 6)), axis=1)[:, :s[1]]})


@pytest.mark.parametrize("op,attrs", [("topk", {"k": 2, "axis": 1, "largest": True}),
                                      ("topk", {"k": 3, "axis": 0, "largest": False}),
                                      ("_backward_topk", {"axis": 1, "size": 6}),
                                      ("_backward_topk", {"axis": 0, "size": 4})])
def test_jax_step_kernels_equal_numpy(op, attrs):
    """jax/kernels.py's topk and _backward_topk, jitted (and on NumPy), equal the registry's."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from autotile.jax.step import _kernel
    from autotile.ops.registry import KernelContext, get

    rng = np.random.default_rng(7)
    x = rng.integers(-3, 4, (4, 6)).astype(np.float32)  # ties
    if op == "topk":
        args = [x]
    else:
        k = 2
        shape = (4, k) if attrs["axis"] == 1 else (k, 6)
        idx = np.argsort(rng.random((4, 6)), axis=attrs["axis"])
        idx = idx[:, :k] if attrs["axis"] == 1 else idx[:k]
        args = [rng.standard_normal(shape).astype(np.float32), idx.astype(np.int64)]
    kernel = _kernel(op, get(op))
    want = get(op).forward(attrs, args, KernelContext(is_train=True))
    got = jax.jit(lambda *a: kernel(attrs, list(a), KernelContext(is_train=True, xp=jnp, key=None, out=None)))(*args)
    on_numpy = kernel(attrs, args, KernelContext(is_train=True, xp=np, key=None, out=None))
    for g, n, w in zip(got, on_numpy, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(n, w)
