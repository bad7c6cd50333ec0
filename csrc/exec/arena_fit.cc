#include "exec/arena_fit.h"

#include <algorithm>
#include <numeric>

namespace autotile {

std::vector<int64_t> place_best_fit(const std::vector<ArenaBlock>& blocks,
                                    const std::function<bool(int, int)>& also_conflict) {
  const int n = static_cast<int>(blocks.size());
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return blocks[a].size != blocks[b].size ? blocks[a].size > blocks[b].size : blocks[a].begin < blocks[b].begin;
  });
  // Placed blocks by offset. Blocks of equal offset may come in any order: after the first of
  // them the running end lies above that offset, so the others open no gap.
  struct Placed {
    int64_t lo, hi, begin, end;
    int block;
  };
  std::vector<Placed> placed;
  placed.reserve(n);
  std::vector<int64_t> offsets(n, -1);
  for (int gi : order) {
    const ArenaBlock& g = blocks[gi];
    int64_t end = 0, best = -1, best_gap = 0;
    for (const Placed& p : placed) {
      if (p.lo >= end + g.size && (best < 0 || p.lo - end < best_gap)) {
        // a gap that holds g, if p conflicts with g
        bool conflict = g.begin <= p.end && p.begin <= g.end;
        if (!conflict && also_conflict)
          conflict = p.end < g.begin ? also_conflict(p.block, gi) : also_conflict(gi, p.block);
        if (!conflict) continue;
        best = end, best_gap = p.lo - end;
        if (best_gap == g.size) break;  // no gap is smaller; the first of equals wins
        end = std::max(end, p.hi);
      } else if (p.hi > end) {
        bool conflict = g.begin <= p.end && p.begin <= g.end;
        if (!conflict && also_conflict)
          conflict = p.end < g.begin ? also_conflict(p.block, gi) : also_conflict(gi, p.block);
        if (conflict) end = p.hi;
      }
    }
    offsets[gi] = best >= 0 ? best : end;
    Placed me{offsets[gi], offsets[gi] + g.size, g.begin, g.end, gi};
    auto at = std::upper_bound(placed.begin(), placed.end(), me.lo, [](int64_t lo, const Placed& p) { return lo < p.lo; });
    placed.insert(at, me);
  }
  return offsets;
}

}  // namespace autotile
