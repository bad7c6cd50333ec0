// Region index arithmetic shared by the host MultiFetch and the CUDA MultiFetch kernel:
// where element `i` (row-major linear index within a region) lives in a C-contiguous
// buffer that holds a box of the same tensor. Compiled by both the host compiler and nvcc.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define AT_HD __host__ __device__
#else
#define AT_HD
#endif

namespace autotile {

constexpr int kMaxRank = 16;

/// \brief A region of a tensor and where it sits in one buffer.
struct RegionView {
  int ndim = 0;
  int64_t region_shape[kMaxRank];  ///< extent of the region per dim
  int64_t strides[kMaxRank];       ///< buffer strides (elements) per dim
  int64_t base = 0;                ///< buffer offset (elements) of the region's first element
};

/// \brief Builds the view of region [lo, lo+shape) inside a buffer holding box [buf_lo, buf_lo+buf_shape).
AT_HD inline RegionView make_region_view(int ndim, const int64_t* lo, const int64_t* shape, const int64_t* buf_lo,
                                         const int64_t* buf_shape) {
  RegionView v;
  v.ndim = ndim;
  int64_t stride = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    v.strides[d] = stride;
    stride *= buf_shape[d];
  }
  v.base = 0;
  for (int d = 0; d < ndim; ++d) {
    v.region_shape[d] = shape[d];
    v.base += (lo[d] - buf_lo[d]) * v.strides[d];
  }
  return v;
}

/// \brief Buffer offset (elements) of the i-th element of the region in row-major order.
AT_HD inline int64_t region_offset(const RegionView& v, int64_t i) {
  int64_t off = v.base;
  for (int d = v.ndim - 1; d >= 0; --d) {
    int64_t extent = v.region_shape[d];
    off += (i % extent) * v.strides[d];
    i /= extent;
  }
  return off;
}

/// \brief Number of elements in the region.
AT_HD inline int64_t region_volume(const RegionView& v) {
  int64_t n = 1;
  for (int d = 0; d < v.ndim; ++d) n *= v.region_shape[d];
  return n;
}


/// \brief Merges adjacent dims of two views of the same region where the region is contiguous
/// across them in both buffers (the inner dim spans its whole buffer extent in each) and drops
/// dims of extent 1, so the innermost dim becomes the longest run contiguous in both (stride 1
/// in both: a unit dim stands in when the innermost dim had extent 1). The
/// element order, and so region_offset's i -> offset map, is unchanged. Keeps at least one dim.
AT_HD inline void collapse_region_pair(RegionView* a, RegionView* b) {
  int n = 0;  // dims kept so far, outermost first; merged in place
  for (int d = 0; d < a->ndim; ++d) {
    const int64_t extent = a->region_shape[d];
    if (extent == 1 && a->ndim > 1) continue;
    if (n > 0 && a->strides[n - 1] == a->strides[d] * extent && b->strides[n - 1] == b->strides[d] * extent) {
      // the kept outer dim steps exactly over this one in both buffers: fold it in
      a->region_shape[n - 1] *= extent;
      b->region_shape[n - 1] *= extent;
      a->strides[n - 1] = a->strides[d];
      b->strides[n - 1] = b->strides[d];
      continue;
    }
    a->region_shape[n] = b->region_shape[n] = extent;
    a->strides[n] = a->strides[d];
    b->strides[n] = b->strides[d];
    ++n;
  }
  if (n == 0 || a->strides[n - 1] != 1 || b->strides[n - 1] != 1) {
    // the innermost dim had extent 1 and was dropped (or every dim was): a unit row keeps the
    // innermost dim contiguous in both buffers (n < ndim <= kMaxRank here)
    a->region_shape[n] = b->region_shape[n] = 1;
    a->strides[n] = b->strides[n] = 1;
    ++n;
  }
  a->ndim = b->ndim = n;
}

}  // namespace autotile
