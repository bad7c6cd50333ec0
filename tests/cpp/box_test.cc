// Boxes (csrc/exec/box.h): Dims, the inline-up-to-4 (Dims::kInline) interval list, against
// std::vector as the oracle over random edits (crossing the inline/heap boundary both ways,
// copies, moves, self assignment), and Box::overlaps against building the intersection.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "exec/box.h"

namespace autotile {
namespace {

void expect_same(const Dims& d, const std::vector<Interval>& v) {
  ASSERT_EQ(d.size(), v.size());
  ASSERT_EQ(d.empty(), v.empty());
  size_t i = 0;
  for (const Interval& iv : d) {
    EXPECT_EQ(iv.lo, v[i].lo);
    EXPECT_EQ(iv.hi, v[i].hi);
    EXPECT_EQ(d[i].lo, v[i].lo);
    ++i;
  }
  EXPECT_TRUE(d == Dims(v));
}

TEST(Dims, RandomEditsMatchVector) {
  std::mt19937 rng(7);
  std::vector<Dims> dims(4);
  std::vector<std::vector<Interval>> ref(4);
  for (int step = 0; step < 20000; ++step) {
    const int a = static_cast<int>(rng() % 4), b = static_cast<int>(rng() % 4);
    switch (rng() % 7) {
      case 0:
      case 1: {  // push_back, up to rank 9 (heap beyond kInline)
        if (ref[a].size() >= 9) break;
        const Interval iv{static_cast<int64_t>(rng() % 100), static_cast<int64_t>(rng() % 100)};
        dims[a].push_back(iv);
        ref[a].push_back(iv);
        break;
      }
      case 2: {  // resize down or up (new dims are [0, 0))
        const size_t n = rng() % 8;
        dims[a].resize(n);
        ref[a].resize(n, Interval{0, 0});
        break;
      }
      case 3:  // copy assignment, self included
        dims[a] = dims[b];
        ref[a] = ref[b];
        break;
      case 4: {  // move assignment leaves the source empty
        if (a == b) break;
        dims[a] = std::move(dims[b]);
        ref[a] = ref[b];
        ref[b].clear();
        expect_same(dims[b], ref[b]);
        break;
      }
      case 5: {  // copy and move construction
        Dims copy(dims[a]);
        expect_same(copy, ref[a]);
        Dims moved(std::move(copy));
        expect_same(moved, ref[a]);
        expect_same(copy, {});  // NOLINT: moved-from is empty by contract
        break;
      }
      case 6:  // writes through operator[]
        if (!ref[a].empty()) {
          const size_t i = rng() % ref[a].size();
          dims[a][i].hi += 5;
          ref[a][i].hi += 5;
        }
        break;
    }
    expect_same(dims[a], ref[a]);
    expect_same(dims[b], ref[b]);
  }
}

TEST(Box, OverlapsIsNonEmptyIntersection) {
  std::mt19937 rng(11);
  for (int i = 0; i < 5000; ++i) {
    const size_t rank_a = rng() % 6, rank_b = rng() % 6;
    Box a, b;
    for (size_t d = 0; d < rank_a; ++d) {
      const int64_t lo = rng() % 10;
      a.dims.push_back({lo, lo + static_cast<int64_t>(rng() % 4)});  // empty intervals too
    }
    for (size_t d = 0; d < rank_b; ++d) {
      const int64_t lo = rng() % 10;
      b.dims.push_back({lo, lo + static_cast<int64_t>(rng() % 4)});
    }
    EXPECT_EQ(a.overlaps(b), !a.intersect(b).empty()) << a.str() << " " << b.str();
  }
}

}  // namespace
}  // namespace autotile
