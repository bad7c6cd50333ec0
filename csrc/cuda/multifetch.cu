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
//
// The records are decoded once per fetch op (autotile_multifetch_prepare, at the runtime's
// setup): per piece a PieceWork of kWorkBytes with the region collapsed to rows contiguous
// in both buffers and the widest copy unit the alignment allows. The fetch kernels read it
// (one block-wide load into shared memory), so no block decodes records or divides per element.
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

/// \brief One piece's work after collapsing (region_index.h): `rows` rows of `row_len` units
/// of `unit` bytes, contiguous within a row in both buffers; the views' last dim is the row.
/// Copies move the widest unit (16, 8, 4, 2 bytes) that the element size and the alignment of
/// both buffers' rows allow; accumulations move one element at a time.
struct PieceWork {
  RegionView dst, src;  ///< collapsed views, base 0; strides in units
  int64_t dst_addr = 0;   ///< byte address of the region's first element in the destination
  int64_t src_addr = 0;   ///< ... and in the source
  int64_t rows = 0;
  int64_t row_len = 0;  ///< units per row
  int unit = 1;         ///< bytes per unit
  int group = 1;        ///< threads per row (a power of two, at most the block size)
  int64_t chunks = 1;   ///< units of work per row: kUnroll * group units each
};

/// \brief Bytes the launcher reserves per piece for its PieceWork (gpu_fetch.WORK_BYTES).
constexpr int kWorkBytes = 1024;
static_assert(sizeof(PieceWork) <= kWorkBytes && sizeof(PieceWork) % 8 == 0, "PieceWork must fit kWorkBytes");

constexpr int kUnroll = 4;
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define AT_UNROLL _Pragma("unroll")
#else
#define AT_UNROLL
#endif  // units each thread loads before it stores (memory-level parallelism)

/// \brief Largest power of two <= 16 dividing every value (0 divides by anything).
AT_HD inline int common_alignment(const int64_t* values, int n) {
  int64_t bits = 16;
  for (int i = 0; i < n; ++i) bits |= values[i];
  return static_cast<int>(bits & -bits);
}

/// \brief Builds piece `p`'s work for elements of `elem` bytes (kVector: copies may widen the unit).
template <bool kVector>
AT_HD inline void make_piece_work(const int64_t* records, int p, int elem, int block, PieceWork* w) {
  piece_views(records, p, &w->dst, &w->src);
  collapse_region_pair(&w->dst, &w->src);
  const int nd = w->src.ndim;
  w->row_len = w->src.region_shape[nd - 1];
  w->rows = w->row_len == 0 ? 0 : region_volume(w->src) / w->row_len;
  w->dst_addr = records[0] + w->dst.base * elem;
  w->src_addr = records[(1 + p) * kRecordWords] + w->src.base * elem;
  w->dst.base = w->src.base = 0;
  int unit = elem;
  if (kVector) {
    int64_t vals[2 * kMaxRank + 3];
    int n = 0;
    vals[n++] = w->dst_addr;  // every row start is one of these plus outer strides
    vals[n++] = w->src_addr;
    vals[n++] = w->row_len * elem;
    for (int d = 0; d < nd - 1; ++d) {
      vals[n++] = w->dst.strides[d] * elem;
      vals[n++] = w->src.strides[d] * elem;
    }
    unit = common_alignment(vals, n);
    if (unit < elem) unit = elem;
  }
  const int scale = unit / elem;
  if (scale > 1) {
    w->row_len /= scale;
    for (int d = 0; d < nd - 1; ++d) {
      w->dst.strides[d] /= scale;
      w->src.strides[d] /= scale;
    }
  }
  w->unit = unit;
  int group = 1;
  while (group < block && group < w->row_len) group *= 2;
  if (group > block) group /= 2;
  w->group = group;
  w->chunks = (w->row_len + int64_t(kUnroll) * group - 1) / (int64_t(kUnroll) * group);
  if (w->chunks < 1) w->chunks = 1;
}

/// \brief Offset (units) of row `r`'s first unit in a collapsed view. The outermost dim needs
/// no division (r < its extent there), and 32-bit division stands in for 64-bit where the
/// values fit: 64-bit division is a long software sequence on GPUs, paid per row.
AT_HD inline int64_t row_offset(const RegionView& v, int64_t r) {
  int64_t off = v.base;
  int d = v.ndim - 2;
  for (; d > 0 && r > 0; --d) {
    const int64_t extent = v.region_shape[d];
    int64_t q, m;
    if (r <= 0x7fffffff && extent <= 0x7fffffff) {
      const uint32_t r32 = static_cast<uint32_t>(r), e32 = static_cast<uint32_t>(extent);
      q = r32 / e32;
      m = r32 - static_cast<uint32_t>(q) * e32;
    } else {
      q = r / extent;
      m = r - q * extent;
    }
    off += m * v.strides[d];
    r = q;
  }
  if (d == 0) off += r * v.strides[0];
  return off;
}

/// \brief The work of thread `tid` of a block of `block` threads that takes units of work
/// begin, begin + step, ...: each unit of work is `group` threads per row over a band of
/// block / group rows, kUnroll loads in flight per thread before the stores.
template <typename U, bool kAdd>
AT_HD inline void fetch_piece_units(const PieceWork& w, U* dst, const U* src, int tid, int block, int64_t begin,
                                    int64_t step) {
  const int rows_per_band = block / w.group;
  const int band_row = tid / w.group;
  const int lane = tid % w.group;
  if (band_row >= rows_per_band || w.rows == 0) return;
  // Short rows (one group covers a row): each thread's kUnroll loads walk kUnroll rows of a
  // band of kUnroll * rows_per_band rows. Long rows: they walk one row's columns.
  const bool short_rows = w.chunks == 1 && w.row_len <= w.group;
  const int64_t band = short_rows ? int64_t(rows_per_band) * kUnroll : rows_per_band;
  const int64_t units = (w.rows + band - 1) / band * (short_rows ? 1 : w.chunks);
  for (int64_t u = begin; u < units; u += step) {
    int64_t row = (short_rows ? u : u / w.chunks) * band + band_row;
    const int64_t first = short_rows ? lane : (u % w.chunks) * kUnroll * w.group + lane;
    const int64_t row_step = short_rows ? rows_per_band : 0;
    const int64_t col_step = short_rows ? 0 : w.group;
    U v[kUnroll];
    AT_UNROLL
    for (int k = 0; k < kUnroll; ++k) {
      const int64_t r = row + k * row_step, c = first + k * col_step;
      if (r < w.rows && c < w.row_len) v[k] = src[row_offset(w.src, r) + c];
    }
    AT_UNROLL
    for (int k = 0; k < kUnroll; ++k) {
      const int64_t r = row + k * row_step, c = first + k * col_step;
      if (r < w.rows && c < w.row_len) {
        U* d = dst + row_offset(w.dst, r) + c;
        if constexpr (kAdd)
          add_to(d, v[k]);
        else
          *d = v[k];
      }
    }
  }
}

/// \brief 16-byte copy unit (uint4 on the GPU: one 128-bit load and store).
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
using Unit16 = uint4;
#else
struct alignas(16) Unit16 {
  uint64_t lo, hi;
};
#endif

/// \brief Copies piece `w` with the unit it chose (the element type no longer matters).
AT_HD inline void copy_piece(const PieceWork& w, void* dst, const void* src, int tid, int block, int64_t begin,
                             int64_t step) {
  switch (w.unit) {
    case 16: fetch_piece_units<Unit16, false>(w, static_cast<Unit16*>(dst), static_cast<const Unit16*>(src), tid, block, begin, step); break;
    case 8: fetch_piece_units<uint64_t, false>(w, static_cast<uint64_t*>(dst), static_cast<const uint64_t*>(src), tid, block, begin, step); break;
    case 4: fetch_piece_units<uint32_t, false>(w, static_cast<uint32_t*>(dst), static_cast<const uint32_t*>(src), tid, block, begin, step); break;
    case 2: fetch_piece_units<uint16_t, false>(w, static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), tid, block, begin, step); break;
    default: fetch_piece_units<uint8_t, false>(w, static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), tid, block, begin, step); break;
  }
}

/// \brief Thread `tid`'s share of piece `p` (begin/step: this block's units of work).
template <typename T, bool kAdd>
AT_HD inline void fetch_piece(const PieceWork& w, int tid, int block, int64_t begin, int64_t step) {
  void* dst = reinterpret_cast<void*>(static_cast<uint64_t>(w.dst_addr));
  const void* src = reinterpret_cast<const void*>(static_cast<uint64_t>(w.src_addr));
  if constexpr (kAdd)
    fetch_piece_units<T, true>(w, static_cast<T*>(dst), static_cast<const T*>(src), tid, block, begin, step);
  else
    copy_piece(w, dst, src, tid, block, begin, step);
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
/// \brief Piece p's work (views, collapse, unit), once per fetch op and piece: thread p of
/// the launch. The fetch kernels then read it instead of each block decoding the records.
__device__ inline void prepare_works(const int64_t* records, int n_pieces, int elem, bool vector, int block,
                                     unsigned char* works) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= n_pieces) return;
  PieceWork* w = reinterpret_cast<PieceWork*>(works + int64_t(p) * kWorkBytes);
  if (vector)
    make_piece_work<true>(records, p, elem, block, w);
  else
    make_piece_work<false>(records, p, elem, block, w);
}

// Grid: x strides over a piece's units of work, y (with a stride of gridDim.y) walks the
// pieces. A block copies the piece's prepared work into shared memory with all its threads
// (one coalesced read of a few hundred bytes); no per-element index division is left.
template <typename T, bool kAdd>
__device__ inline void multifetch_kernel(const unsigned char* works, int n_pieces) {
  // Raw storage: PieceWork's default member initialisers are not allowed on __shared__.
  __shared__ alignas(PieceWork) unsigned char storage[sizeof(PieceWork)];
  const PieceWork* work = reinterpret_cast<const PieceWork*>(storage);
  for (int p = blockIdx.y; p < n_pieces; p += gridDim.y) {
    const uint64_t* from = reinterpret_cast<const uint64_t*>(works + int64_t(p) * kWorkBytes);
    for (int i = threadIdx.x; i < int(sizeof(PieceWork) / 8); i += blockDim.x)
      reinterpret_cast<uint64_t*>(storage)[i] = from[i];
    __syncthreads();
    fetch_piece<T, kAdd>(*work, threadIdx.x, blockDim.x, blockIdx.x, gridDim.x);
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
  extern "C" __global__ void NAME(const unsigned char* works, int n_pieces) {            \
    autotile::cuda_fetch::multifetch_kernel<T, ADD>(works, n_pieces);                      \
  }
AT_FETCH_KERNEL(autotile_multifetch_copy1, unsigned char, false)
AT_FETCH_KERNEL(autotile_multifetch_copy2, unsigned short, false)
AT_FETCH_KERNEL(autotile_multifetch_copy4, unsigned int, false)
AT_FETCH_KERNEL(autotile_multifetch_copy8, unsigned long long, false)
AT_FETCH_KERNEL(autotile_multifetch_add_f32, float, true)
AT_FETCH_KERNEL(autotile_multifetch_add_f64, double, true)
#undef AT_FETCH_KERNEL
// Prepares the works of a fetch op once (see prepare_works): elem = element bytes, vector = 1
// for copies (which may widen the unit), block = the fetch launch's threads per block.
extern "C" __global__ void autotile_multifetch_prepare(const int64_t* records, int n_pieces, int elem, int vector,
                                                       int block, unsigned char* works) {
  autotile::cuda_fetch::prepare_works(records, n_pieces, elem, vector != 0, block, works);
}

#else  // host C++ compiler: CPU emulation of the kernels for tests

namespace {
template <typename T, bool kAdd>
void emulate(const int64_t* records, int n_pieces, int grid_x, int grid_y, int block_x) {
  using namespace autotile;
  using namespace autotile::cuda_fetch;
  for (int by = 0; by < grid_y; ++by)
    for (int p = by; p < n_pieces; p += grid_y) {
      PieceWork w;
      make_piece_work<!kAdd>(records, p, sizeof(T), block_x, &w);
      for (int bx = 0; bx < grid_x; ++bx)
        for (int tx = 0; tx < block_x; ++tx) fetch_piece<T, kAdd>(w, tx, block_x, bx, grid_x);
    }
}
}  // namespace

extern "C" int autotile_multifetch_record_words() { return autotile::cuda_fetch::kRecordWords; }
extern "C" int autotile_multifetch_work_bytes() { return autotile::cuda_fetch::kWorkBytes; }

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
