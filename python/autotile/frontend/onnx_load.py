"""Reading an ONNX model: the file, bytes or ModelProto, and its external weight data.

External data is read by autotile itself, not by onnx's loader, because that loader trusts
the file: it reads an external file whole whatever the tensor declares (a 4x4 tensor next to
a 3 GB file took 6 GB, or crashed under a memory cap), and resolves a model given as bytes
against the process's working directory. Here each external tensor's declared bytes (its
shape and type) are compared with its ``length`` field and with the file's size before any
byte is read, the location must stay inside the model's directory, and a model without a
path (bytes, a ModelProto) that still names external data is refused (issue 31).
"""
from __future__ import annotations

import math
import os
import stat
from typing import Iterator, Optional

from ..errors import Error, install_hint
from ..file_read import file_kind, read_regular_file


def onnx_module():
    """The onnx package, or an Error saying how to install it."""
    try:
        import onnx
    except ImportError:
        raise Error(f"importing ONNX models needs the onnx package: {install_hint('onnx')}") from None
    return onnx


def load_model(path_or_model):
    """An ``onnx.ModelProto`` from a path, raw bytes or a ModelProto, with its external data
    read in (only for a path: bytes and ModelProtos have no directory to read it from);
    Error naming the file when it is missing, truncated or not an ONNX model, or when its
    external data does not match what its tensors declare."""
    onnx = onnx_module()
    base_dir = None
    if isinstance(path_or_model, onnx.ModelProto):
        model, where = path_or_model, "the given ModelProto"
    elif isinstance(path_or_model, (bytes, bytearray)):
        where = "the given bytes"
        model = _parse(onnx, bytes(path_or_model), where)
    elif isinstance(path_or_model, (str, os.PathLike)):
        path = os.fspath(path_or_model)
        where = f"'{path}'"
        if not os.path.exists(path):
            raise Error(f"ONNX model {where} does not exist")
        # a FIFO, device or directory is named as such (read_regular_file), not as missing
        model = _parse(onnx, read_regular_file(path, "ONNX model"), where)
        base_dir = os.path.dirname(os.path.abspath(path))
    else:
        raise Error(f"at.onnx.load takes a path, bytes or an onnx.ModelProto, got {type(path_or_model).__name__}")
    if model.ir_version <= 0 or not model.HasField("graph") or (not model.graph.node and not model.graph.output):
        raise Error(f"{where} is not an ONNX model (no graph or IR version in it)")
    external = [t for t in _all_tensors(model.graph) if t.data_location == onnx.TensorProto.EXTERNAL]
    if external:
        if base_dir is None:
            t = external[0]
            raise Error(f"ONNX tensor '{t.name}' of {where} keeps its data in the external file "
                        f"'{_entries(t).get('location', '')}', but a model given as "
                        f"{'bytes' if where.endswith('bytes') else 'a ModelProto'} has no path to find it from: "
                        f"pass the model's path (or a ModelProto whose external data onnx.load has read)")
        for t in external:
            load_external_tensor(onnx, t, base_dir, where)
    return model


def _parse(onnx, data: bytes, where: str):
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as e:  # google.protobuf DecodeError and friends
        raise Error(f"{where} is not a valid ONNX model (truncated or not an ONNX file): {e}") from None
    return model


def _all_tensors(graph) -> Iterator:
    """Every TensorProto of `graph`: initializers, sparse initializers' parts, and the tensor
    attributes of its nodes, subgraphs included."""
    stack = [graph]
    while stack:
        g = stack.pop()
        yield from g.initializer
        for s in g.sparse_initializer:
            yield s.values
            yield s.indices
        for node in g.node:
            for a in node.attribute:
                if a.HasField("t"):
                    yield a.t
                yield from a.tensors
                if a.HasField("sparse_tensor"):
                    yield a.sparse_tensor.values
                    yield a.sparse_tensor.indices
                if a.HasField("g"):
                    stack.append(a.g)
                stack.extend(a.graphs)


def _entries(tensor) -> dict:
    return {e.key: e.value for e in tensor.external_data}


def declared_bytes(onnx, tensor, what: str) -> int:
    """The bytes a tensor of its type and dims holds (4-bit types: two to a byte)."""
    if any(d < 0 for d in tensor.dims):
        raise Error(f"{what} has a negative dimension in {list(tensor.dims)}")
    count = math.prod(int(d) for d in tensor.dims)
    if tensor.data_type == onnx.TensorProto.STRING:
        raise Error(f"{what} holds strings; autotile computes numeric tensors only")
    try:
        import numpy as np

        itemsize = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)).itemsize
    except (KeyError, TypeError, ValueError):
        raise Error(f"{what} has element type {tensor.data_type}, which is not an ONNX tensor type") from None
    four_bit = {getattr(onnx.TensorProto, n, -1) for n in ("INT4", "UINT4", "FLOAT4E2M1")}
    return (count + 1) // 2 if tensor.data_type in four_bit else count * itemsize


def _int_entry(entries: dict, key: str, what: str) -> Optional[int]:
    if key not in entries:
        return None
    try:
        value = int(entries[key])
    except ValueError:
        raise Error(f"{what}: external data {key} {entries[key]!r} is not an integer") from None
    if value < 0:
        raise Error(f"{what}: external data {key} {value} is negative")
    return value


def load_external_tensor(onnx, tensor, base_dir: str, where: str) -> None:
    """Read `tensor`'s external data into it (``raw_data``), after checking its location stays
    in `base_dir` and that its declared bytes match the ``length`` field and the file."""
    what = f"ONNX model {where}: tensor '{tensor.name}'"
    entries = _entries(tensor)
    location = entries.get("location", "")
    if not location:
        raise Error(f"{what} is marked external but names no location")
    if os.path.isabs(location) or "\x00" in location:
        raise Error(f"{what}: external data location '{location}' must be a path relative to the model's directory")
    full = os.path.realpath(os.path.join(base_dir, location))
    root = os.path.realpath(base_dir)
    if os.path.commonpath([full, root]) != root:
        raise Error(f"{what}: external data location '{location}' lies outside the model's directory")
    need = declared_bytes(onnx, tensor, what)
    shape = f"{onnx.TensorProto.DataType.Name(tensor.data_type)} {tuple(tensor.dims)}"
    offset = _int_entry(entries, "offset", what) or 0
    length = _int_entry(entries, "length", what)
    if length is not None and length != need:
        raise Error(f"{what} in its external data file '{location}': external length {length} is not the {need} bytes its shape "
                    f"declares ({shape})")
    try:
        st = os.stat(full)
    except OSError as e:
        raise Error(f"{what}: cannot load its external weight data '{location}': {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise Error(f"{what}: external weight data '{location}' is {file_kind(st.st_mode)}, not a regular file")
    size = st.st_size
    if offset + need > size:
        raise Error(f"{what} in its external data file '{location}': offset {offset} plus the {need} bytes its shape declares ({shape}) "
                    f"runs past the end of the file, which holds {size} bytes")
    if length is None and size - offset != need:
        # without a length the data runs to the end of the file (onnx's rule): it must be the tensor
        raise Error(f"{what} in its external data file '{location}': the tensor declares {need} bytes ({shape}), but the file holds "
                    f"{size - offset} bytes from offset {offset} and no length says how many are the tensor's")
    tensor.raw_data = _read_at(full, offset, need, what, location)
    del tensor.external_data[:]
    tensor.data_location = onnx.TensorProto.DEFAULT


def _read_at(path: str, offset: int, count: int, what: str, location: str) -> bytes:
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
        try:
            chunks, left, at = [], count, offset
            while left > 0:
                chunk = os.pread(fd, min(left, 1 << 24), at)
                if not chunk:
                    raise Error(f"{what}: external data file '{location}' ended early (shrank while read)")
                chunks.append(chunk)
                left -= len(chunk)
                at += len(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)
    except OSError as e:
        raise Error(f"{what}: cannot load its external weight data '{location}': {e.strerror}") from None
