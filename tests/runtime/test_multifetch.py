"""Host MultiFetch (csrc/runtime/multifetch.cc) against NumPy slicing: random boxes, random
pieces (whole trailing dims or not, so contiguous runs of every length occur), copy and
accumulate, float32 / float64 / int32 / int64 / bool (accumulated as logical or) and other
dtypes (copied only); bad pieces are refused."""
import numpy as np
import pytest

import autotile as at
from autotile import _core


def _box(rng, shape):
    lo = [int(rng.integers(0, s)) for s in shape]
    hi = [int(rng.integers(l + 1, s + 1)) for l, s in zip(lo, shape)]
    return lo, hi


def _sub(rng, lo, hi, whole_trailing):
    """A random sub-box of [lo, hi); its last `whole_trailing` dims span the whole box."""
    n = len(lo)
    a, b = [], []
    for d in range(n):
        if d >= n - whole_trailing:
            a.append(lo[d])
            b.append(hi[d])
        else:
            x = int(rng.integers(lo[d], hi[d]))
            a.append(x)
            b.append(int(rng.integers(x + 1, hi[d] + 1)))
    return a, b


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.int64, np.bool_, np.int16])
@pytest.mark.parametrize("seed", range(25))
def test_multifetch_equals_numpy(dtype, seed):
    rng = np.random.default_rng(seed)
    ndim = int(rng.integers(1, 5))
    full = [int(rng.integers(1, 7)) for _ in range(ndim)]
    tensor = (rng.standard_normal(full) * 100).astype(dtype)
    if dtype == np.bool_:  # a mix of both values, so or-ing differs from overwriting
        tensor = rng.random(full) < 0.3
    dlo, dhi = _box(rng, full)
    dst = np.full([h - l for l, h in zip(dlo, dhi)], 7, dtype)
    want = dst.copy()
    pieces = []
    accumulate = dtype != np.int16 and bool(seed % 2)
    if accumulate:
        want[...] = 0
    for _ in range(int(rng.integers(1, 4))):
        rlo, rhi = _sub(rng, dlo, dhi, int(rng.integers(0, ndim + 1)))
        # the source buffer holds a box around the region, sometimes exactly the region
        slo = [int(rng.integers(0, l + 1)) if rng.random() < 0.6 else l for l in rlo]
        shi = [int(rng.integers(h, s + 1)) if rng.random() < 0.6 else h for h, s in zip(rhi, full)]
        src = np.ascontiguousarray(tensor[tuple(slice(a, b) for a, b in zip(slo, shi))])
        pieces.append((src, slo, rlo, rhi))
        region = tuple(slice(a - o, b - o) for a, b, o in zip(rlo, rhi, dlo))
        value = tensor[tuple(slice(a, b) for a, b in zip(rlo, rhi))]
        if accumulate and dtype == np.bool_:
            want[region] |= value
        elif accumulate:
            want[region] += value
        else:
            want[region] = value
    _core.multifetch(dst, dlo, pieces, accumulate)
    np.testing.assert_array_equal(dst, want)


def test_float16_accumulation_rounds_as_numpy_on_every_value():
    """Partial sums of a float16 model (what a k-device float16 training step accumulates):
    every one of the 65,536 float16 bit patterns plus another, each sum rounded to nearest even
    as NumPy's float16 + does (subnormals, overflow to infinity, infinities and nan included)."""
    a = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    rng = np.random.default_rng(0)
    for b in (rng.permutation(a), a[::-1].copy(), np.full_like(a, np.float16(2.0 ** -24)), -a):
        dst = np.full(a.shape, 7, np.float16)
        _core.multifetch(dst, [0], [(a, [0], [0], [a.size]), (b, [0], [0], [a.size])], True)
        with np.errstate(invalid="ignore", over="ignore"):
            want = a + b
        np.testing.assert_array_equal(dst, want)  # nan == nan here; the bits of every number equal
        assert np.array_equal(dst.view(np.uint16)[~np.isnan(want)], want.view(np.uint16)[~np.isnan(want)])


def test_channel_slice_of_nchw_tiles():
    # a channel half from two batch halves: runs of C/2*H*W elements per image
    x = np.arange(4 * 6 * 3 * 5, dtype=np.float32).reshape(4, 6, 3, 5)
    dst = np.empty((4, 3, 3, 5), np.float32)
    pieces = [(np.ascontiguousarray(x[:2]), (0, 0, 0, 0), (0, 3, 0, 0), (2, 6, 3, 5)),
              (np.ascontiguousarray(x[2:]), (2, 0, 0, 0), (2, 3, 0, 0), (4, 6, 3, 5))]
    _core.multifetch(dst, (0, 3, 0, 0), pieces)
    np.testing.assert_array_equal(dst, x[:, 3:])


def test_bad_pieces_are_refused():
    dst = np.zeros((4, 4), np.float32)
    src = np.ones((2, 4), np.float32)
    with pytest.raises(at.Error, match="outside its source"):
        _core.multifetch(dst, (0, 0), [(src, (0, 0), (0, 0), (3, 4))])
    with pytest.raises(at.Error, match="outside its source"):
        _core.multifetch(dst, (2, 0), [(src, (0, 0), (0, 0), (2, 4))])  # not in the destination
    with pytest.raises(at.Error, match="wrong rank"):
        _core.multifetch(dst, (0, 0), [(src, (0, 0), (0,), (2,))])
    frozen = np.zeros((4, 4), np.float32)
    frozen.flags.writeable = False
    with pytest.raises(at.Error, match="writeable"):
        _core.multifetch(frozen, (0, 0), [(src, (0, 0), (0, 0), (2, 4))])
    assert not frozen.any()
    with pytest.raises(at.Error, match="C-contiguous"):
        _core.multifetch(np.zeros((4, 8), np.float32)[:, ::2], (0, 0), [(src, (0, 0), (0, 0), (2, 4))])
    with pytest.raises(at.Error, match="a source must be a C-contiguous"):
        _core.multifetch(dst, (0, 0), [(np.ones((2, 8), np.float32)[:, ::2], (0, 0), (0, 0), (2, 4))])
    with pytest.raises(at.Error, match="sources must be"):
        _core.multifetch(dst, (0, 0), [(src.astype(np.float64), (0, 0), (0, 0), (2, 4))])


def _unaligned(shape, dtype, shift):
    """A C-contiguous array whose data starts `shift` elements past a fresh allocation."""
    n = int(np.prod(shape))
    return np.empty(n + shift, dtype)[shift:].reshape(shape)


@pytest.mark.parametrize("helper", ["0", "1"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16, np.uint8])
@pytest.mark.parametrize("shift", [0, 1, 3])
def test_large_pieces_equal_numpy(dtype, shift, helper, monkeypatch):
    # Pieces of a megabyte and more take the streaming path, pieces of 4 MB with short runs are
    # shared with a helper thread (forced on and off here: by default it depends on the load
    # average), in chunks of the outermost dim: column tiles
    # (short strided runs of every fixed and odd length), a width half of NCHW, whole rows;
    # destinations not 64-byte aligned, pieces landing mid-destination.
    monkeypatch.setenv("AUTOTILE_MULTIFETCH_HELPER", helper)
    rng = np.random.default_rng(shift)
    x = (rng.standard_normal((1100, 1030)) * 100).astype(dtype)
    for cols in [(0, 1030), (0, 515), (3, 4), (5, 7), (8, 12), (16, 24), (32, 48), (0, 64), (7, 207), (500, 1029)]:
        for rows in [(0, 1100), (37, 1063)]:
            dst = _unaligned((rows[1] - rows[0], cols[1] - cols[0]), dtype, shift)
            _core.multifetch(dst, (rows[0], cols[0]), [(x, (0, 0), (rows[0], cols[0]), (rows[1], cols[1]))])
            np.testing.assert_array_equal(dst, x[rows[0]:rows[1], cols[0]:cols[1]], err_msg=f"{cols} {rows}")
    # a tall tensor: megabyte pieces of 1..6-element runs
    n = (1 << 20) // (4 * np.dtype(dtype).itemsize) + 100
    tall = (rng.standard_normal((n, 24)) * 100).astype(dtype)
    for cols in [(1, 5), (3, 4), (0, 6), (2, 4)]:
        dst = _unaligned((n - 5, cols[1] - cols[0]), dtype, shift)
        _core.multifetch(dst, (5, cols[0]), [(tall, (0, 0), (5, cols[0]), (n, cols[1]))])
        np.testing.assert_array_equal(dst, tall[5:, cols[0]:cols[1]], err_msg=f"{cols}")
    # 4 MB column tiles (the helper's size), at two destination offsets, copied and accumulated
    rows = (4 << 20) // (64 * np.dtype(dtype).itemsize) + 300
    wide = (rng.standard_normal((rows, 96)) * 100).astype(dtype)
    dst = _unaligned((rows, 70), dtype, shift)
    pieces = [(wide, (0, 0), (0, 16), (rows, 80)), (wide, (0, 0), (0, 10), (rows, 16))]
    _core.multifetch(dst, (0, 10), pieces)
    np.testing.assert_array_equal(dst, wide[:, 10:80])
    if dtype in (np.float32, np.float64):
        _core.multifetch(dst, (0, 10), pieces + [(wide, (0, 0), (0, 10), (rows, 80))], True)
        np.testing.assert_array_equal(dst, wide[:, 10:80] * 2)
    # two pieces filling row bands of one destination (each packed, at an offset)
    dst = _unaligned((1100, 300), dtype, shift)
    _core.multifetch(dst, (0, 100), [(x[:600], (0, 0), (0, 100), (600, 400)),
                                     (np.ascontiguousarray(x[500:]), (500, 0), (600, 100), (1100, 400))])
    np.testing.assert_array_equal(dst, x[:, 100:400])
    # NCHW width half and channel half, 4-d
    t = (rng.standard_normal((8, 16, 60, 62)) * 100).astype(dtype)
    dst = _unaligned((8, 16, 60, 31), dtype, shift)
    _core.multifetch(dst, (0, 0, 0, 31), [(t, (0, 0, 0, 0), (0, 0, 0, 31), (8, 16, 60, 62))])
    np.testing.assert_array_equal(dst, t[..., 31:])
    dst = _unaligned((8, 8, 60, 62), dtype, shift)
    _core.multifetch(dst, (0, 8, 0, 0), [(t, (0, 0, 0, 0), (0, 8, 0, 0), (8, 16, 60, 62))])
    np.testing.assert_array_equal(dst, t[:, 8:])


def test_non_native_byte_order_copies_but_does_not_accumulate():
    # a big-endian buffer's elements are copied as bytes; adding them as native floats would be wrong
    x = np.arange(12, dtype=">f4").reshape(3, 4)
    dst = np.zeros((3, 2), ">f4")
    _core.multifetch(dst, (0, 1), [(x, (0, 0), (0, 1), (3, 3))])
    np.testing.assert_array_equal(dst, x[:, 1:3])
    with pytest.raises(at.Error, match="accumulation"):
        _core.multifetch(dst, (0, 1), [(x, (0, 0), (0, 1), (3, 3))], True)
    with pytest.raises(at.Error, match="destination's dtype"):
        _core.multifetch(dst, (0, 1), [(x.astype("<f4"), (0, 0), (0, 1), (3, 3))])


def _shifted(arr, shift):
    """A copy of `arr` whose data starts `shift` bytes past a 64-byte boundary."""
    raw = np.empty(arr.nbytes + 64 + shift, np.uint8)
    start = -raw.ctypes.data % 64 + shift
    out = raw[start:start + arr.nbytes].view(arr.dtype).reshape(arr.shape)
    out[...] = arr
    return out


# run lengths (bytes) around every branch of the copy: fixed-size moves, the 16-byte vector
# loop and its overlapping tail, the 1 KB inline limit, libc memcpy above it
_RUN_BYTES = list(range(1, 70)) + [95, 127, 128, 129, 176, 255, 496, 1008, 1023, 1024, 1025, 1040, 2047]


@pytest.mark.parametrize("src_shift", [0, 1, 13])
def test_every_short_run_length_equals_numpy(src_shift):
    # small pieces (plain stores, prefetched strided source) from sources and into destinations
    # that start off any alignment, at odd column offsets
    rng = np.random.default_rng(src_shift)
    for n in _RUN_BYTES:
        x = _shifted(rng.integers(0, 256, (40, n + 2 * (n % 7) + 3), np.uint8), src_shift)
        c0 = n % 7
        dst = _shifted(np.zeros((35, n), np.uint8), (src_shift + 5) % 16)
        _core.multifetch(dst, (3, c0), [(x, (0, 0), (3, c0), (38, c0 + n))])
        np.testing.assert_array_equal(dst, x[3:38, c0:c0 + n], err_msg=f"{n} bytes")


@pytest.mark.parametrize("helper", ["0", "1"])
@pytest.mark.parametrize("src_shift", [0, 3])
def test_large_pieces_of_every_run_length_equal_numpy(helper, src_shift, monkeypatch):
    # >= 1 MB packed destinations take the streaming writer, >= 4 MB ones the helper thread when
    # it is forced on; 1-byte, int64 and float32 elements; copies and accumulation
    monkeypatch.setenv("AUTOTILE_MULTIFETCH_HELPER", helper)
    rng = np.random.default_rng(src_shift)
    for n in [1, 3, 15, 16, 17, 31, 63, 100, 127, 176, 496, 1023, 1025]:
        rows = (4 << 20) // n + 3 if helper == "1" else (1 << 20) // n + 3
        x = _shifted(rng.integers(0, 256, (rows, n + 5), np.uint8), src_shift)
        dst = np.empty((rows - 2, n), np.uint8)
        _core.multifetch(dst, (2, 1), [(x, (0, 0), (2, 1), (rows, n + 1))])
        np.testing.assert_array_equal(dst, x[2:, 1:n + 1], err_msg=f"{n} bytes")
    for dtype in (np.int64, np.float32):
        for elems in [1, 3, 31, 62, 257]:
            size = np.dtype(dtype).itemsize
            rows = (4 << 20) // (elems * size) + 3
            x = _shifted((rng.standard_normal((rows, elems + 3)) * 1000).astype(dtype), 4 * src_shift)
            dst = np.empty((rows, elems), dtype)
            _core.multifetch(dst, (0, 2), [(x, (0, 0), (0, 2), (rows, elems + 2))])
            np.testing.assert_array_equal(dst, x[:, 2:elems + 2], err_msg=f"{dtype} {elems}")
            # two overlapping pieces added: rows [0, rows) once and [rows // 3, rows) again
            _core.multifetch(dst, (0, 2), [(x, (0, 0), (0, 2), (rows, elems + 2)),
                                           (x, (0, 0), (rows // 3, 2), (rows, elems + 2))], True)
            want = x[:, 2:elems + 2].copy()
            want[rows // 3:] += x[rows // 3:, 2:elems + 2]
            np.testing.assert_array_equal(dst, want, err_msg=f"{dtype} {elems} accumulated")


@pytest.mark.parametrize("helper", ["0", "1"])
def test_streamed_runs_of_16_byte_multiples_equal_numpy(helper, monkeypatch):
    # Runs of 16-256 bytes into a 16-byte aligned destination are streamed straight from the
    # source; unaligned or longer ones go through the gather block. Two row bands per call,
    # the second (over 4 MB: the helper's, when forced on) starting mid-destination.
    monkeypatch.setenv("AUTOTILE_MULTIFETCH_HELPER", helper)
    rng = np.random.default_rng(7)
    for n in [16, 48, 176, 256, 272]:
        rows = (8 << 20) // n + 5
        x = rng.integers(0, 256, (rows, n + 40), np.uint8)
        split = rows // 3 + 1
        for dst_shift in [0, 4]:
            dst = _shifted(np.zeros((rows, n), np.uint8), dst_shift)
            _core.multifetch(dst, (0, 8), [(x, (0, 0), (0, 8), (split, n + 8)),
                                           (x, (0, 0), (split, 8), (rows, n + 8))])
            np.testing.assert_array_equal(dst, x[:, 8:n + 8], err_msg=f"{n} bytes, shift {dst_shift}")
