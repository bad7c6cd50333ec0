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

}  // namespace autotile
