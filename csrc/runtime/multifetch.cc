#include "runtime/multifetch.h"

#include <cstdint>
#include <cstring>
#include <thread>

#include "runtime/region_index.h"
#include "util/error.h"

namespace autotile {

namespace {

// Pieces of at least this many bytes, copied in runs shorter than 1/64 of it, use two threads.
constexpr int64_t kParallelBytes = int64_t{4} << 20;

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

// Calls f(dst_offset, src_offset) (elements) for every run of the region, walking the outer
// dims with an odometer: offsets move by strides, no division per run (which cost more than
// the copy for short runs such as the width half of NCHW tiles).
template <typename F>
void for_each_run(const RegionView& dv, const RegionView& sv, int outer, F&& f) {
  int64_t idx[kMaxRank] = {0};
  int64_t d_off = dv.base, s_off = sv.base;
  for (int d = 0; d < outer; ++d)
    if (dv.region_shape[d] == 0) return;
  while (true) {
    f(d_off, s_off);
    int d = outer - 1;
    for (; d >= 0; --d) {
      d_off += dv.strides[d];
      s_off += sv.strides[d];
      if (++idx[d] < dv.region_shape[d]) break;
      d_off -= dv.strides[d] * idx[d];
      s_off -= sv.strides[d] * idx[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

// Copies runs of `row_len` elements of T; short runs of a size known here skip the call into
// libc's memcpy.
template <typename T>
void copy_runs(char* dst, const char* src, const RegionView& dv, const RegionView& sv, int outer, int64_t row_len) {
  T* out = reinterpret_cast<T*>(dst);
  const T* in = reinterpret_cast<const T*>(src);
  if (row_len <= 8) {
    for_each_run(dv, sv, outer, [&](int64_t d, int64_t s) {
      for (int64_t j = 0; j < row_len; ++j) out[d + j] = in[s + j];
    });
  } else {
    const size_t bytes = static_cast<size_t>(row_len) * sizeof(T);
    for_each_run(dv, sv, outer, [&](int64_t d, int64_t s) { std::memcpy(out + d, in + s, bytes); });
  }
}

void copy_runs_bytes(char* dst, const char* src, const RegionView& dv, const RegionView& sv, int outer,
                     int64_t row_len, int elem_size) {
  const size_t bytes = static_cast<size_t>(row_len) * elem_size;
  for_each_run(dv, sv, outer, [&](int64_t d, int64_t s) { std::memcpy(dst + d * elem_size, src + s * elem_size, bytes); });
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
    const char* src = static_cast<const char*>(p.data);
    char* out = static_cast<char*>(dst);
    auto run = [&](const RegionView& d, const RegionView& s) {
      if (!accumulate) {
        if (elem_size == 4) copy_runs<uint32_t>(out, src, d, s, outer, row_len);
        else if (elem_size == 8) copy_runs<uint64_t>(out, src, d, s, outer, row_len);
        else copy_runs_bytes(out, src, d, s, outer, row_len, elem_size);
      } else if (dtype == FetchDType::kFloat32) {
        add_runs<float>(out, src, d, s, outer, row_len);
      } else if (dtype == FetchDType::kFloat64) {
        add_runs<double>(out, src, d, s, outer, row_len);
      } else if (dtype == FetchDType::kInt32) {
        add_runs<int32_t>(out, src, d, s, outer, row_len);
      } else if (dtype == FetchDType::kInt64) {
        add_runs<int64_t>(out, src, d, s, outer, row_len);
      } else {
        or_runs(out, src, d, s, outer, row_len);
      }
    };
    // A large strided piece is copied by two threads, each taking half of the outermost dim:
    // one core alone does not saturate memory on short runs.
    const int64_t bytes = region_volume(sv) * elem_size;
    if (outer > 0 && dv.region_shape[0] > 1 && bytes >= kParallelBytes && row_len * elem_size < kParallelBytes / 64) {
      RegionView d1 = dv, s1 = sv, d2 = dv, s2 = sv;
      const int64_t half = dv.region_shape[0] / 2;
      d1.region_shape[0] = s1.region_shape[0] = half;
      d2.region_shape[0] = s2.region_shape[0] = dv.region_shape[0] - half;
      d2.base += half * dv.strides[0];
      s2.base += half * sv.strides[0];
      std::thread helper([&] { run(d2, s2); });
      run(d1, s1);
      helper.join();
    } else {
      run(dv, sv);
    }
  }
}

}  // namespace autotile
