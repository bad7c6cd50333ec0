"""The CUDA MultiFetch kernel seen from Python: where its one source lives, how it is loaded
(prebuilt fatbin, else NVRTC from the same source), how a fetch op's pieces are packed into
the device-side record list the kernel reads, and the cudaMemcpyPeerAsync fallback's row runs
for GPU pairs without peer access.

Nothing here needs CuPy or a GPU except `load_kernels`; the packing and row-run functions are
plain NumPy and run in the CPU tests (tests/gpu)."""
from __future__ import annotations

import os
from typing import List, Sequence, Tuple

import numpy as np

from ..errors import Error

MAX_RANK = 16  #: kMaxRank of csrc/runtime/region_index.h
RECORD_WORDS = 2 + 4 * MAX_RANK  #: kRecordWords of csrc/cuda/multifetch.cu
_SRC_LO, _SRC_SHAPE, _LO, _SHAPE = 2, 2 + MAX_RANK, 2 + 2 * MAX_RANK, 2 + 3 * MAX_RANK
BLOCK = 256
WORK_BYTES = 1024  #: kWorkBytes of csrc/cuda/multifetch.cu: the prepared work of one piece
PREPARE_BLOCK = 128
#: Contiguous pieces of a copy at least this large go through cudaMemcpyPeerAsync (the copy
#: engine) rather than the kernel: on an H200 (docs/gpu.md) one launch over four contiguous
#: pieces beat one cudaMemcpyAsync per piece up to 4 MiB pieces (1.5-3x), was within 10%
#: either way at 16 MiB and lost at 64 MiB (0.81-0.97x)
MEMCPY_MIN_BYTES = 32 << 20
MAX_GRID_X = 1024
#: bytes of a piece per block of the launch: two rounds of BLOCK threads x 4 loads (kUnroll)
#: of 16-byte units
BYTES_PER_BLOCK = BLOCK * 4 * 16 * 2
MAX_GRID_Y = 65535

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../autotile
_REPO_CSRC = os.path.join(os.path.dirname(os.path.dirname(_PKG)), "csrc")


def source_dirs() -> Tuple[str, List[str]]:
    """(path of multifetch.cu, include dirs for NVRTC): the copy installed with the package
    (autotile/_cuda/src, see CMakeLists.txt), else the source tree's csrc/."""
    for root in (os.path.join(_PKG, "_cuda", "src"), _REPO_CSRC):
        cu = os.path.join(root, "cuda", "multifetch.cu")
        if os.path.exists(cu) and os.path.exists(os.path.join(root, "runtime", "region_index.h")):
            return cu, [os.path.join(root, "cuda", "nvrtc"), root]
    raise Error("the CUDA MultiFetch source (csrc/cuda/multifetch.cu) is not installed with this autotile package")


def fatbin_path():
    """The fatbin CMake built from csrc/cuda/multifetch.cu (when nvcc was found), or None."""
    for p in (os.environ.get("AUTOTILE_MULTIFETCH_FATBIN", ""), os.path.join(_PKG, "_cuda", "multifetch.fatbin"),
              os.path.join(os.path.dirname(_REPO_CSRC), "build", "multifetch.fatbin")):  # installed, in-tree build
        if p and os.path.exists(p):
            return p
    return None


KERNEL_NAMES = ("autotile_multifetch_copy1", "autotile_multifetch_copy2", "autotile_multifetch_copy4",
                "autotile_multifetch_copy8", "autotile_multifetch_add_f32", "autotile_multifetch_add_f64",
                "autotile_multifetch_prepare")


def prepare_args(name: str) -> Tuple[int, int]:
    """(element bytes, whether copies may widen their unit) of fetch kernel `name`: the
    arguments autotile_multifetch_prepare decodes its records with."""
    if name.startswith("autotile_multifetch_add_f"):
        return (4 if name.endswith("32") else 8), 0
    return int(name[len("autotile_multifetch_copy"):]), 1


def prepare_grid(n_pieces: int) -> Tuple[Tuple[int], Tuple[int]]:
    """(grid, block) of the prepare kernel: one thread per piece."""
    return (max(1, -(-n_pieces // PREPARE_BLOCK)),), (PREPARE_BLOCK,)


def kernel_name(dtype, accumulate: bool) -> str:
    """The kernel entry point for a fetch of `dtype` elements (copy or accumulate)."""
    dtype = np.dtype(dtype)
    if accumulate:
        if dtype == np.float32:
            return "autotile_multifetch_add_f32"
        if dtype == np.float64:
            return "autotile_multifetch_add_f64"
        raise Error(f"MultiFetch accumulation needs float32 or float64 data, not {dtype}")
    if dtype.itemsize not in (1, 2, 4, 8):
        raise Error(f"MultiFetch copies elements of 1, 2, 4 or 8 bytes, not {dtype} ({dtype.itemsize} bytes)")
    return f"autotile_multifetch_copy{dtype.itemsize}"


def load_kernels(cupy, device_id: int):
    """The MultiFetch kernels on the current CuPy device: {name: RawKernel}, and how they were
    obtained ('fatbin:<path>' or 'nvrtc'). The fatbin (sm_80/sm_90 SASS + compute_90 PTX) is
    tried first; a driver or GPU it does not fit falls back to NVRTC on the same source."""
    errors = []
    path = fatbin_path()
    if path:
        try:
            mod = cupy.RawModule(path=path)
            kernels = {n: mod.get_function(n) for n in KERNEL_NAMES}
            return kernels, f"fatbin:{path}"
        except Exception as e:  # e.g. CUDA_ERROR_NO_BINARY_FOR_GPU, a driver older than the toolkit
            errors.append(f"fatbin {path}: {type(e).__name__}: {e}")
    try:
        cu, includes = source_dirs()
        with open(cu) as f:
            code = f.read()
        mod = cupy.RawModule(code=code, options=tuple(f"-I{d}" for d in includes) + ("--std=c++17",))
        kernels = {n: mod.get_function(n) for n in KERNEL_NAMES}
        return kernels, "nvrtc"
    except Exception as e:
        errors.append(f"NVRTC: {type(e).__name__}: {e}")
    raise Error(f"GPU {device_id}: cannot load the MultiFetch kernel: " + "; ".join(errors))


def prepare(kernels: dict, name: str, d_records, n_pieces: int, works):
    """Launches autotile_multifetch_prepare on the current stream: the records of a fetch
    op (a device int64 array from pack_records) decoded into `works` (a device uint8 array of
    n_pieces * WORK_BYTES), which kernel `name` then reads."""
    elem, vector = prepare_args(name)
    grid, block = prepare_grid(n_pieces)
    kernels["autotile_multifetch_prepare"](grid, block, (d_records, np.int32(n_pieces), np.int32(elem),
                                                         np.int32(vector), np.int32(BLOCK), works))


def device_launcher(cupy, kernels: dict, name: str, records: np.ndarray, n_pieces: int):
    """A callable launching fetch kernel `name` over `records` on the current stream, its
    pieces' work prepared once on the current device (tests and benchmarks; the runtime
    prepares through CupyDevices.prepare_fetch)."""
    d_records = cupy.asarray(records)
    works = cupy.empty(max(1, n_pieces) * WORK_BYTES, cupy.uint8)
    prepare(kernels, name, d_records, n_pieces, works)
    grid, block = launch_grid(records, prepare_args(name)[0])

    def launch():
        kernels[name](grid, block, (works, np.int32(n_pieces)))

    launch.buffers = (d_records, works)  # alive as long as the launcher
    return launch


def _word(ptr: int) -> np.int64:
    """A pointer as the int64 record word the kernel casts back (two's complement)."""
    return np.array(int(ptr), dtype=np.uint64).view(np.int64)[()]


def pack_records(dst_ptr: int, dst_lo: Sequence[int], dst_shape: Sequence[int],
                 pieces: Sequence[Tuple[int, Sequence[int], Sequence[int], Sequence[int], Sequence[int]]]) -> np.ndarray:
    """The kernel's record list (int64, (1 + len(pieces)) x RECORD_WORDS): the destination,
    then per piece (src_ptr, src_lo, src_shape, lo, hi) with region [lo, hi) in absolute tensor
    coordinates and the source buffer holding box [src_lo, src_lo + src_shape). Raises Error if a
    region lies outside its source or the destination (the kernel does not check)."""
    ndim = len(dst_lo)
    if ndim > MAX_RANK:
        raise Error(f"MultiFetch: rank {ndim} exceeds {MAX_RANK}")
    rec = np.zeros((1 + len(pieces), RECORD_WORDS), dtype=np.int64)
    rec[0, 0] = _word(dst_ptr)
    rec[0, 1] = ndim
    rec[0, _SRC_LO:_SRC_LO + ndim] = dst_lo
    rec[0, _SRC_SHAPE:_SRC_SHAPE + ndim] = dst_shape
    for p, (src_ptr, src_lo, src_shape, lo, hi) in enumerate(pieces, start=1):
        if not len(src_lo) == len(src_shape) == len(lo) == len(hi) == ndim:
            raise Error(f"MultiFetch: piece {p - 1} has rank {len(lo)}, the destination {ndim}")
        for d in range(ndim):
            if not (src_lo[d] <= lo[d] <= hi[d] <= src_lo[d] + src_shape[d] and
                    dst_lo[d] <= lo[d] and hi[d] <= dst_lo[d] + dst_shape[d]):
                raise Error(f"MultiFetch: piece [{lo[d]}, {hi[d]}) of dim {d} lies outside its source "
                            f"[{src_lo[d]}, {src_lo[d] + src_shape[d]}) or the destination "
                            f"[{dst_lo[d]}, {dst_lo[d] + dst_shape[d]})")
        rec[p, 0] = _word(src_ptr)
        rec[p, 1] = ndim
        rec[p, _SRC_LO:_SRC_LO + ndim] = src_lo
        rec[p, _SRC_SHAPE:_SRC_SHAPE + ndim] = src_shape
        rec[p, _LO:_LO + ndim] = lo
        rec[p, _SHAPE:_SHAPE + ndim] = [h - l for l, h in zip(lo, hi)]
    return rec


def launch_grid(records: np.ndarray, itemsize: int) -> Tuple[Tuple[int, int], Tuple[int]]:
    """(grid, block) for one launch over `records` of `itemsize`-byte elements: x gives the
    largest piece a block per BYTES_PER_BLOCK (grid-stride loops beyond MAX_GRID_X blocks:
    blocks with no work still cost a launch slot and a load of the piece's work), y one piece
    per block row."""
    n = records.shape[0] - 1
    ndim = int(records[0, 1])
    vols = np.prod(records[1:, _SHAPE:_SHAPE + ndim], axis=1) if n else np.zeros(0)
    biggest = int(vols.max()) * int(itemsize) if n else 0
    grid_x = max(1, min(MAX_GRID_X, -(-biggest // BYTES_PER_BLOCK)))
    return (grid_x, max(1, min(n, MAX_GRID_Y))), (BLOCK,)


def row_runs(src_lo, src_shape, dst_lo, dst_shape, lo, hi, itemsize: int) -> np.ndarray:
    """Contiguous byte runs (src_offset, dst_offset, nbytes) that copy region [lo, hi) from a
    buffer holding box src_lo/src_shape into one holding dst_lo/dst_shape: one run per row of
    the innermost dim, merged where consecutive rows are contiguous in both buffers. Offsets come
    from numpy.ravel_multi_index (no index arithmetic of our own). For the cudaMemcpyPeerAsync
    fallback between GPUs without peer access."""
    ndim = len(lo)
    shape = [int(h) - int(l) for l, h in zip(lo, hi)]
    if any(s == 0 for s in shape):
        return np.zeros((0, 3), dtype=np.int64)
    if ndim == 0:
        return np.array([[0, 0, itemsize]], dtype=np.int64)
    outer = shape[:-1]
    coords = [c.ravel() for c in np.indices(outer)] if outer else []
    src = np.ravel_multi_index(tuple(c + (l - s) for c, l, s in zip(coords, lo, src_lo)) + (
        np.full(max(1, int(np.prod(outer))), lo[-1] - src_lo[-1]),), tuple(src_shape))
    dst = np.ravel_multi_index(tuple(c + (l - s) for c, l, s in zip(coords, lo, dst_lo)) + (
        np.full(max(1, int(np.prod(outer))), lo[-1] - dst_lo[-1]),), tuple(dst_shape))
    row = shape[-1]
    # a new run starts where either buffer's next row is not adjacent to the previous one
    breaks = np.ones(len(src), dtype=bool)
    breaks[1:] = (np.diff(src) != row) | (np.diff(dst) != row)
    starts = np.flatnonzero(breaks)
    lengths = np.diff(np.append(starts, len(src))) * row
    return np.stack([src[starts] * itemsize, dst[starts] * itemsize, lengths * itemsize], axis=1).astype(np.int64)
