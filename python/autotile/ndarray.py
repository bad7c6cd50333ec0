"""``autotile.nd``: MXNet's binary NDArray list format (``.params`` files), read and written.

The layout is that of MXNet 1.x ``mx.nd.save`` (src/ndarray/ndarray.cc, ``NDArray::Save``
and the list writer under ``kMXAPINDArrayListMagic``), all integers little-endian::

    uint64 0x112 (list magic)   uint64 0 (reserved)
    uint64 n_arrays, then per array:
        uint32 magic            0xF993FAC9 (V2) or 0xF993FACA (V3, NumPy shape semantics)
        int32  storage type     0 = dense (1 row_sparse, 2 csr: not supported here)
        int32  ndim, int64 dims[ndim]
        int32  dev_type, int32 dev_id      (context; 1 = cpu)
        int32  dtype flag       0 f32, 1 f64, 2 f16, 3 u8, 4 i32, 5 i8, 6 i64, 7 bool, ...
        raw row-major data
    uint64 n_names, then per name: uint64 length, bytes (empty when saved from a list)

Older arrays are read too: V1 (magic 0xF993FAC8: no storage type) and the legacy layout
whose first uint32 is ndim followed by uint32 dims. Checkpoints name their arrays
``arg:<name>`` / ``aux:<name>``; :func:`load` keeps these names as MXNet does and
:func:`split_params` separates them.
"""
from __future__ import annotations

import math
import os
import struct
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .dtype_flags import DTYPE_OF_FLAG, FLAG_OF_DTYPE
from .errors import Error

LIST_MAGIC = 0x112
V1_MAGIC = 0xF993FAC8
V2_MAGIC = 0xF993FAC9
V3_MAGIC = 0xF993FACA

_STORAGE_NAMES = {-1: "undefined", 0: "default", 1: "row_sparse", 2: "csr"}
_DEVICE_TYPES = {1: "cpu", 2: "gpu", 3: "cpu_pinned", 5: "cpu_shared"}

Loaded = Union[Dict[str, np.ndarray], List[np.ndarray]]


class _Reader:
    """Bounds-checked little-endian reads; errors name the file, offset and field."""

    def __init__(self, data: bytes, source: str):
        self.data = data
        self.pos = 0
        self.source = source

    def fail(self, what: str, at: Optional[int] = None) -> None:
        at = self.pos if at is None else at
        raise Error(f"NDArray file '{self.source}': {what} (at byte offset {at})")

    def take(self, n: int, field: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            self.fail(f"truncated while reading {field}: needs {n} bytes, "
                      f"{len(self.data) - self.pos} left")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str, field: str):
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), field))[0]

    def peek_u32(self, offset: int = 0) -> Optional[int]:
        at = self.pos + offset
        return struct.unpack_from("<I", self.data, at)[0] if at + 4 <= len(self.data) else None


def _read_shape(r: _Reader, field: str, legacy_ndim: Optional[int] = None) -> Optional[Tuple[int, ...]]:
    """A TShape; None for an unknown shape (ndim -1, MXNet's 'none' array)."""
    start = r.pos
    if legacy_ndim is not None:  # pre-V1: uint32 ndim (already read as the 'magic'), uint32 dims
        ndim = legacy_ndim
        if ndim > 32:
            r.fail(f"bad magic number 0x{ndim:08X} for an array (not an MXNet NDArray)", start - 4)
        dims = struct.unpack(f"<{ndim}I", r.take(4 * ndim, f"{field} dims"))
        return tuple(int(d) for d in dims)
    ndim = r.unpack("i", f"{field} ndim")
    if ndim == -1:
        return None
    if not 0 <= ndim <= 32:
        r.fail(f"bad {field} ndim {ndim}", start)
    dims = struct.unpack(f"<{ndim}q", r.take(8 * ndim, f"{field} dims"))
    if any(d < 0 for d in dims):
        r.fail(f"bad {field} {tuple(dims)}: negative dimension", start)
    return tuple(int(d) for d in dims)


def _looks_like_context(r: _Reader) -> bool:
    """After a 0-d shape in a V1/V2 array: does a context + dtype flag follow (MXNet writes
    the data of a 0-d array), or is this an uninitialised array that stops at its shape?"""
    dev_type, dev_id, flag = r.peek_u32(0), r.peek_u32(4), r.peek_u32(8)
    return dev_type in _DEVICE_TYPES and dev_id is not None and dev_id < 1 << 16 and flag in DTYPE_OF_FLAG


def _read_array(r: _Reader, index: int) -> Optional[np.ndarray]:
    field = f"array #{index}"
    magic = r.unpack("I", f"{field} magic")
    legacy_ndim = None
    if magic in (V2_MAGIC, V3_MAGIC):
        stype = r.unpack("i", f"{field} storage type")
        if stype != 0:
            name = _STORAGE_NAMES.get(stype, f"unknown ({stype})")
            r.fail(f"{field} has {name} storage; only dense arrays are supported", r.pos - 4)
    elif magic != V1_MAGIC:
        legacy_ndim = magic
    shape = _read_shape(r, f"{field} shape", legacy_ndim)
    if shape is None:
        return None
    if shape == () and magic != V3_MAGIC and not _looks_like_context(r):
        return None  # legacy semantics: ndim 0 was an uninitialised array
    ctx_at = r.pos
    dev_type = r.unpack("i", f"{field} context dev_type")
    r.unpack("i", f"{field} context dev_id")
    if dev_type not in _DEVICE_TYPES:
        r.fail(f"{field} has bad context device type {dev_type}", ctx_at)
    flag_at = r.pos
    flag = r.unpack("i", f"{field} dtype flag")
    dtype = DTYPE_OF_FLAG.get(flag)
    if dtype is None:
        r.fail(f"{field} has unsupported dtype flag {flag}", flag_at)
    count = math.prod(shape)  # Python ints: a product beyond int64 stays exact
    left = len(r.data) - r.pos
    if count * dtype.itemsize > left:  # refuse before allocating what the header claims
        r.fail(f"{field} shape {shape} of {dtype.name} claims {count * dtype.itemsize} bytes, "
               f"more than the {left} bytes left in the file")
    raw = r.take(count * dtype.itemsize, f"{field} data ({count} x {dtype.name}, shape {shape})")
    return np.frombuffer(raw, dtype=dtype).astype(dtype.newbyteorder("="), copy=True).reshape(shape)


def loads(data: bytes, source: str = "<bytes>") -> Loaded:
    """Arrays from the bytes of an MXNet NDArray file (see :func:`load`)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise Error(f"nd.loads needs the file's bytes (bytes, bytearray or memoryview), got "
                    f"{type(data).__name__}" + (": read the file in binary mode ('rb') or use nd.load(path)"
                                                 if isinstance(data, str) else ""))
    r = _Reader(bytes(data), source)
    header = r.unpack("Q", "list magic")
    if header != LIST_MAGIC:
        r.fail(f"wrong magic number 0x{header:X} (expected 0x{LIST_MAGIC:X}): not an MXNet NDArray file", 0)
    r.unpack("Q", "reserved field")
    n = r.unpack("Q", "array count")
    if n > len(r.data):
        r.fail(f"implausible array count {n}", r.pos - 8)
    arrays = [_read_array(r, i) for i in range(n)]
    names_at = r.pos
    n_names = r.unpack("Q", "name count")
    if n_names not in (0, n):
        r.fail(f"{n_names} names for {n} arrays", names_at)
    names = []
    for i in range(n_names):
        length = r.unpack("Q", f"length of name #{i}")
        raw = r.take(length, f"name #{i}")
        try:
            names.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            r.fail(f"name #{i} is not UTF-8", r.pos - length)
    if r.pos != len(r.data):
        r.fail(f"{len(r.data) - r.pos} trailing bytes after the names")
    for i, a in enumerate(arrays):
        if a is None:
            label = f"'{names[i]}'" if names else f"#{i}"
            raise Error(f"NDArray file '{source}': array {label} is uninitialised (no shape)")
    if not names:
        return arrays
    if len(set(names)) != len(names):
        dup = sorted({x for x in names if names.count(x) > 1})
        raise Error(f"NDArray file '{source}': duplicate names {dup[:5]}")
    return dict(zip(names, arrays))


def load(fname: Union[str, os.PathLike]) -> Loaded:
    """Read an MXNet NDArray file (``mx.nd.save`` output, e.g. ``model-0000.params``).

    Returns a dict name -> numpy.ndarray when the file has names (checkpoints keep MXNet's
    ``arg:`` / ``aux:`` prefixes; see :func:`split_params`), else a list. Raises Error naming
    the file and the byte offset and field at fault for truncated or corrupt files, a wrong
    magic number or sparse storage."""
    if isinstance(fname, bool) or not isinstance(fname, (str, bytes, int, os.PathLike)):
        raise Error(f"nd.load needs a file path, got {type(fname).__name__}")
    from .file_read import read_regular_file

    source = f"<fd {fname}>" if isinstance(fname, int) else os.fsdecode(fname)
    # a regular file only (a FIFO would block, /dev/zero never end), read to its size; an fd stays the caller's
    return loads(read_regular_file(fname, "NDArray file"), source)


def _array_bytes(name: str, value, np_shape: bool) -> bytes:
    a = np.asarray(value)
    key = a.dtype.newbyteorder("=")
    flag = FLAG_OF_DTYPE.get(key)
    if flag is None:
        raise Error(f"cannot save array '{name}': dtype {a.dtype} has no MXNet equivalent "
                    f"(supported: {sorted(d.name for d in FLAG_OF_DTYPE)})")
    # A 0-d array in V2 form is what MXNet's legacy save writes, though its legacy loader
    # reads ndim 0 as 'uninitialised'; np_shape=True writes the V3 form MXNet reloads.
    out = [struct.pack("<Ii", V3_MAGIC if np_shape else V2_MAGIC, 0), struct.pack("<i", a.ndim),
           struct.pack(f"<{a.ndim}q", *a.shape), struct.pack("<iii", 1, 0, flag),
           np.ascontiguousarray(a, dtype=DTYPE_OF_FLAG[flag]).tobytes()]
    return b"".join(out)


def dumps(data: Union[Dict[str, np.ndarray], Sequence[np.ndarray]], np_shape: bool = False) -> bytes:
    """The bytes :func:`save` writes."""
    if isinstance(data, dict):
        names = list(data)
        values = list(data.values())
        for k in names:
            if not isinstance(k, str):
                raise Error(f"NDArray names must be strings, got {k!r}")
    elif isinstance(data, (list, tuple)):
        names, values = [], list(data)
    else:
        raise Error(f"save() takes a dict name -> array or a list of arrays, got {type(data).__name__}")
    parts = [struct.pack("<QQQ", LIST_MAGIC, 0, len(values))]
    labels = names or [f"#{i}" for i in range(len(values))]
    parts += [_array_bytes(label, v, np_shape) for label, v in zip(labels, values)]
    parts.append(struct.pack("<Q", len(names)))
    for k in names:
        raw = k.encode("utf-8")
        parts.append(struct.pack("<Q", len(raw)) + raw)
    return b"".join(parts)


def save(fname: Union[str, os.PathLike], data: Union[Dict[str, np.ndarray], Sequence[np.ndarray]],
         np_shape: bool = False) -> None:
    """Write arrays (dict name -> array, or a list) as ``mx.nd.save`` does, byte for byte.

    All arrays are written dense, on context cpu(0). ``np_shape=True`` writes the V3 form
    MXNet writes under NumPy shape semantics (``npx.set_np()``), which MXNet needs to reload
    0-d arrays; the default V2 form is what plain ``mx.nd.save`` writes."""
    if isinstance(fname, bool) or not isinstance(fname, (str, bytes, os.PathLike)):
        raise Error(f"nd.save needs a file path, got {type(fname).__name__}")
    blob = dumps(data, np_shape)
    try:
        with open(fname, "wb") as f:
            f.write(blob)
    except OSError as e:
        raise Error(f"cannot write NDArray file '{os.fspath(fname)}': {e}") from None


def split_params(params: Dict[str, np.ndarray]) -> Tuple[Dict[str, np.ndarray], Dict[str, np.ndarray]]:
    """(arg_params, aux_params) from a checkpoint dict, prefixes ``arg:`` / ``aux:`` removed
    (as ``mx.model.load_checkpoint`` does). Names without a prefix (gluon's
    ``save_parameters``) go to arg_params."""
    if not isinstance(params, dict):
        raise Error("split_params needs a dict name -> array (the file was saved without names)")
    args: Dict[str, np.ndarray] = {}
    aux: Dict[str, np.ndarray] = {}
    for key, value in params.items():
        kind, sep, name = key.partition(":")
        if sep and kind == "aux":
            aux[name] = value
        elif sep and kind == "arg":
            args[name] = value
        else:
            args[key] = value
    return args, aux


def join_params(arg_params: Dict[str, np.ndarray], aux_params: Optional[Dict[str, np.ndarray]] = None
                ) -> Dict[str, np.ndarray]:
    """The checkpoint dict (``arg:`` / ``aux:`` names) ``mx.model.save_checkpoint`` writes."""
    out = {f"arg:{k}": v for k, v in arg_params.items()}
    out.update({f"aux:{k}": v for k, v in (aux_params or {}).items()})
    return out


def load_checkpoint(prefix: str, epoch: int):
    """(symbol, arg_params, aux_params) from ``prefix-symbol.json`` and ``prefix-%04d.params``,
    like ``mx.model.load_checkpoint``."""
    from .symbol import load as load_symbol

    sym = load_symbol(f"{prefix}-symbol.json")
    args, aux = split_params(load(f"{prefix}-{epoch:04d}.params"))
    return sym, args, aux


def save_checkpoint(prefix: str, epoch: int, symbol, arg_params: Dict[str, np.ndarray],
                    aux_params: Optional[Dict[str, np.ndarray]] = None) -> None:
    """Write ``prefix-symbol.json`` and ``prefix-%04d.params`` as ``mx.model.save_checkpoint``."""
    symbol.save(f"{prefix}-symbol.json")
    save(f"{prefix}-{epoch:04d}.params", join_params(arg_params, aux_params))
