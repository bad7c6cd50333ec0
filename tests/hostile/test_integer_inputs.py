"""Integer data (issue #18, "Silent wrong results"): an image batch of uint8 0..255 gave an
all-zero softmax on one device, int32 data a different step on 1 device than on 2. Every
integer input is now cast to the dtype the model declares for it (float32 unless a
Variable's ``__dtype__`` says otherwise) the same way on every device count; integers a
float32 cannot hold exactly are refused, and inputs declared integer (token ids) stay so."""
import numpy as np
import pytest

import autotile as at
from autotile.errors import Error


def _fc():
    data = at.sym.Variable("data")
    return at.sym.SoftmaxOutput(at.sym.FullyConnected(data, num_hidden=4, name="fc"), name="softmax")


def _params(rng):
    return {"fc_weight": (rng.standard_normal((4, 6)) * 0.01).astype(np.float32),
            "fc_bias": rng.standard_normal(4).astype(np.float32)}


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.int64, np.bool_])
@pytest.mark.parametrize("train", [False, True])
def test_integer_data_equals_float32_data_on_1_and_2_devices(dtype, train):
    rng = np.random.default_rng(0)
    ints = rng.integers(0, 2 if dtype is np.bool_ else 256, (8, 6)).astype(dtype)
    labels = rng.integers(0, 4, 8)
    params = _params(rng)
    net = _fc()
    # the oracle: the same numbers given as float32, on one device
    ref = at.backend.run(net, inputs={"data": ints.astype(np.float32), "softmax_label": labels.astype(np.float32)},
                         params=params, train=train)
    for devices in (1, 2):
        res = at.backend.run(net, devices=devices, inputs={"data": ints, "softmax_label": labels},
                             params=params, train=train)
        np.testing.assert_allclose(res.outputs[0], ref.outputs[0], rtol=1e-5, atol=1e-6)
        if train:
            for k, g in ref.grads.items():
                np.testing.assert_allclose(res.grads[k], g, rtol=1e-4, atol=1e-6, err_msg=f"{k} on {devices}")
    assert np.abs(ref.outputs[0]).sum() > 0


def test_integer_too_large_for_float32_is_refused_naming_the_input():
    rng = np.random.default_rng(1)
    data = np.full((8, 6), 2 ** 24 + 1, dtype=np.int64)
    for devices in (1, 2):
        with pytest.raises(Error) as e:
            at.backend.run(_fc(), devices=devices, inputs={"data": data, "softmax_label": np.zeros(8)},
                           params=_params(rng))
        assert type(e.value) is Error
        assert "'data'" in str(e.value) and "16777217" in str(e.value) and "float32" in str(e.value)


def test_input_declared_int64_stays_integer():
    # token ids, as an ONNX `input_ids` is declared: Embedding looks them up as integers
    ids = at.sym.Variable("input_ids", dtype="int64")
    emb = at.sym.Embedding(ids, input_dim=2 ** 25, output_dim=2, name="emb")
    net = at.sym.MakeLoss(at.sym.sum(emb), name="loss")
    from autotile.arguments import cast_inputs

    big = np.array([[2 ** 24 + 1, 3]], dtype=np.int32)
    cast = cast_inputs(net, {"input_ids": big})["input_ids"]
    assert cast.dtype == np.int64 and cast.tolist() == [[2 ** 24 + 1, 3]]


def test_integer_outside_declared_integer_range_is_refused():
    ids = at.sym.Variable("tokens", dtype="int32")
    net = at.sym.MakeLoss(at.sym.sum(at.sym.Embedding(ids, input_dim=10, output_dim=2, name="emb")), name="loss")
    from autotile.arguments import cast_inputs

    with pytest.raises(Error) as e:
        cast_inputs(net, {"tokens": np.array([2 ** 40], dtype=np.int64)})
    assert type(e.value) is Error and "'tokens'" in str(e.value) and "int32" in str(e.value)
