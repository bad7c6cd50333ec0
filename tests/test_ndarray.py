"""at.nd: MXNet's binary NDArray list format, checked against files MXNet wrote
(tests/fixtures/mxnet, see generate.py) and against byte layouts built here from MXNet's
NDArray::Save / Load description."""
import glob
import os
import struct

import numpy as np
import pytest

import autotile as at
from autotile.errors import Error

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "mxnet")


def fixture(name):
    return os.path.join(FIX, name)


def read_bytes(name):
    with open(fixture(name), "rb") as f:
        return f.read()


def dtypes_dict():
    """The arrays generate.py saved in nd-dtypes.params, rebuilt from the same seed."""
    rng = np.random.RandomState(3)
    return {
        "arg:f32": rng.standard_normal((2, 3)).astype(np.float32),
        "arg:f64": rng.standard_normal((4,)).astype(np.float64),
        "aux:f16": rng.standard_normal((3, 1, 2)).astype(np.float16),
        "u8": np.arange(5, dtype=np.uint8) * 50,
        "i8": np.array([-128, -1, 0, 127], dtype=np.int8),
        "i32": np.array([[-(2 ** 31), 7], [2 ** 31 - 1, 0]], dtype=np.int32),
        "i64": np.array([-(2 ** 62), 2 ** 40, 3], dtype=np.int64),
        "one": np.array([42.5], dtype=np.float32),
    }


def test_load_every_dtype_as_mxnet_wrote_it():
    got = at.nd.load(fixture("nd-dtypes.params"))
    want = dtypes_dict()
    assert list(got) == list(want)  # names, prefixes kept, in file order
    for k, v in want.items():
        assert got[k].dtype == v.dtype, k
        assert got[k].shape == v.shape, k
        np.testing.assert_array_equal(got[k], v)


def test_save_is_byte_identical_to_mxnet():
    assert at.nd.dumps(dtypes_dict()) == read_bytes("nd-dtypes.params")


def test_save_file_and_reload(tmp_path):
    out = tmp_path / "x.params"
    at.nd.save(out, dtypes_dict())
    assert out.read_bytes() == read_bytes("nd-dtypes.params")
    back = at.nd.load(out)
    for k, v in dtypes_dict().items():
        np.testing.assert_array_equal(back[k], v)


@pytest.mark.parametrize("name", sorted(os.path.basename(p) for p in glob.glob(os.path.join(FIX, "*.params"))
                                        if not p.endswith(("nd-csr.params", "nd-np.params"))))
def test_every_mxnet_file_round_trips_byte_for_byte(name):
    data = read_bytes(name)
    assert at.nd.dumps(at.nd.loads(data, name)) == data


def test_unnamed_save_loads_as_list():
    got = at.nd.load(fixture("nd-list.params"))
    assert isinstance(got, list) and len(got) == 2
    np.testing.assert_array_equal(got[0], np.arange(6, dtype=np.float32).reshape(2, 3))
    assert got[1].dtype == np.int64
    np.testing.assert_array_equal(got[1], [1, 2])
    assert at.nd.dumps(got) == read_bytes("nd-list.params")


def test_numpy_shape_semantics_file_with_0d_and_empty_arrays():
    got = at.nd.load(fixture("nd-np.params"))
    assert got["scalar"].shape == () and got["scalar"].dtype == np.float32 and got["scalar"] == 2.5
    assert got["empty"].shape == (0, 3)
    np.testing.assert_array_equal(got["vec"], np.array([1.0, -2.0]))
    assert got["vec"].dtype == np.float64
    assert at.nd.dumps(got, np_shape=True) == read_bytes("nd-np.params")


def v2_array(shape, flag, payload, dev=(1, 0), ndim=None):
    """One dense V2 array laid out as NDArray::Save writes it."""
    return (struct.pack("<Iii", 0xF993FAC9, 0, len(shape) if ndim is None else ndim)
            + struct.pack(f"<{len(shape)}q", *shape) + struct.pack("<iii", dev[0], dev[1], flag) + payload)


def list_file(arrays, names=()):
    out = struct.pack("<QQQ", 0x112, 0, len(arrays)) + b"".join(arrays) + struct.pack("<Q", len(names))
    for n in names:
        out += struct.pack("<Q", len(n)) + n.encode()
    return out


def test_0d_array_in_v2_form_as_mxnet_legacy_save_writes_it():
    # mx.nd.save of a 0-d array without NumPy shape semantics: ndim 0, then context, dtype, data.
    blob = list_file([v2_array((), 1, struct.pack("<d", 3.5))])
    got = at.nd.loads(blob)
    assert got[0].shape == () and got[0].dtype == np.float64 and got[0] == 3.5
    assert at.nd.dumps([np.float64(3.5)]) == blob


def test_v1_and_pre_v1_arrays():
    data = np.arange(6, dtype=np.float32).reshape(3, 2)
    v1 = struct.pack("<Ii", 0xF993FAC8, 2) + struct.pack("<2q", 3, 2) + struct.pack("<iii", 1, 0, 0) + data.tobytes()
    # pre-V1: the first uint32 is ndim, dims are uint32, no storage type
    legacy = struct.pack("<I", 2) + struct.pack("<2I", 3, 2) + struct.pack("<iii", 1, 0, 0) + data.tobytes()
    got = at.nd.loads(list_file([v1, legacy], ["a", "b"]))
    np.testing.assert_array_equal(got["a"], data)
    np.testing.assert_array_equal(got["b"], data)


def test_gpu_context_arrays_load_on_host():
    blob = list_file([v2_array((2,), 0, np.array([1, 2], np.float32).tobytes(), dev=(2, 3))], ["w"])
    np.testing.assert_array_equal(at.nd.loads(blob)["w"], [1, 2])


def test_split_and_join_params():
    params = at.nd.load(fixture("cnn-0000.params"))
    args, aux = at.nd.split_params(params)
    assert set(aux) == {"bn1_moving_mean", "bn1_moving_var", "bn2_moving_mean", "bn2_moving_var"}
    assert "conv1_weight" in args and "bn1_gamma" in args and not any(":" in k for k in args)
    joined = at.nd.join_params(args, aux)
    assert set(joined) == set(params)
    assert at.nd.dumps({k: joined[k] for k in params}) == read_bytes("cnn-0000.params")
    # gluon's save_parameters writes names without a prefix: they are arguments
    args, aux = at.nd.split_params({"w": np.zeros(1)})
    assert list(args) == ["w"] and aux == {}


def test_load_checkpoint_matches_symbol_lists():
    sym, args, aux = at.nd.load_checkpoint(os.path.join(FIX, "mlp"), 0)
    assert sorted(args) == sorted(a for a in sym.list_arguments() if a not in ("data", "softmax_label"))
    assert aux == {}


def test_save_checkpoint_writes_mxnet_bytes(tmp_path):
    sym, args, aux = at.nd.load_checkpoint(os.path.join(FIX, "mlp"), 0)
    at.nd.save_checkpoint(str(tmp_path / "m"), 3, sym, args, aux)
    assert (tmp_path / "m-0003.params").read_bytes() == read_bytes("mlp-0000.params")
    assert at.sym.load(str(tmp_path / "m-symbol.json")).list_arguments() == sym.list_arguments()


def test_non_native_layout_and_strides_are_saved_little_endian_contiguous():
    a = np.arange(12, dtype=">f4").reshape(3, 4)[:, ::2]
    back = at.nd.loads(at.nd.dumps({"a": a}))["a"]
    assert back.dtype == np.float32
    np.testing.assert_array_equal(back, a)


# ----------------------------------------------------------------------------- errors

def test_sparse_storage_is_rejected_naming_file_offset_and_storage():
    with pytest.raises(Error, match=r"nd-csr.params.*array #0 has csr storage.*offset 28"):
        at.nd.load(fixture("nd-csr.params"))


def test_wrong_magic():
    blob = bytearray(read_bytes("nd-list.params"))
    blob[0] = 0x13
    with pytest.raises(Error, match=r"'bad.params'.*wrong magic number 0x113.*offset 0"):
        at.nd.loads(bytes(blob), "bad.params")


def test_every_truncation_is_an_error():
    blob = read_bytes("nd-dtypes.params")
    for cut in range(len(blob)):
        with pytest.raises(Error, match=r"'t.params'.*(truncated|offset)"):
            at.nd.loads(blob[:cut], "t.params")


def test_trailing_bytes_are_an_error():
    blob = read_bytes("nd-list.params") + b"\0"
    with pytest.raises(Error, match="trailing bytes"):
        at.nd.loads(blob)


def test_corrupt_fields_name_the_field_and_offset():
    good = list_file([v2_array((2,), 0, b"\0" * 8)], ["w"])
    bad_dtype = list_file([v2_array((2,), 99, b"\0" * 8)], ["w"])
    with pytest.raises(Error, match=r"array #0 has unsupported dtype flag 99 \(at byte offset 52\)"):
        at.nd.loads(bad_dtype)
    bad_ctx = list_file([v2_array((2,), 0, b"\0" * 8, dev=(77, 0))], ["w"])
    with pytest.raises(Error, match=r"bad context device type 77 \(at byte offset 44\)"):
        at.nd.loads(bad_ctx)
    bad_ndim = list_file([v2_array((2,), 0, b"\0" * 8, ndim=99)], ["w"])
    with pytest.raises(Error, match=r"bad array #0 shape ndim 99 \(at byte offset 32\)"):
        at.nd.loads(bad_ndim)
    bad_names = good[:-9] + struct.pack("<Q", 100) + b"w"
    with pytest.raises(Error, match=r"truncated while reading name #0"):
        at.nd.loads(bad_names)
    two_names = list_file([v2_array((2,), 0, b"\0" * 8)], ["a", "b"])
    with pytest.raises(Error, match=r"2 names for 1 arrays"):
        at.nd.loads(two_names)
    huge = struct.pack("<QQQ", 0x112, 0, 2 ** 60)
    with pytest.raises(Error, match="implausible array count"):
        at.nd.loads(huge)


def test_uninitialised_array_is_an_error():
    none = struct.pack("<Iii", 0xF993FAC9, 0, -1)  # NDArray() saved: unknown shape, nothing after
    with pytest.raises(Error, match="array 'x' is uninitialised"):
        at.nd.loads(list_file([none], ["x"]))


def test_save_rejects_what_mxnet_cannot_hold(tmp_path):
    with pytest.raises(Error, match="'c': dtype complex64"):
        at.nd.dumps({"c": np.zeros(2, np.complex64)})
    with pytest.raises(Error, match="names must be strings"):
        at.nd.dumps({1: np.zeros(2)})
    with pytest.raises(Error, match="dict name -> array or a list"):
        at.nd.dumps(np.zeros(2))
    with pytest.raises(Error, match="cannot read NDArray file"):
        at.nd.load(tmp_path / "missing.params")
