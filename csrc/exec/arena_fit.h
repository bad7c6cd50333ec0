// Best-fit placement of memory blocks in one device's arena (the offset step of
// exec/memory_plan.h): blocks largest first, each at the smallest gap that holds it among the
// blocks already placed that it may not share memory with.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

namespace autotile {

/// \brief A block of arena memory, needed over the inclusive span [begin, end] of the schedule clock.
struct ArenaBlock {
  int64_t size = 0, begin = 0, end = 0;
};

/// \brief Offsets of `blocks` in one arena, by greedy best fit (TFLite's arena planner).
///
/// Blocks are placed largest first (ties: earlier begin first, then index); each takes the
/// lowest-addressed smallest gap that holds it between the placed blocks it conflicts with,
/// or goes above all of them. Two blocks conflict when their spans overlap or, for blocks
/// whose spans do not, when `also_conflict(earlier, later)` says so (may be empty).
///
/// The placed blocks are kept ordered by offset, so each block's gaps come from one pass over
/// them without sorting (the planner before issue #24 gathered and sorted the conflicting
/// blocks for every block); a gap of exactly the block's size ends the pass. The offsets are
/// the same as that planner's (tests/execgraph/test_arena_fit.py checks them against it).
std::vector<int64_t> place_best_fit(const std::vector<ArenaBlock>& blocks,
                                    const std::function<bool(int, int)>& also_conflict = {});

}  // namespace autotile
