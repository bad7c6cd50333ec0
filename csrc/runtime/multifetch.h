// Host MultiFetch: assemble a region of a tensor in place in one destination buffer from
// pieces held in other buffers (other devices' arenas), with one call (Tofu Sec 6).
#pragma once
#include <cstdint>
#include <vector>

namespace autotile {

/// \brief One source piece: `region` [lo, hi) (absolute tensor coordinates) of a buffer that
/// holds the box starting at `buf_lo` with shape `buf_shape`.
struct FetchSource {
  const void* data = nullptr;
  std::vector<int64_t> buf_lo, buf_shape, lo, hi;
};

/// \brief Element types MultiFetch can accumulate (kBool: logical or; kFloat16 through float,
/// rounded to nearest even per add; kBFloat16 summed in float over every piece and rounded
/// once, so a reduction of bf16 partial sums is an fp32 reduction); kBytes only copies.
enum class FetchDType : uint8_t { kFloat32 = 0, kFloat64 = 1, kBytes = 2, kInt32 = 3, kInt64 = 4, kBool = 5, kFloat16 = 6,
                                    kBFloat16 = 7 };

/// \brief Copies (or, with `accumulate`, zero-fills then adds) every piece into the destination
/// buffer holding box [dst_lo, dst_lo + dst_shape). Copying works for any element size;
/// accumulation needs (b)float16/32/64, int32/64 or bool. Throws Error if a piece lies outside its source or
/// the destination. Touches no Python state: callers release the GIL around it.
void multifetch(void* dst, const std::vector<int64_t>& dst_lo, const std::vector<int64_t>& dst_shape, int elem_size,
                FetchDType dtype, const std::vector<FetchSource>& pieces, bool accumulate);

}  // namespace autotile
