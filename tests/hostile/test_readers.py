"""File readers given hostile files (issue #18 "Readers", issue #13 item 13): deep nesting,
a caller's file descriptor, None, a .params header whose dims overflow int64 or claim more
bytes than the file holds, attribute values out of range. Each gets autotile.Error naming
the file, node or attribute, without allocating what the file claims."""
import json
import os
import struct

import numpy as np
import pytest

import autotile as at
from autotile.errors import Error
from hostile_util import raises_naming


_raises = raises_naming


def _fc_doc():
    return json.loads(at.sym.FullyConnected(at.sym.Variable("data"), num_hidden=3, name="fc").tojson())


def _params_bytes(dims, payload=b""):
    """An MXNet NDArray file (V2) with one named float32 array whose header claims `dims`."""
    return (struct.pack("<QQQ", 0x112, 0, 1) + struct.pack("<Ii", 0xF993FAC9, 0) + struct.pack("<i", len(dims))
            + struct.pack(f"<{len(dims)}q", *dims) + struct.pack("<iii", 1, 0, 0) + payload
            + struct.pack("<QQ", 1, 1) + b"w")


@pytest.mark.parametrize("depth", [100_000])
def test_symbol_json_nested_deeply(depth):
    _raises(lambda: at.sym.load_json("[" * depth + "]" * depth), "nested too deeply")
    _raises(lambda: at.sym.load_json('{"nodes": ' + "{\"a\": " * depth + "1" + "}" * depth + "}"),
            "nested too deeply")


def test_sym_load_leaves_the_callers_fd_open(tmp_path):
    path = tmp_path / "net-symbol.json"
    path.write_text(json.dumps(_fc_doc()))
    fd = os.open(path, os.O_RDONLY)
    try:
        sym = at.sym.load(fd)
        assert sym.list_arguments() == ["data", "fc_weight", "fc_bias"]
        os.fstat(fd)  # raises OSError if load closed it
        os.lseek(fd, 0, os.SEEK_SET)
        assert at.sym.load(fd).list_arguments() == sym.list_arguments()
    finally:
        os.close(fd)


@pytest.mark.parametrize("bad", [None, 3.5, ["a.json"]])
def test_sym_load_of_what_is_not_a_path(bad):
    _raises(lambda: at.sym.load(bad), "sym.load needs a file path", type(bad).__name__)
    _raises(lambda: at.nd.load(bad), "nd.load needs a file path", type(bad).__name__)


def test_nd_load_leaves_the_callers_fd_open(tmp_path):
    path = tmp_path / "w.params"
    at.nd.save(str(path), {"w": np.arange(6, dtype=np.float32)})
    fd = os.open(path, os.O_RDONLY)
    try:
        np.testing.assert_array_equal(at.nd.load(fd)["w"], np.arange(6, dtype=np.float32))
        os.fstat(fd)
    finally:
        os.close(fd)


@pytest.mark.parametrize("dims", [(2 ** 62, 2 ** 62), (2 ** 62, 2 ** 62, 2 ** 62), (2 ** 20, 2 ** 20), (1000, 1)])
def test_params_header_claiming_more_than_the_file(tmp_path, dims):
    path = tmp_path / "bad.params"
    path.write_bytes(_params_bytes(dims, payload=b"\0" * 8))
    msg = _raises(lambda: at.nd.load(str(path)), str(path), "array #0", f"shape {dims}")
    assert "more than the" in msg


def test_params_header_that_fits_still_loads(tmp_path):
    path = tmp_path / "ok.params"
    path.write_bytes(_params_bytes((2, 1), payload=struct.pack("<2f", 1.5, -2.0)))
    np.testing.assert_array_equal(at.nd.load(str(path))["w"], np.array([[1.5], [-2.0]], np.float32))


def test_num_hidden_beyond_int64_names_node_and_attribute():
    doc = _fc_doc()
    doc["nodes"][-1]["attrs"]["num_hidden"] = str(2 ** 70)
    _raises(lambda: at.sym.load_json(json.dumps(doc)), "'fc'", "num_hidden", "int64")


@pytest.mark.parametrize("shape", ["abc", "(2, -5)", "((1,),)", "(" * 5000 + ")" * 5000, str((2 ** 64, 3))])
def test_bad_shape_attribute_names_variable_and_attribute(shape):
    doc = _fc_doc()
    doc["nodes"][0].setdefault("attrs", {})["__shape__"] = shape
    _raises(lambda: at.sym.load_json(json.dumps(doc)), "'data'", "__shape__")
