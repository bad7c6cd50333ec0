#include "runtime/multifetch.h"

#include <cstring>

#include "runtime/region_index.h"
#include "util/error.h"

namespace autotile {

namespace {

// Adds the region's contiguous runs of `row_len` elements, walking the outer dims.
template <typename T>
void add_rows(char* dst, const char* src, const RegionView& dv, const RegionView& sv, int64_t rows, int64_t row_len) {
  for (int64_t r = 0; r < rows; ++r) {
    T* d = reinterpret_cast<T*>(dst) + region_offset(dv, r * row_len);
    const T* s = reinterpret_cast<const T*>(src) + region_offset(sv, r * row_len);
    for (int64_t j = 0; j < row_len; ++j) d[j] += s[j];
  }
}

// Elements per contiguous run of a region: the innermost dim, times each next-outer dim as
// long as the dims inside it are whole in both buffers (a channel slice of NCHW tiles is one
// run of C/k*H*W per image, not C/k*H runs of W).
int64_t contiguous_run(int ndim, const int64_t* shape, const int64_t* src_shape, const int64_t* dst_shape) {
  if (ndim == 0) return 1;
  int64_t run = shape[ndim - 1];
  for (int d = ndim - 1; d > 0; --d) {
    if (shape[d] != src_shape[d] || shape[d] != dst_shape[d]) break;
    run *= shape[d - 1];
  }
  return run;
}

}  // namespace

void multifetch(void* dst, const std::vector<int64_t>& dst_lo, const std::vector<int64_t>& dst_shape, int elem_size,
                FetchDType dtype, const std::vector<FetchSource>& pieces, bool accumulate) {
  const int ndim = static_cast<int>(dst_lo.size());
  if (ndim > kMaxRank) fail("multifetch: rank ", ndim, " exceeds ", kMaxRank);
  if (accumulate && dtype == FetchDType::kBytes) fail("multifetch: accumulation needs float32 or float64 data");
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
    int64_t volume = region_volume(sv);
    if (volume == 0) continue;
    int64_t row_len = contiguous_run(ndim, shape, p.buf_shape.data(), dst_shape.data());
    int64_t rows = volume / row_len;
    const char* src = static_cast<const char*>(p.data);
    char* out = static_cast<char*>(dst);
    if (!accumulate) {
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(out + region_offset(dv, r * row_len) * elem_size, src + region_offset(sv, r * row_len) * elem_size,
                    static_cast<size_t>(row_len * elem_size));
    } else if (dtype == FetchDType::kFloat32) {
      add_rows<float>(out, src, dv, sv, rows, row_len);
    } else {
      add_rows<double>(out, src, dv, sv, rows, row_len);
    }
  }
}

}  // namespace autotile
