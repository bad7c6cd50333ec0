// C++ timing harness for host MultiFetch (csrc/runtime/multifetch.cc) without Python in the
// way: the regions of `autotile bench multifetch` (64 MB float32 source, 3968 x 3968 and
// 32 x 64 x 88 x 88), each copied with autotile::multifetch and compared with memcpy of the
// same bytes, timed in turn from cold caches (64 MB read before every timed call), medians.
//
//   g++ -O3 -std=c++17 -pthread -Icsrc bench/multifetch_harness.cc csrc/runtime/multifetch.cc -o /tmp/mf_harness
//   nice -n -10 /tmp/mf_harness [repeats] [fresh|warm]
//
// `fresh` allocates a new destination before every multifetch call (page faults included, as
// a first fetch into a new arena buffer pays them); `warm` copies once untimed first, so both
// sides run from caches (what is left is the work per run, not memory latency).
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/multifetch.h"

namespace {

using autotile::FetchDType;
using autotile::FetchSource;

float* alloc(size_t n) {
  void* p = nullptr;
  const size_t bytes = (n * 4 + (2u << 20) - 1) / (2u << 20) * (2u << 20);
  if (posix_memalign(&p, 2u << 20, bytes) != 0) std::abort();
  madvise(p, bytes, MADV_HUGEPAGE);
  return static_cast<float*>(p);
}

volatile uint64_t g_sink;
void evict() {
  static std::vector<uint64_t> scratch(std::vector<uint64_t>(8 << 20, 1));
  uint64_t s = 0;
  for (uint64_t v : scratch) s += v;
  g_sink = s;
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Case {
  const char* name;
  std::vector<int64_t> shape, lo, hi;
};

}  // namespace

int main(int argc, char** argv) {
  const int repeat = argc > 1 ? std::atoi(argv[1]) : 15;
  const std::string mode = argc > 2 ? argv[2] : "";
  const bool fresh = mode == "fresh", warm = mode == "warm";
  const int64_t side = 3968, hw = 88;
  std::vector<Case> cases = {
      {"whole rows (batch half)", {side, side}, {side / 2, 0}, {side, side}},
      {"last dim / 2", {side, side}, {0, 0}, {side, side / 2}},
      {"last dim / 8", {side, side}, {0, 0}, {side, side / 8}},
      {"last dim / 32", {side, side}, {0, 0}, {side, side / 32}},
      {"last dim / 128", {side, side}, {0, 0}, {side, side / 128}},
      {"NCHW channel half", {32, 64, hw, hw}, {0, 32, 0, 0}, {32, 64, hw, hw}},
      {"NCHW width half", {32, 64, hw, hw}, {0, 0, 0, hw / 2}, {32, 64, hw, hw}},
  };
  std::printf("%24s %10s %10s %10s %6s %10s\n", "region", "bytes", "mf GB/s", "memcpy", "ratio", "best ratio");
  for (const Case& c : cases) {
    int64_t n = 1, m = 1;
    std::vector<int64_t> region;
    for (size_t d = 0; d < c.shape.size(); ++d) {
      n *= c.shape[d];
      region.push_back(c.hi[d] - c.lo[d]);
      m *= region.back();
    }
    float* src = alloc(n);
    for (int64_t i = 0; i < n; ++i) src[i] = static_cast<float>(i % 1000003);
    float* dst = alloc(m);
    float* pool = alloc(m);
    float* flat = alloc(m);
    std::memset(dst, 0, m * 4);
    std::memset(flat, 0, m * 4);
    for (int64_t i = 0; i < m; ++i) pool[i] = 1.0f;
    FetchSource p;
    p.data = src;
    p.buf_lo.assign(c.shape.size(), 0);
    p.buf_shape = c.shape;
    p.lo = c.lo;
    p.hi = c.hi;
    std::vector<FetchSource> pieces = {p};
    std::vector<double> tf, tc;
    for (int r = 0; r < repeat; ++r) {
      float* out = dst;
      if (fresh) out = static_cast<float*>(std::aligned_alloc(64, (m * 4 + 63) / 64 * 64));
      if (warm)
        autotile::multifetch(out, c.lo, region, 4, FetchDType::kFloat32, pieces, false);
      else
        evict();
      double t0 = now();
      autotile::multifetch(out, c.lo, region, 4, FetchDType::kFloat32, pieces, false);
      tf.push_back(now() - t0);
      if (fresh) std::free(out);
      if (warm)
        std::memcpy(flat, pool, m * 4);
      else
        evict();
      t0 = now();
      std::memcpy(flat, pool, m * 4);
      tc.push_back(now() - t0);
    }
    // check the last copy against the region read index by index
    autotile::multifetch(dst, c.lo, region, 4, FetchDType::kFloat32, pieces, false);
    std::vector<int64_t> idx(region.size(), 0);
    for (int64_t i = 0; i < m; ++i) {
      int64_t off = 0;
      for (size_t d = 0; d < region.size(); ++d) off = off * c.shape[d] + c.lo[d] + idx[d];
      if (dst[i] != src[off]) {
        std::printf("MISMATCH %s at %lld\n", c.name, static_cast<long long>(i));
        return 1;
      }
      for (int d = static_cast<int>(region.size()) - 1; d >= 0 && ++idx[d] == region[d]; --d) idx[d] = 0;
    }
    const double f = m * 4 / median(tf) / 1e9, k = m * 4 / median(tc) / 1e9;
    const double best = *std::min_element(tc.begin(), tc.end()) / *std::min_element(tf.begin(), tf.end());
    std::printf("%24s %10lld %10.2f %10.2f %6.2f %10.2f\n", c.name, static_cast<long long>(m * 4), f, k, f / k, best);
    std::free(src), std::free(dst), std::free(pool), std::free(flat);
  }
  double load[1];
  getloadavg(load, 1);
  std::printf("load average %.2f\n", load[0]);
  return 0;
}
