"""Crafted ONNX files that asked the importer for gigabytes (issue 31, section 3).

* A few hundred bytes of ONNX whose constant folding builds a result of 2^29 elements: the
  size is computed from the folded inputs (a ``Div`` of constants, invisible to ONNX shape
  inference) before NumPy builds anything.
* External data: a tensor declaring 4x4 floats whose external file is 3 GB (a sparse file:
  no disk) is compared with its declared bytes and the file's size before anything is read.
* A model given as bytes or as a ModelProto has no directory: its external data is an Error,
  never a file of the process's working directory.

Each bomb runs in a child process under an address-space cap (``RLIMIT_AS``) of its start
plus 1.5 GB, so the old code failed fast (a MemoryError folded into an Error that names
NumPy's allocation) rather than taking the machine's memory; the fixed importer must refuse
with a message naming the node and the size, and its peak resident memory stays small.
"""
import os
import sys
import time

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import autotile as at  # noqa: E402
from autotile.errors import Error  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from subprocess_util import PRINT_PEAK, peak_rss, run_python  # noqa: E402

#: the child sets RLIMIT_AS to its address space after imports plus this
CAP_EXTRA = 1536 << 20

CAPPED_LOAD = """
import resource, sys
import numpy as np
import autotile as at
import onnx
from autotile.errors import Error
with open("/proc/self/status") as f:
    vm = next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith("VmSize:"))
resource.setrlimit(resource.RLIMIT_AS, (vm + {extra}, vm + {extra}))
try:
    sym = at.onnx.load(sys.argv[1])
    print("loaded|" + ",".join(sorted(sym.params)))
except Error as e:
    print("Error|" + str(e).replace(chr(10), " "))
""" + PRINT_PEAK


def _capped_load(path):
    proc = run_python(CAPPED_LOAD.format(extra=CAP_EXTRA), str(path), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.splitlines()[0], peak_rss(proc.stdout)


def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def _i64(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


HALF = 1 << 29  # elements of each bomb: 2x the fold limit; 4 GiB as int64, 2 GiB as float32


def _bomb(kind):
    """A tiny model whose folded node `bomb` would hold 2^29 elements; the size comes from
    ``Div(2^30, 2)``, which ONNX shape inference does not propagate."""
    inits = [_i64("big", [1 << 30]), _i64("two", [2])]
    one = np.ones(1, np.uint8 if kind == "Concat" else np.float32)  # a Constant node: not a weight
    nodes = [helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(one)),
             helper.make_node("Div", ["big", "two"], ["n"], name="div")]
    if kind == "Range":
        inits += [_i64("zero", 0), _i64("step", 1)]
        nodes += [helper.make_node("Squeeze", ["n"], ["limit"]),
                  helper.make_node("Range", ["zero", "limit", "step"], ["r"], name="bomb"),
                  helper.make_node("Cast", ["r"], ["out"], to=TensorProto.FLOAT)]
    elif kind == "Expand":
        nodes += [helper.make_node("Expand", ["one", "n"], ["out"], name="bomb")]
    elif kind == "Tile":
        nodes += [helper.make_node("Tile", ["one", "n"], ["out"], name="bomb")]
    elif kind == "ConstantOfShape":
        nodes += [helper.make_node("ConstantOfShape", ["n"], ["out"], name="bomb")]
    elif kind == "Pad":
        inits += [_i64("z", [0])]
        nodes += [helper.make_node("Concat", ["z", "n"], ["pads"], axis=0),
                  helper.make_node("Pad", ["one", "pads"], ["out"], name="bomb")]
    elif kind == "Resize":
        nodes += [helper.make_node("Resize", ["one", "", "", "n"], ["out"], name="bomb", mode="nearest")]
    elif kind == "Concat":  # each input 2^28 (legal, 256 MB as uint8), together 2^29
        nodes += [helper.make_node("Div", ["n", "two"], ["q"]),
                  helper.make_node("Div", ["q", "two"], ["quarter"]),
                  helper.make_node("Expand", ["one", "quarter"], ["e"]),  # 2^27 uint8: 128 MB, allowed
                  helper.make_node("Concat", ["e", "e", "e", "e"], ["c"], name="bomb", axis=0),
                  helper.make_node("Cast", ["c"], ["out"], to=TensorProto.FLOAT)]
    nodes.append(helper.make_node("Add", ["x", "out"], ["y"]))
    return _model(nodes, [_vi("x", [1])], [_vi("y", None)], inits)


@pytest.mark.parametrize("kind", ["Range", "Expand", "Tile", "ConstantOfShape", "Pad", "Resize", "Concat"])
def test_fold_result_size_is_checked_before_it_is_built(tmp_path, kind):
    m = _bomb(kind)
    assert len(m.SerializeToString()) < 700  # a few hundred bytes
    path = tmp_path / "bomb.onnx"
    onnx.save_model(m, str(path))
    line, peak = _capped_load(path)
    # Either refused naming the node and the size, or imported with the node left to run time;
    # never a MemoryError, and never the 2 to 4 GB the result would take.
    assert "MemoryError" not in line and "Unable to allocate" not in line, line
    if line.startswith("Error|"):
        assert "'bomb'" in line and str(HALF) in line, line
    assert peak < (600 << 20) + (140 << 20 if kind == "Concat" else 0), (line, peak)


def test_fold_limit_is_still_the_limit_and_below_it_folds():
    """An Expand to 2^10 elements through the same Div folds to the exact NumPy value."""
    inits = [_i64("big", [1 << 11]), _i64("two", [2])]
    three = numpy_helper.from_array(np.full(1, 3, np.float32))
    nodes = [helper.make_node("Constant", [], ["three"], value=three),
             helper.make_node("Div", ["big", "two"], ["n"]), helper.make_node("Expand", ["three", "n"], ["e"]),
             helper.make_node("Add", ["x", "e"], ["y"])]
    sym = at.onnx.load(_model(nodes, [_vi("x", [1])], [_vi("y", None)], inits))
    values = [v for v in sym.params.values() if v.shape == (1 << 10,)]
    assert len(values) == 1 and np.array_equal(values[0], np.full(1 << 10, 3, np.float32))


# ----------------------------------------------------------------------------- external data

def _external_model(tmp_path, file_bytes, declared=(4, 4), offset=None, length=None, name="w.bin"):
    """A model whose initializer `w` (declared float32 `declared`) lives in the external file
    `name`, which is made `file_bytes` long (sparse: costs no disk)."""
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=list(declared))
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", name), ("offset", offset), ("length", length)):
        if v is not None:
            entry = w.external_data.add()
            entry.key, entry.value = k, str(v)
    m = _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", [4, 4])], [_vi("y", [4, 4])], [w])
    with open(tmp_path / name, "wb") as f:
        f.truncate(file_bytes)
    path = tmp_path / "m.onnx"
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return path


@pytest.mark.parametrize("size", [3 << 30, 20 << 30])
def test_external_file_larger_than_the_tensor_is_not_read_whole(tmp_path, size):
    path = _external_model(tmp_path, size)
    line, peak = _capped_load(path)
    assert line.startswith("Error|"), line
    # names the tensor, the file, the declared bytes and the file's
    assert "'w'" in line and "w.bin" in line and "64 bytes" in line and str(size) in line, line
    assert peak < 600 << 20, (line, peak)


def test_external_file_shorter_than_the_tensor(tmp_path):
    path = _external_model(tmp_path, 60)
    with pytest.raises(Error, match=r"'w'.*w\.bin.*64 bytes.*60"):
        at.onnx.load(str(path))


def test_external_length_field_disagreeing_with_the_shape(tmp_path):
    path = _external_model(tmp_path, 1 << 20, length=1 << 20)
    with pytest.raises(Error, match=r"'w'.*length 1048576.*64 bytes"):
        at.onnx.load(str(path))


def test_external_offset_past_the_end(tmp_path):
    path = _external_model(tmp_path, 64, offset=32)
    with pytest.raises(Error, match=r"'w'.*offset 32.*64 bytes"):
        at.onnx.load(str(path))


def test_external_data_with_an_offset_and_a_length_loads(tmp_path):
    """The well-formed case still loads, byte for byte: 64 bytes at offset 128 of a larger file."""
    path = _external_model(tmp_path, 0, offset=128, length=64)
    value = np.arange(16, dtype=np.float32).reshape(4, 4)
    with open(tmp_path / "w.bin", "r+b") as f:
        f.write(b"\xff" * 128 + value.tobytes() + b"\xee" * 32)
    sym = at.onnx.load(str(path))
    assert np.array_equal(sym.params["w"], value)


def test_external_location_outside_the_model_directory(tmp_path):
    sub = tmp_path / "model"
    sub.mkdir()
    (tmp_path / "secret.bin").write_bytes(np.ones(16, np.float32).tobytes())
    path = _external_model(sub, 64, name="w.bin")
    m = onnx.load(str(path), load_external_data=False)
    m.graph.initializer[0].external_data[0].value = "../secret.bin"
    onnx.save_model(m, str(path))
    with pytest.raises(Error, match=r"'w'.*\.\./secret\.bin.*outside"):
        at.onnx.load(str(path))


@pytest.mark.parametrize("form", ["bytes", "ModelProto"])
def test_external_data_without_a_model_path_is_an_error(tmp_path, monkeypatch, form):
    """A model sent as bytes must not pull a file of the working directory into its weights."""
    path = _external_model(tmp_path, 64)
    (tmp_path / "w.bin").write_bytes(np.full(16, 7, np.float32).tobytes())
    monkeypatch.chdir(tmp_path)  # the file the model names is right there in the cwd
    data = path.read_bytes()
    given = data if form == "bytes" else onnx.load_from_string(data)
    with pytest.raises(Error, match=r"'w'.*external.*w\.bin.*path"):
        at.onnx.load(given)


def test_model_proto_with_loaded_external_data_still_imports(tmp_path):
    """A ModelProto whose external data onnx.load already read in is self-contained: it imports."""
    path = _external_model(tmp_path, 0)
    value = np.arange(16, dtype=np.float32).reshape(4, 4)
    (tmp_path / "w.bin").write_bytes(value.tobytes())
    sym = at.onnx.load(onnx.load(str(path)))
    assert np.array_equal(sym.params["w"], value)


# ----------------------------------------------------------------------------- Sum of many inputs

def _sum_model(n):
    """Sum of `n` copies of a computed tensor (so the walk's topological order sees them all)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Sum", ["r"] * n, ["y"], name="many")]
    return _model(nodes, [_vi("x", [2])], [_vi("y", [2])])


def test_sum_of_many_inputs_is_linear():
    """80,000 inputs took 1.6 s, quadratic in the count (a list's pop(0) per argument, the
    inputs listed again per visit in the topological order); 6,000 and 60,000 now take
    about the same time per input."""
    times = []
    for n in (6_000, 60_000):
        m = _sum_model(n)
        t = time.perf_counter()
        sym = at.onnx.load(m)
        times.append(time.perf_counter() - t)
        assert len(sym.get_internals().list_outputs()) >= 2
    assert times[1] < 25 * times[0] + 1.0, times  # 10x the inputs: ~10x the time (100x if quadratic)


def test_sum_of_a_million_inputs_is_refused_at_once(tmp_path):
    """10^6 inputs hung the importer; now an Error naming the node, its count and the limit."""
    path = tmp_path / "sum.onnx"
    onnx.save_model(_sum_model(1_000_000), str(path))
    proc = run_python("import sys, autotile as at\ntry:\n    at.onnx.load(sys.argv[1])\n    print('loaded')\n"
                      "except at.Error as e:\n    print('Error|' + str(e))\n", str(path), timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = proc.stdout.strip()
    assert line.startswith("Error|") and "'many'" in line and "1000000 inputs" in line and "65535" in line, line
