// CUDA MultiFetch (Tofu Sec 6): one kernel launch assembles a region of a tensor in place in
// a destination buffer from pieces held in other buffers, possibly on other GPUs (read
// through CUDA Unified Virtual Addressing once peer access is enabled).
//
// The index arithmetic is runtime/region_index.h, shared with the host MultiFetch
// (runtime/multifetch.cc); this file adds no second copy of it.
//
// One source, three compilers:
//   * nvcc (CMake, .ci/nvcc-check.sh): the kernels below, packaged as a fatbin that the GPU
//     runtime loads with cupy.RawModule(path=...);
//   * NVRTC (cupy.RawModule(code=...)) when no fatbin was built or the driver rejects it;
//   * a host C++ compiler (tests/gpu): without __CUDACC__ the same per-element code runs on
//     the CPU over the same packed records, with the kernel's block/thread mapping simulated
//     (autotile_multifetch_host), so the record layout and the kernel body are tested on
//     machines with no GPU.
//
// Records (int64_t words, kRecordWords each, packed by autotile/backend/gpu_fetch.py):
//   record 0        the destination: [ptr, ndim, box lo[kMaxRank], box shape[kMaxRank], unused...]
//   record 1 + p    piece p:         [src ptr, ndim, src box lo, src box shape, region lo, region shape]
// Regions are absolute tensor coordinates; boxes are what a buffer holds. The launcher has
// checked every region lies inside its source box and the destination box.
#if defined(__CUDACC_RTC__)
// NVRTC has no C++ standard library; runtime/region_index.h includes <cstdint>, which the
// GPU runtime points at csrc/cuda/nvrtc/ (fixed-width types only).
#endif
#include "runtime/region_index.h"

namespace autotile {
namespace cuda_fetch {

constexpr int kRecordWords = 2 + 4 * kMaxRank;
constexpr int kSrcLo = 2, kSrcShape = 2 + kMaxRank, kLo = 2 + 2 * kMaxRank, kShape = 2 + 3 * kMaxRank;

/// \brief Views of piece `p`'s region in its source and in the destination (region_index.h).
AT_HD inline void piece_views(const int64_t* records, int p, RegionView* dst_view, RegionView* src_view) {
  const int64_t* dst = records;
  const int64_t* rec = records + (1 + p) * kRecordWords;
  const int ndim = static_cast<int>(dst[1]);
  const int64_t* lo = rec + kLo;
  const int64_t* shape = rec + kShape;
  *src_view = make_region_view(ndim, lo, shape, rec + kSrcLo, rec + kSrcShape);
  *dst_view = make_region_view(ndim, lo, shape, dst + kSrcLo, dst + kSrcShape);
}

template <typename T>
AT_HD inline void add_to(T* d, T v) {
#if defined(__CUDA_ARCH__)
  atomicAdd(d, v);  // pieces of a reduction overlap; float/double atomics (sm_60+)
#else
  *d += v;
#endif
}

/// \brief Elements begin, begin + step, ... of one piece: the work of one thread.
template <typename T, bool kAdd>
AT_HD inline void fetch_piece_range(const RegionView& dv, const RegionView& sv, T* dst, const T* src, int64_t begin,
                                    int64_t step) {
  const int64_t n = region_volume(sv);
  for (int64_t i = begin; i < n; i += step) {
    const T v = src[region_offset(sv, i)];
    T* d = dst + region_offset(dv, i);
    if constexpr (kAdd)
      add_to(d, v);
    else
      *d = v;
  }
}

template <typename T>
AT_HD inline const T* piece_src(const int64_t* records, int p) {
  return reinterpret_cast<const T*>(static_cast<uint64_t>(records[(1 + p) * kRecordWords]));
}

template <typename T>
AT_HD inline T* dst_ptr(const int64_t* records) {
  return reinterpret_cast<T*>(static_cast<uint64_t>(records[0]));
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
// Grid: x strides over a piece's elements, y (with a stride of gridDim.y) walks the pieces.
// Thread 0 of a block builds the two views into shared memory once per piece.
template <typename T, bool kAdd>
__device__ inline void multifetch_kernel(const int64_t* records, int n_pieces) {
  // Raw storage: RegionView's default member initialisers are not allowed on __shared__.
  __shared__ alignas(RegionView) unsigned char storage[2 * sizeof(RegionView)];
  RegionView* views = reinterpret_cast<RegionView*>(storage);
  for (int p = blockIdx.y; p < n_pieces; p += gridDim.y) {
    if (threadIdx.x == 0) piece_views(records, p, &views[0], &views[1]);
    __syncthreads();
    fetch_piece_range<T, kAdd>(views[0], views[1], dst_ptr<T>(records), piece_src<T>(records, p),
                               static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x,
                               static_cast<int64_t>(gridDim.x) * blockDim.x);
    __syncthreads();
  }
}
#endif

}  // namespace cuda_fetch
}  // namespace autotile

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
// Unmangled entry points for cupy.RawModule.get_function. Copies move elements of 1, 2, 4
// or 8 bytes (any dtype); accumulation (into a zero-filled destination) is float32/float64.
#define AT_FETCH_KERNEL(NAME, T, ADD)                                                      \
  extern "C" __global__ void NAME(const int64_t* records, int n_pieces) {                \
    autotile::cuda_fetch::multifetch_kernel<T, ADD>(records, n_pieces);                    \
  }
AT_FETCH_KERNEL(autotile_multifetch_copy1, unsigned char, false)
AT_FETCH_KERNEL(autotile_multifetch_copy2, unsigned short, false)
AT_FETCH_KERNEL(autotile_multifetch_copy4, unsigned int, false)
AT_FETCH_KERNEL(autotile_multifetch_copy8, unsigned long long, false)
AT_FETCH_KERNEL(autotile_multifetch_add_f32, float, true)
AT_FETCH_KERNEL(autotile_multifetch_add_f64, double, true)
#undef AT_FETCH_KERNEL

#else  // host C++ compiler: CPU emulation of the kernels for tests

namespace {
template <typename T, bool kAdd>
void emulate(const int64_t* records, int n_pieces, int grid_x, int grid_y, int block_x) {
  using namespace autotile;
  using namespace autotile::cuda_fetch;
  for (int by = 0; by < grid_y; ++by)
    for (int p = by; p < n_pieces; p += grid_y) {
      RegionView dv, sv;
      piece_views(records, p, &dv, &sv);
      for (int bx = 0; bx < grid_x; ++bx)
        for (int tx = 0; tx < block_x; ++tx)
          fetch_piece_range<T, kAdd>(dv, sv, dst_ptr<T>(records), piece_src<T>(records, p),
                                     static_cast<int64_t>(bx) * block_x + tx, static_cast<int64_t>(grid_x) * block_x);
    }
}
}  // namespace

extern "C" int autotile_multifetch_record_words() { return autotile::cuda_fetch::kRecordWords; }

/// Runs what a launch of kernel `kind` ("copy<size>" = 1/2/4/8, "add_f32" = 5, "add_f64" = 6)
/// with the given grid would do, on host memory. Returns 0, or -1 for an unknown kind.
extern "C" int autotile_multifetch_host(int kind, const int64_t* records, int n_pieces, int grid_x, int grid_y,
                                        int block_x) {
  switch (kind) {
    case 1: emulate<unsigned char, false>(records, n_pieces, grid_x, grid_y, block_x); return 0;
    case 2: emulate<unsigned short, false>(records, n_pieces, grid_x, grid_y, block_x); return 0;
    case 4: emulate<unsigned int, false>(records, n_pieces, grid_x, grid_y, block_x); return 0;
    case 8: emulate<unsigned long long, false>(records, n_pieces, grid_x, grid_y, block_x); return 0;
    case 5: emulate<float, true>(records, n_pieces, grid_x, grid_y, block_x); return 0;
    case 6: emulate<double, true>(records, n_pieces, grid_x, grid_y, block_x); return 0;
    default: return -1;
  }
}
#endif
