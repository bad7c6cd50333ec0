#include "runtime/multifetch.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "runtime/region_index.h"
#include "util/error.h"
#include "util/half.h"

namespace autotile {

namespace {

// Pieces of at least this many bytes, copied in runs shorter than 1/64 of it, use two threads.
constexpr int64_t kParallelBytes = int64_t{4} << 20;

// Bytes of one chunk of a piece shared between two threads.
constexpr int64_t kChunkBytes = int64_t{512} << 10;

// Work on [0, n) in chunks taken from a counter by this thread and one helper. On a machine
// whose other core is busy the helper may start late or never: this thread then takes the
// chunks itself and waits only for a chunk the helper has begun. The helper is detached and
// owns the counter with this thread, so it can outlive the call; once the counter is spent
// it never touches `work` (whose captures die with the call).
struct SharedWork {
  std::function<void(int64_t, int64_t)> work;
  int64_t n = 0, chunk = 1;
  std::atomic<int64_t> next{0}, done{0};

  void take_chunks() {
    for (int64_t lo; (lo = next.fetch_add(chunk)) < n;) {
      const int64_t hi = lo + chunk < n ? lo + chunk : n;
      work(lo, hi);
      done.fetch_add(hi - lo, std::memory_order_release);
    }
  }
};

// Whether a core looks idle: the load average over the last minute leaves one free. A helper
// on a machine whose cores are all busy (other device threads, other jobs) waits for a time
// slice and holds up the chunk it took; measured on the shared 2-core dev machine at load 8-12,
// splitting made strided copies 2-5x slower than one thread.
// AUTOTILE_MULTIFETCH_HELPER=0 or 1 turns the helper off or on regardless (tests, benchmarks).
bool spare_core() {
  if (const char* force = std::getenv("AUTOTILE_MULTIFETCH_HELPER"); force && (force[0] == '0' || force[0] == '1'))
    return force[0] == '1';
  double load = 0;
  const unsigned cores = std::thread::hardware_concurrency();
  return cores > 1 && getloadavg(&load, 1) == 1 && load + 1 <= cores;
}

void share_with_helper(int64_t n, int64_t bytes, std::function<void(int64_t, int64_t)> work) {
  if (!spare_core()) return work(0, n);
  auto shared = std::make_shared<SharedWork>();
  shared->work = std::move(work);
  shared->n = n;
  shared->chunk = std::max<int64_t>(1, kChunkBytes * n / bytes);
  std::thread([shared] { shared->take_chunks(); }).detach();
  shared->take_chunks();
  while (shared->done.load(std::memory_order_acquire) < n) std::this_thread::yield();
}

// Number of trailing dims one contiguous run spans: the innermost dim, plus each next-outer
// dim as long as the dims inside it are whole in both buffers (a channel slice of NCHW tiles
// is one run of C/k*H*W per image, not C/k*H runs of W).
int run_dims(int ndim, const int64_t* shape, const int64_t* src_shape, const int64_t* dst_shape) {
  if (ndim == 0) return 0;
  int dims = 1;
  for (int d = ndim - 1; d > 0; --d) {
    if (shape[d] != src_shape[d] || shape[d] != dst_shape[d]) break;
    ++dims;
  }
  return dims;
}

// Walks the runs of a region with an odometer over the outer dims: offsets move by strides,
// no division per run (which cost more than the copy for short runs such as the width half of
// NCHW tiles).
struct RunCursor {
  const RegionView& dv;
  const RegionView& sv;
  int outer;
  int64_t idx[kMaxRank] = {0};
  int64_t d_off, s_off;
  bool done = false;

  RunCursor(const RegionView& d, const RegionView& s, int outer_dims)
      : dv(d), sv(s), outer(outer_dims), d_off(d.base), s_off(s.base) {
    for (int k = 0; k < outer; ++k)
      if (dv.region_shape[k] == 0) done = true;
  }

  void next() {
    for (int k = outer - 1; k >= 0; --k) {
      d_off += dv.strides[k];
      s_off += sv.strides[k];
      if (++idx[k] < dv.region_shape[k]) return;
      d_off -= dv.strides[k] * idx[k];
      s_off -= sv.strides[k] * idx[k];
      idx[k] = 0;
    }
    done = true;
  }
};

// Calls f(dst_offset, src_offset) (elements) for every run of the region.
template <typename F>
void for_each_run(const RegionView& dv, const RegionView& sv, int outer, F&& f) {
  for (RunCursor c(dv, sv, outer); !c.done; c.next()) f(c.d_off, c.s_off);
}

// Short strided runs defeat the hardware prefetchers (each run starts a new DRAM page and
// stops after a few lines), so the source of the run a number of RUNS ahead is prefetched
// into L2 (prefetcht1: a prefetch into L1 holds one of the few L1 miss buffers until the line
// arrives, and measured here it capped strided reads at half the rate). The distance keeps
// about kPrefetchLines lines in flight: measured on the dev machine, 2-line runs 15872 bytes
// apart read at 3.4 GB/s without prefetching, 7.8 GB/s 16 runs ahead and 10-10.7 GB/s 32-64
// runs ahead; copies of 124- to 1984-byte runs were slower with 64 or 256 lines in flight.
constexpr int64_t kPrefetchLines = 128;
constexpr int64_t kPrefetchMaxRuns = 64;
// Runs at least this long are left to the hardware prefetcher.
constexpr int64_t kPrefetchMaxRun = 16384;

// Prefetches into L2 every line of [p, p + n), from the one holding its first byte, for
// reading or (rw = 1) for writing.
template <int rw>
inline void prefetch_lines(const char* p, int64_t n) {
  const uintptr_t first = reinterpret_cast<uintptr_t>(p);
  for (uintptr_t a = first & ~uintptr_t{63}; a < first + n; a += 64) __builtin_prefetch(reinterpret_cast<const void*>(a), rw, 2);
}

// Like for_each_run, prefetching the source of the run kPrefetchLines lines ahead, and its
// destination lines for writing when `dst` is given (runs copied with plain stores: the
// destination's read-for-ownership misses queue behind the source's; 124-byte runs measured
// +4-15% at load 6-7, unchanged at load 1-2).
template <typename F>
void for_each_run_prefetched(const RegionView& dv, const RegionView& sv, int outer, int64_t run_bytes,
                             int elem_size, const char* src, char* dst, F&& f) {
  if (run_bytes >= kPrefetchMaxRun) return for_each_run(dv, sv, outer, f);
  // lines of data one run holds (counting instead the one or two more lines a run may touch
  // put 496-byte runs 14 runs ahead, not 16: 0.94 of the previous kernel in 10 same-run A/Bs)
  const int64_t lines = (run_bytes + 63) / 64;
  RunCursor ahead(dv, sv, outer);
  for (int64_t k = std::clamp<int64_t>(kPrefetchLines / lines, 1, kPrefetchMaxRuns); k > 0 && !ahead.done; --k)
    ahead.next();
  for (RunCursor c(dv, sv, outer); !c.done; c.next()) {
    if (!ahead.done) {
      prefetch_lines<0>(src + ahead.s_off * elem_size, run_bytes);
      if (dst != nullptr) prefetch_lines<1>(dst + ahead.d_off * elem_size, run_bytes);
      ahead.next();
    }
    f(c.d_off, c.s_off);
  }
}

// Copies a run of n bytes into the StreamWriter's block: runs of 16 to kInlineRun bytes
// inline, 32 bytes at a time with the last move overlapping the one before (as libc's memcpy
// does, without its call and dispatch on the length per run: NCHW width halves, 176-byte runs,
// +11-31% in same-run A/Bs); longer runs through memcpy, whose AVX-512 moves beat these
// (496-byte runs were 5-10% slower inline). Runs copied straight to the destination keep
// memcpy: inline there, 124-byte runs measured ~10% slower. GCC vector types: one 32-byte or
// two 16-byte moves, whatever the target has.
constexpr size_t kInlineRun = 256;
// Runs up to this long whose destination is 16-byte aligned skip StreamWriter (copy_runs).
constexpr int64_t kDirectRun = 256;

typedef char Bytes32 __attribute__((vector_size(32)));
typedef char Bytes16 __attribute__((vector_size(16)));

template <typename V>
inline void move_bytes(char* out, const char* in) {
  V v;
  std::memcpy(&v, in, sizeof(V));
  std::memcpy(out, &v, sizeof(V));
}

inline void copy_run(char* out, const char* in, size_t n) {
  if (n < 16 || n > kInlineRun) return (void)std::memcpy(out, in, n);
  if (n < 32) {
    move_bytes<Bytes16>(out, in);
    return move_bytes<Bytes16>(out + n - 16, in + n - 16);
  }
  // 64 bytes a step, both halves loaded before either is stored
  size_t o = 0;
  for (; o + 64 <= n; o += 64) {
    Bytes32 a, b;
    std::memcpy(&a, in + o, 32);
    std::memcpy(&b, in + o + 32, 32);
    std::memcpy(out + o, &a, 32);
    std::memcpy(out + o + 32, &b, 32);
  }
  if (o + 32 <= n) move_bytes<Bytes32>(out + o, in + o), o += 32;
  if (o < n) move_bytes<Bytes32>(out + n - 32, in + n - 32);
}

// A destination at least this large is written with streaming (non-temporal) stores when it
// is one contiguous block: it would not stay in a core's L2 anyway, and skipping the
// read-for-ownership of every destination line saves a third of the memory traffic. (glibc's
// memcpy streams only above x86_non_temporal_threshold, 240 MB on this machine.)
constexpr int64_t kStreamBytes = int64_t{1} << 20;

#if defined(__SSE2__)
// Writes a byte stream to a contiguous destination with streaming stores, gathering short
// runs into an L1-resident block first so every streamed line is whole and aligned (short
// runs streamed one by one leave partial lines in the write-combining buffers).
class StreamWriter {
 public:
  explicit StreamWriter(char* dst)
      : out_(dst), head_(static_cast<size_t>(-reinterpret_cast<uintptr_t>(dst) & 63)) {}

  void put(const char* in, size_t n) {
    if (n <= kInlineRun && head_ == 0 && fill_ + n <= 2 * kBlock) {  // a short run: gather it inline
      copy_run(block_ + fill_, in, n);
      fill_ += n;
      if (fill_ >= kBlock) flush_block();
      return;
    }
    put_long(in, n);
  }

  // Writes what is left with plain stores and orders the streaming stores before later loads.
  void finish() {
    std::memcpy(out_, block_, fill_);
    out_ += fill_;
    fill_ = 0;
    _mm_sfence();
  }

 private:
  static constexpr size_t kBlock = 4096;

  // Long runs, and runs into a destination not yet at a line boundary. Kept out of put, so
  // that put's short-run path is inlined into the loop over runs (with this inside, put was
  // not, and 176-byte runs lost what the inline copies gain).
  __attribute__((noinline)) void put_long(const char* in, size_t n) {
    if (head_ > 0) {  // plain stores up to the first 64-byte boundary of the destination
      const size_t take = n < head_ ? n : head_;
      std::memcpy(out_, in, take);
      out_ += take, in += take, n -= take, head_ -= take;
    }
    while (n > 0) {
      if (fill_ == 0 && n >= kBlock) {  // long runs stream straight from the source
        const size_t whole = n / 64 * 64;
        stream(out_, in, whole, false);
        out_ += whole, in += whole, n -= whole;
        continue;
      }
      const size_t take = n < 2 * kBlock - fill_ ? n : 2 * kBlock - fill_;
      std::memcpy(block_ + fill_, in, take);
      fill_ += take, in += take, n -= take;
      if (fill_ >= kBlock) flush_block();
    }
  }

  // Streams the whole lines gathered, keeps the partial last one.
  void flush_block() {
    const size_t whole = fill_ / 64 * 64;
    stream(out_, block_, whole, true);
    out_ += whole;
    fill_ -= whole;
    std::memcpy(block_, block_ + whole, fill_);
  }

  static void stream(char* out, const char* in, size_t n, bool aligned_in) {
    for (size_t o = 0; o < n; o += 64) {
      __m128i a, b, c, d;
      if (aligned_in) {
        a = _mm_load_si128(reinterpret_cast<const __m128i*>(in + o));
        b = _mm_load_si128(reinterpret_cast<const __m128i*>(in + o + 16));
        c = _mm_load_si128(reinterpret_cast<const __m128i*>(in + o + 32));
        d = _mm_load_si128(reinterpret_cast<const __m128i*>(in + o + 48));
      } else {
        a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + o));
        b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + o + 16));
        c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + o + 32));
        d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + o + 48));
      }
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + o), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + o + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + o + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + o + 48), d);
    }
  }

  char* out_;
  size_t head_, fill_ = 0;
  alignas(64) char block_[2 * kBlock];
};
#endif

// Copies runs of `run_bytes` bytes. A large piece whose destination is one contiguous block
// is written with streaming stores, straight or through a StreamWriter; others copy run by run (short runs of a size known at compile
// time skip the call into libc's memcpy). Short strided source runs are prefetched.
void copy_runs(char* dst, const char* src, const RegionView& dv, const RegionView& sv, int outer, int64_t row_len,
               int elem_size, bool dst_packed) {
  const int64_t run_bytes = row_len * elem_size;
#if defined(__SSE2__)
  if (dst_packed && region_volume(dv) * elem_size >= kStreamBytes) {
    char* out = dst + dv.base * elem_size;
    if (run_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0 && run_bytes <= kDirectRun) {
      // Every run starts 16-byte aligned in the destination: streamed straight from the
      // source, without the gather into the block. Same-run A/Bs (8 each, load ~2.3): runs of
      // 64 bytes +65%, 96 +31%, 176 (the NCHW width half) +18-23%, 240 +37%, 256 +23%, 224 and
      // 32 +-2%; longer runs lost (496 bytes 0.58x, 1984 0.82x), so they keep the block.
      for_each_run_prefetched(dv, sv, outer, run_bytes, elem_size, src, nullptr, [&](int64_t, int64_t s) {
        const char* in = src + s * elem_size;
        for (int64_t o = 0; o < run_bytes; o += 16)
          _mm_stream_si128(reinterpret_cast<__m128i*>(out + o), _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + o)));
        out += run_bytes;
      });
      _mm_sfence();
      return;
    }
    StreamWriter w(dst + dv.base * elem_size);
    for_each_run_prefetched(dv, sv, outer, run_bytes, elem_size, src, nullptr, [&](int64_t, int64_t s) {
      w.put(src + s * elem_size, static_cast<size_t>(run_bytes));
    });
    w.finish();
    return;
  }
#else
  (void)dst_packed;
#endif
  auto fixed = [&](auto width) {
    for_each_run_prefetched(dv, sv, outer, run_bytes, elem_size, src, dst, [&](int64_t d, int64_t s) {
      std::memcpy(dst + d * elem_size, src + s * elem_size, decltype(width)::value);
    });
  };
  switch (run_bytes) {
    case 4: return fixed(std::integral_constant<size_t, 4>());
    case 8: return fixed(std::integral_constant<size_t, 8>());
    case 16: return fixed(std::integral_constant<size_t, 16>());
    case 32: return fixed(std::integral_constant<size_t, 32>());
    case 64: return fixed(std::integral_constant<size_t, 64>());
    default:
      for_each_run_prefetched(dv, sv, outer, run_bytes, elem_size, src, dst, [&](int64_t d, int64_t s) {
        std::memcpy(dst + d * elem_size, src + s * elem_size, static_cast<size_t>(run_bytes));
      });
  }
}

// Adds runs of `row_len` elements of T.
template <typename T>
void add_runs(char* dst, const char* src, const RegionView& dv, const RegionView& sv, int outer, int64_t row_len) {
  T* out = reinterpret_cast<T*>(dst);
  const T* in = reinterpret_cast<const T*>(src);
  for_each_run(dv, sv, outer, [&](int64_t d, int64_t s) {
    for (int64_t j = 0; j < row_len; ++j) out[d + j] += in[s + j];
  });
}

// float16 adds through float, each sum rounded back to float16 (as NumPy's float16 + does).
void add_half_runs(char* dst, const char* src, const RegionView& dv, const RegionView& sv, int outer, int64_t row_len) {
  auto* out = reinterpret_cast<uint16_t*>(dst);
  const auto* in = reinterpret_cast<const uint16_t*>(src);
  for_each_run(dv, sv, outer, [&](int64_t d, int64_t s) {
    for (int64_t j = 0; j < row_len; ++j)
      out[d + j] = half_from_float(float_from_half(out[d + j]) + float_from_half(in[s + j]));
  });
}

// bfloat16 partial sums add into a float scratch of the destination box (rounded once at the end).
void add_bfloat16_runs(float* acc, const char* src, const RegionView& dv, const RegionView& sv, int outer,
                       int64_t row_len) {
  const auto* in = reinterpret_cast<const uint16_t*>(src);
  for_each_run(dv, sv, outer, [&](int64_t d, int64_t s) {
    for (int64_t j = 0; j < row_len; ++j) acc[d + j] += float_from_bfloat16(in[s + j]);
  });
}

// Booleans accumulate as logical or: partial results of a split lookup are false outside the
// rows a device holds, so or-ing them is the sum a single device computes.
void or_runs(char* dst, const char* src, const RegionView& dv, const RegionView& sv, int outer, int64_t row_len) {
  auto* out = reinterpret_cast<uint8_t*>(dst);
  const auto* in = reinterpret_cast<const uint8_t*>(src);
  for_each_run(dv, sv, outer, [&](int64_t d, int64_t s) {
    for (int64_t j = 0; j < row_len; ++j) out[d + j] = static_cast<uint8_t>(out[d + j] | in[s + j]);
  });
}

}  // namespace

void multifetch(void* dst, const std::vector<int64_t>& dst_lo, const std::vector<int64_t>& dst_shape, int elem_size,
                FetchDType dtype, const std::vector<FetchSource>& pieces, bool accumulate) {
  const int ndim = static_cast<int>(dst_lo.size());
  if (ndim > kMaxRank) fail("multifetch: rank ", ndim, " exceeds ", kMaxRank);
  if (accumulate && dtype == FetchDType::kBytes) fail("multifetch: accumulation needs float, integer or bool data");
  int64_t dst_volume = 1;
  for (int64_t s : dst_shape) dst_volume *= s;
  if (accumulate) std::memset(dst, 0, static_cast<size_t>(dst_volume * elem_size));
  // bfloat16 partial sums reduce in float (mixed precision keeps reductions in fp32): the
  // pieces add into a float copy of the box, rounded to bfloat16 once after the last piece.
  std::vector<float> bf16_acc;
  if (accumulate && dtype == FetchDType::kBFloat16) {
    if (elem_size != 2) fail("multifetch: bfloat16 elements are 2 bytes, got ", elem_size);
    bf16_acc.assign(static_cast<size_t>(dst_volume), 0.0f);
  }
  for (const FetchSource& p : pieces) {
    if (static_cast<int>(p.lo.size()) != ndim || p.hi.size() != p.lo.size() || p.buf_lo.size() != p.lo.size() ||
        p.buf_shape.size() != p.lo.size())
      fail("multifetch: a piece has the wrong rank");
    int64_t shape[kMaxRank];
    for (int d = 0; d < ndim; ++d) {
      shape[d] = p.hi[d] - p.lo[d];
      if (shape[d] < 0 || p.lo[d] < p.buf_lo[d] || p.hi[d] > p.buf_lo[d] + p.buf_shape[d] || p.lo[d] < dst_lo[d] ||
          p.hi[d] > dst_lo[d] + dst_shape[d])
        fail("multifetch: piece [", p.lo[d], ", ", p.hi[d], ") of dim ", d, " lies outside its source [", p.buf_lo[d],
             ", ", p.buf_lo[d] + p.buf_shape[d], ") or the destination [", dst_lo[d], ", ", dst_lo[d] + dst_shape[d],
             ")");
    }
    RegionView sv = make_region_view(ndim, p.lo.data(), shape, p.buf_lo.data(), p.buf_shape.data());
    RegionView dv = make_region_view(ndim, p.lo.data(), shape, dst_lo.data(), dst_shape.data());
    if (region_volume(sv) == 0) continue;
    const int inner = run_dims(ndim, shape, p.buf_shape.data(), dst_shape.data());
    const int outer = ndim - inner;
    int64_t row_len = 1;
    for (int d = outer; d < ndim; ++d) row_len *= shape[d];
    // The piece fills its destination rows whole in every dim inside the outermost: its runs
    // lie back to back in the destination.
    bool dst_packed = true;
    for (int d = 1; d < ndim; ++d) dst_packed = dst_packed && shape[d] == dst_shape[d];
    const char* src = static_cast<const char*>(p.data);
    char* out = static_cast<char*>(dst);
    auto run = [&](const RegionView& d, const RegionView& s) {
      if (!accumulate) {
        copy_runs(out, src, d, s, outer, row_len, elem_size, dst_packed);
      } else if (dtype == FetchDType::kFloat32) {
        add_runs<float>(out, src, d, s, outer, row_len);
      } else if (dtype == FetchDType::kFloat64) {
        add_runs<double>(out, src, d, s, outer, row_len);
      } else if (dtype == FetchDType::kInt32) {
        add_runs<int32_t>(out, src, d, s, outer, row_len);
      } else if (dtype == FetchDType::kInt64) {
        add_runs<int64_t>(out, src, d, s, outer, row_len);
      } else if (dtype == FetchDType::kFloat16) {
        add_half_runs(out, src, d, s, outer, row_len);
      } else if (dtype == FetchDType::kBFloat16) {
        add_bfloat16_runs(bf16_acc.data(), src, d, s, outer, row_len);
      } else {
        or_runs(out, src, d, s, outer, row_len);
      }
    };
    // A large strided piece is shared with a helper thread (one core alone does not saturate
    // memory on short runs), in chunks of the outermost dim taken from a counter.
    const int64_t bytes = region_volume(sv) * elem_size;
    if (outer > 0 && dv.region_shape[0] > 1 && bytes >= kParallelBytes && row_len * elem_size < kParallelBytes / 64) {
      share_with_helper(dv.region_shape[0], bytes, [&](int64_t lo, int64_t hi) {
        RegionView d = dv, s = sv;
        d.region_shape[0] = s.region_shape[0] = hi - lo;
        d.base += lo * dv.strides[0];
        s.base += lo * sv.strides[0];
        run(d, s);
      });
    } else {
      run(dv, sv);
    }
  }
  if (!bf16_acc.empty()) {
    auto* out = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < dst_volume; ++i) out[i] = bfloat16_from_float(bf16_acc[static_cast<size_t>(i)]);
  }
}

}  // namespace autotile
