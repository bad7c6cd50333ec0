"""Kernels that write straight into the runtime's output buffers (KernelContext.out) give the
same bits as the same kernel allocating its outputs: with a fresh buffer, with a buffer that
is one of the kernel's inputs (the memory plan's in-place reuse), and with a buffer that
partly overlaps an input (which the kernel must notice and not corrupt)."""
import numpy as np
import pytest

from autotile.ops.registry import KernelContext, get, parse_attrs

RNG = np.random.default_rng(7)


def _n(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _labels(n, k):
    return RNG.integers(0, k, n).astype(np.float32)


ACTS = ("relu", "sigmoid", "tanh", "softrelu", "softsign")
BIG = (300, 500)  # more elements than ops.optimizer.BLOCK: the update runs block by block

CASES = {
    "fc": ("FullyConnected", {"num_hidden": "7"}, lambda: [_n(5, 12), _n(7, 12), _n(7)]),
    "fc_no_bias": ("FullyConnected", {"num_hidden": "7", "no_bias": "True"}, lambda: [_n(5, 3, 4), _n(7, 12)]),
    "fc_no_flatten": ("FullyConnected", {"num_hidden": "7", "flatten": "False"},
                      lambda: [_n(2, 5, 12), _n(7, 12), _n(7)]),
    "fc_float64": ("FullyConnected", {"num_hidden": "7"},
                   lambda: [_n(5, 12, dtype=np.float64), _n(7, 12, dtype=np.float64), _n(7, dtype=np.float64)]),
    "fc_mixed_dtypes": ("FullyConnected", {"num_hidden": "7"},
                        lambda: [_n(5, 12), _n(7, 12, dtype=np.float64), _n(7)]),
    "fc_bwd_data": ("_backward_FullyConnected_data", {"num_hidden": "7"}, lambda: [_n(5, 7), _n(7, 12), _n(5, 3, 4)]),
    "fc_bwd_weight": ("_backward_FullyConnected_weight", {"num_hidden": "7"}, lambda: [_n(5, 7), _n(5, 3, 4)]),
    "fc_bwd_bias": ("_backward_FullyConnected_bias", {"num_hidden": "7"}, lambda: [_n(5, 7)]),
    **{f"act_{k}": ("Activation", {"act_type": k}, lambda: [_n(6, 10)]) for k in ACTS},
    **{f"act_bwd_{k}": ("_backward_Activation", {"act_type": k}, lambda: [_n(6, 10), np.tanh(_n(6, 10))])
       for k in ACTS},
    **{op: (op, {}, lambda: [_n(6, 10), _n(6, 10) + 3.0])
       for op in ("elemwise_add", "elemwise_sub", "elemwise_mul", "elemwise_div")},
    "add_n_1": ("add_n", {"num_args": "1"}, lambda: [_n(6, 10)]),
    "add_n_2": ("add_n", {"num_args": "2"}, lambda: [_n(6, 10), _n(6, 10)]),
    "add_n_4": ("add_n", {"num_args": "4"}, lambda: [_n(6, 10) for _ in range(4)]),
    "softmax": ("softmax", {"axis": "-1"}, lambda: [_n(6, 10)]),
    "softmax_temperature": ("softmax", {"axis": "0", "temperature": "2.5"}, lambda: [_n(6, 10)]),
    "softmax_activation_instance": ("SoftmaxActivation", {"mode": "instance"}, lambda: [_n(3, 4, 5)]),
    "softmax_activation_channel": ("SoftmaxActivation", {"mode": "channel"}, lambda: [_n(3, 4, 5)]),
    "softmax_output": ("SoftmaxOutput", {}, lambda: [_n(6, 10), _labels(6, 10)]),
    "softmax_output_preserve": ("SoftmaxOutput", {"preserve_shape": "True"}, lambda: [_n(2, 3, 10), _labels(6, 10)]),
    "softmax_output_multi": ("SoftmaxOutput", {"multi_output": "True"}, lambda: [_n(2, 10, 3), _labels(6, 10)]),
    "sgd": ("sgd_update", {"lr": "0.1", "wd": "0.01", "rescale_grad": "0.5", "clip_gradient": "0.3"},
            lambda: [_n(*BIG), _n(*BIG)]),
    "sgd_mom": ("sgd_mom_update", {"lr": "0.1", "wd": "0.01", "momentum": "0.9", "clip_gradient": "0.3"},
                lambda: [_n(*BIG), _n(*BIG), _n(*BIG)]),
    "adam": ("adam_update", {"lr": "0.01", "wd": "0.01", "rescale_grad": "0.5"},
             lambda: [_n(*BIG), _n(*BIG), _n(*BIG), np.abs(_n(*BIG))]),
    "sgd_float64": ("sgd_update", {"lr": "0.1", "wd": "0.01"},
                    lambda: [_n(*BIG, dtype=np.float64), _n(*BIG, dtype=np.float64)]),
    "sgd_mixed_dtypes": ("sgd_update", {"lr": "0.1"}, lambda: [_n(*BIG), _n(*BIG, dtype=np.float64)]),
}
# cases whose plain expression promotes (mixed dtypes): the kernel may decline the buffer
MAY_DECLINE = {"fc_mixed_dtypes"}


def _run(name, inputs, out=None):
    op, raw, _ = CASES[name]
    opdef = get(op)
    return opdef.forward(parse_attrs(opdef, raw), inputs, KernelContext(out=out))


def _case(name):
    inputs = CASES[name][2]()
    reference = _run(name, [x.copy() for x in inputs])
    return inputs, [np.asarray(r) for r in reference]


def _same_bits(got, want, what):
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype, f"{what}: {got.shape} {got.dtype} vs {want.shape} {want.dtype}"
    assert got.tobytes() == want.tobytes(), f"{what}: max difference {np.max(np.abs(got - want))}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_out_buffer_gives_the_same_bits(name):
    inputs, reference = _case(name)
    out = [np.full(r.shape, np.nan, r.dtype) for r in reference]
    kept = [x.copy() for x in inputs]
    got = _run(name, inputs, out)
    for i, (g, o, r) in enumerate(zip(got, out, reference)):
        _same_bits(g, r, f"{name} output {i}")
        if name not in MAY_DECLINE:
            assert g is o, f"{name} output {i} was not written into its buffer"
    for x, k in zip(inputs, kept):
        assert x.tobytes() == k.tobytes(), f"{name} wrote into an input"


@pytest.mark.parametrize("name", sorted(CASES))
def test_out_buffer_that_is_an_input(name):
    """Every pairing of an output with an input of its shape and dtype: the kernel either
    handles its buffer being that input or computes elsewhere; the bits do not change."""
    inputs0, reference = _case(name)
    pairs = [(i, j) for i, r in enumerate(reference) for j, x in enumerate(inputs0)
             if x.shape == r.shape and x.dtype == r.dtype]
    if not pairs:
        pytest.skip("no input has an output's shape and dtype")
    for i, j in pairs:
        inputs, reference = _case(name)
        out = [np.full(r.shape, np.nan, r.dtype) for r in reference]
        out[i] = inputs[j]
        got = _run(name, inputs, out)
        for k, (g, r) in enumerate(zip(got, reference)):
            _same_bits(g, r, f"{name} output {k} (output {i} in input {j})")


@pytest.mark.parametrize("name", ["sgd", "sgd_mom", "adam"])
def test_update_in_place_of_weight_and_states(name):
    """The memory plan's reuse for an update: the new weight in the weight's buffer, each new
    state in its state's buffer, all at once."""
    inputs, reference = _case(name)
    out = [inputs[0]] + inputs[2:]
    got = _run(name, inputs, out)
    for k, (g, o, r) in enumerate(zip(got, out, reference)):
        assert g is o
        _same_bits(g, r, f"{name} output {k}")


@pytest.mark.parametrize("name", sorted(CASES))
def test_out_buffer_overlapping_an_input_by_one_element(name):
    """A buffer that shares all but one element with input 0 (no memory plan makes this, but a
    kernel must not corrupt an input it has yet to read)."""
    inputs, reference = _case(name)
    x, r = inputs[0], reference[0]
    if x.dtype != r.dtype:
        pytest.skip("output 0 and input 0 differ in dtype")
    n = max(x.size, r.size)
    room = np.empty(n + 1, x.dtype)
    room[:x.size] = x.reshape(-1)
    inputs[0] = room[:x.size].reshape(x.shape)
    out = [np.full(q.shape, np.nan, q.dtype) for q in reference]
    out[0] = room[1:1 + r.size].reshape(r.shape)
    got = _run(name, inputs, out)
    for k, (g, q) in enumerate(zip(got, reference)):
        _same_bits(g, q, f"{name} output {k}")
