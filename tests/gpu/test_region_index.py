"""The region index arithmetic the CUDA MultiFetch kernel uses (csrc/runtime/region_index.h),
exercised on the CPU against NumPy slicing for random boxes and regions: through the host
MultiFetch (same header), through the kernel's own body and record decoding compiled for the
host (csrc/cuda/multifetch.cu without nvcc), and the Python side of the launch (record
packing, grid, cudaMemcpyPeerAsync row runs)."""

import numpy as np
import pytest

from autotile import _core
from autotile.backend import gpu_fetch
from autotile.errors import Error

_KIND = {"autotile_multifetch_copy1": 1, "autotile_multifetch_copy2": 2, "autotile_multifetch_copy4": 4,
         "autotile_multifetch_copy8": 8, "autotile_multifetch_add_f32": 5, "autotile_multifetch_add_f64": 6}


def _random_case(rng, ndim, n_pieces, overlap):
    """A tensor, a destination box, and pieces inside it, each held by a source box around it."""
    full = tuple(int(v) for v in rng.integers(1, 7, size=ndim))
    dlo = [int(rng.integers(0, s)) for s in full]
    dhi = [int(rng.integers(l + 1, s + 1)) for l, s in zip(dlo, full)]
    pieces = []
    for _ in range(n_pieces):
        lo = [int(rng.integers(l, h)) for l, h in zip(dlo, dhi)]
        hi = [int(rng.integers(l, h + 1)) for l, h in zip(lo, dhi)]  # possibly empty
        slo = [int(rng.integers(0, l + 1)) for l in lo]
        shi = [int(rng.integers(h, s + 1)) if h < s else s for h, s in zip(hi, full)]
        shi = [max(a, b) for a, b in zip(shi, hi)]
        pieces.append((slo, shi, lo, hi))
    if not overlap:  # keep the first piece and split the rest off disjoint slabs of dim 0
        pieces = pieces[:1]
    return full, dlo, dhi, pieces


def _sl(lo, hi, origin):
    return tuple(slice(l - o, h - o) for l, h, o in zip(lo, hi, origin))


def _expected(value, dlo, dhi, pieces, accumulate, dtype):
    want = np.zeros([h - l for l, h in zip(dlo, dhi)], dtype=dtype)
    for _, _, lo, hi in pieces:
        if accumulate:
            want[_sl(lo, hi, dlo)] += value[_sl(lo, hi, [0] * len(lo))]
        else:
            want[_sl(lo, hi, dlo)] = value[_sl(lo, hi, [0] * len(lo))]
    return want


def _sources(value, pieces):
    return [np.array(value[_sl(slo, shi, [0] * len(slo))], order="C") for slo, shi, _, _ in pieces]


@pytest.mark.parametrize("seed", range(40))
def test_host_multifetch_matches_numpy(seed):
    rng = np.random.default_rng(seed)
    ndim = int(rng.integers(1, 5))
    accumulate = bool(seed % 2)
    full, dlo, dhi, pieces = _random_case(rng, ndim, int(rng.integers(1, 5)), overlap=accumulate)
    value = rng.standard_normal(full).astype(np.float32)
    srcs = _sources(value, pieces)
    dst = np.full([h - l for l, h in zip(dlo, dhi)], 7.0, np.float32)
    _core.multifetch(dst, dlo, [(s, p[0], p[2], p[3]) for s, p in zip(srcs, pieces)], accumulate)
    want = _expected(value, dlo, dhi, pieces, accumulate, np.float32)
    if not accumulate:  # elements no piece covers keep their old value
        covered = np.zeros(want.shape, bool)
        for _, _, lo, hi in pieces:
            covered[_sl(lo, hi, dlo)] = True
        want[~covered] = 7.0
    np.testing.assert_allclose(dst, want, rtol=1e-6)


def _emulate(lib, dst, dlo, srcs, pieces, accumulate, grid):
    rec = gpu_fetch.pack_records(dst.ctypes.data, dlo, list(dst.shape),
                                 [(s.ctypes.data, p[0], list(s.shape), p[2], p[3]) for s, p in zip(srcs, pieces)])
    name = gpu_fetch.kernel_name(dst.dtype, accumulate)
    if accumulate:
        dst[...] = 0  # the runtime's memset before the launch
    gx, gy, bx = grid
    assert lib.autotile_multifetch_host(_KIND[name], rec.ctypes.data, len(pieces), gx, gy, bx) == 0
    return rec


@pytest.mark.parametrize("seed", range(60))
def test_kernel_body_matches_numpy(fetch_emulation, seed):
    """The kernel's per-thread loop over packed records, with random simulated grids."""
    rng = np.random.default_rng(1000 + seed)
    ndim = int(rng.integers(0, 6))
    accumulate = seed % 3 == 0
    dtype = [np.float32, np.float64][seed % 2] if accumulate else [np.int8, np.float16, np.float32, np.int64][seed % 4]
    if ndim == 0:
        full, dlo, dhi, pieces = (), [], [], [([], [], [], [])]
    else:
        full, dlo, dhi, pieces = _random_case(rng, ndim, int(rng.integers(1, 6)), overlap=accumulate)
    value = (rng.standard_normal(full) * 50).astype(dtype)
    srcs = _sources(value, pieces)
    dst = np.zeros([h - l for l, h in zip(dlo, dhi)], dtype)
    grid = (int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(1, 9)))
    _emulate(fetch_emulation, dst, dlo, srcs, pieces, accumulate, grid)
    want = _expected(value, dlo, dhi, pieces, accumulate, dtype)
    if accumulate:
        np.testing.assert_allclose(dst, want, rtol=1e-5, atol=1e-4)
    else:
        np.testing.assert_array_equal(dst, want)


def test_kernel_equals_host_multifetch_bitwise(fetch_emulation):
    """Copies and a two-way reduction give exactly the host MultiFetch's bytes."""
    rng = np.random.default_rng(5)
    full = (6, 5, 4)
    a = rng.standard_normal(full).astype(np.float32)
    b = rng.standard_normal(full).astype(np.float32)
    pieces = [([0, 0, 0], [6, 5, 4], [1, 0, 1], [5, 5, 4]), ([0, 0, 0], [6, 5, 4], [1, 0, 1], [5, 5, 4])]
    dst_k = np.zeros((4, 5, 3), np.float32)
    _emulate(fetch_emulation, dst_k, [1, 0, 1], [a, b], pieces, True, (2, 2, 3))
    dst_h = np.zeros_like(dst_k)
    _core.multifetch(dst_h, [1, 0, 1], [(a, [0, 0, 0], [1, 0, 1], [5, 5, 4]), (b, [0, 0, 0], [1, 0, 1], [5, 5, 4])],
                     True)
    assert dst_k.tobytes() == dst_h.tobytes()


def test_record_layout_matches_the_kernel(fetch_emulation):
    assert fetch_emulation.autotile_multifetch_record_words() == gpu_fetch.RECORD_WORDS
    rec = gpu_fetch.pack_records(2**63 + 16, [1, 2], [3, 4], [(8, [0, 0], [4, 6], [1, 2], [3, 5])])
    assert rec.shape == (2, gpu_fetch.RECORD_WORDS) and rec.dtype == np.int64
    assert rec[0, 0].view(np.uint64) == 2**63 + 16 and rec[0, 1] == 2 and rec[1, 0] == 8


def test_pack_records_rejects_bad_pieces():
    with pytest.raises(Error, match="outside its source"):
        gpu_fetch.pack_records(0, [0], [4], [(0, [2], [2], [1], [3])])
    with pytest.raises(Error, match="outside its source|destination"):
        gpu_fetch.pack_records(0, [0], [4], [(0, [0], [8], [3], [6])])
    with pytest.raises(Error, match="rank"):
        gpu_fetch.pack_records(0, [0, 0], [4, 4], [(0, [0], [8], [3], [6])])
    with pytest.raises(Error, match="exceeds"):
        gpu_fetch.pack_records(0, [0] * 17, [1] * 17, [])
    with pytest.raises(Error, match="float32 or float64"):
        gpu_fetch.kernel_name(np.int32, True)
    with pytest.raises(Error, match="1, 2, 4 or 8 bytes"):
        gpu_fetch.kernel_name(np.complex128, False)


def test_launch_grid():
    rec = gpu_fetch.pack_records(0, [0, 0], [1000, 1000], [(0, [0, 0], [1000, 1000], [0, 0], [1000, 1000]),
                                                         (0, [0, 0], [1000, 1000], [0, 0], [2, 3])])
    grid, block = gpu_fetch.launch_grid(rec, 4)  # 4 MB in the largest piece: 123 blocks of 32 KiB
    assert block == (gpu_fetch.BLOCK,) and grid == (-(-4_000_000 // gpu_fetch.BYTES_PER_BLOCK), 2)
    grid, _ = gpu_fetch.launch_grid(rec, 400)
    assert grid == (gpu_fetch.MAX_GRID_X, 2)
    grid, _ = gpu_fetch.launch_grid(gpu_fetch.pack_records(0, [0], [10], [(0, [0], [10], [0], [10])]), 8)
    assert grid == (1, 1)


@pytest.mark.parametrize("seed", range(30))
def test_row_runs_copy_the_region(seed):
    """Applying the cudaMemcpyPeerAsync fallback's byte runs with plain byte copies gives the
    NumPy region copy; fully contiguous regions are one run."""
    rng = np.random.default_rng(2000 + seed)
    ndim = int(rng.integers(1, 5))
    full, dlo, dhi, pieces = _random_case(rng, ndim, 1, overlap=False)
    slo, shi, lo, hi = pieces[0]
    value = rng.standard_normal(full)
    src = np.ascontiguousarray(value[_sl(slo, shi, [0] * ndim)])
    dst = np.zeros([h - l for l, h in zip(dlo, dhi)])
    runs = gpu_fetch.row_runs(slo, list(src.shape), dlo, list(dst.shape), lo, hi, 8)
    sb, db = src.view(np.uint8).reshape(-1), dst.view(np.uint8).reshape(-1)
    for so, do, n in runs:
        db[do:do + n] = sb[so:so + n]
    np.testing.assert_array_equal(dst, _expected(value, dlo, dhi, pieces, False, np.float64))
    if list(src.shape) == list(dst.shape) == [h - l for l, h in zip(lo, hi)] and src.size:
        assert len(runs) == 1 and runs[0][2] == src.nbytes


def _misaligned(a: np.ndarray, offset: int):
    """A copy of `a` whose data starts `offset` bytes past a 16-byte boundary (and the raw
    buffer that keeps it alive): the kernel widens copies to 16/8/4/2-byte units only where
    every row start is aligned to the unit."""
    raw = np.zeros(a.nbytes + 64, np.uint8)
    start = (-raw.ctypes.data) % 16 + offset
    view = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    view[...] = a
    return view, raw


@pytest.mark.parametrize("seed", range(8))
def test_kernel_body_rows_units_and_alignment(fetch_emulation, seed):
    """Larger boxes than above, sources and destinations at every alignment, blocks of 1 to
    256 threads: the collapsed rows, the widened copy units (16 bytes down to 1), the thread
    groups per row and the unrolled loads give NumPy's slicing result."""
    rng = np.random.default_rng(7000 + seed)
    for it in range(60):
        ndim = int(rng.integers(1, 5))
        full = tuple(int(v) for v in rng.integers(1, 12, size=ndim))
        dtype = [np.int8, np.float16, np.float32, np.float64][it % 4]
        accumulate = it % 5 == 0 and dtype in (np.float32, np.float64)
        value = (rng.standard_normal(full) * 50).astype(dtype)
        dlo = [int(rng.integers(0, s)) for s in full]
        dhi = [int(rng.integers(l + 1, s + 1)) for l, s in zip(dlo, full)]
        pieces = []
        for _ in range(int(rng.integers(1, 4)) if accumulate else 1):
            lo = [int(rng.integers(l, h)) for l, h in zip(dlo, dhi)]
            hi = [int(rng.integers(l + 1, h + 1)) for l, h in zip(lo, dhi)]
            pieces.append(([int(rng.integers(0, l + 1)) for l in lo],
                           [int(rng.integers(h, s + 1)) for h, s in zip(hi, full)], lo, hi))
        itemsize = np.dtype(dtype).itemsize
        keep, srcs = [], []
        for s in _sources(value, pieces):
            v, raw = _misaligned(s, itemsize * int(rng.integers(0, 4)))
            srcs.append(v)
            keep.append(raw)
        dst, raw = _misaligned(np.zeros([h - l for l, h in zip(dlo, dhi)], dtype), itemsize * int(rng.integers(0, 2)))
        grid = (int(rng.integers(1, 5)), int(rng.integers(1, 3)), int(rng.choice([1, 3, 8, 32, 256])))
        _emulate(fetch_emulation, dst, dlo, srcs, pieces, accumulate, grid)
        want = _expected(value, dlo, dhi, pieces, accumulate, dtype)
        if accumulate:
            np.testing.assert_allclose(dst, want, rtol=1e-5, atol=1e-3, err_msg=f"case {it}")
        else:
            assert dst.tobytes() == want.tobytes(), f"case {it}: {full} {dtype} {pieces} grid {grid}"
