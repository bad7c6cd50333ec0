// The one-cut DP (Soybean eq. 4-5) generalised to variable elimination on a factor graph.
//
// A node's cost is min over its strategies of a sum of per-edge conversion costs, so with
// the strategy made a variable of its own the cut problem is a sum of PAIRWISE terms
// (strategy, tensor tiling) -- exactly the same minimum, since min_x sum_n min_o f_n(o, x) =
// min_(x, o) sum_n f_n(o_n, x). A node with 20 outputs then costs strategies x tilings per
// output instead of tilings^20, and a tensor touched by one node is minimised out at once.
// Variables are eliminated greedily (elimination.h); the BFS level of each variable's group
// (Soybean Sec 4.2.2) breaks ties, so chains are swept level by level like the paper's DP.
#pragma once
#include <cstdint>
#include <vector>

#include "graph/graph.h"
#include "search/cut_problem.h"

namespace autotile {

/// \brief Values of all variables of a cut problem and the resulting cost (bytes).
struct CutSolution {
  std::vector<int> value;
  double cost = 0;
  double log2_width = 0;  ///< log2 of the largest DP table (0 for bruteforce)
  double work = 0;        ///< DP table entries visited (0 for bruteforce)
  double computed = 0;    ///< the part of `work` computed, not reused from an equal elimination
  /// WidthPolicy::kReport only: the DP would pass `max_states` (nothing solved, value empty).
  bool too_wide = false;
};

/// \brief What solve_one_cut_dp does with a problem too wide for `max_states`: throw WidthError
/// naming the variable (the search: a cut it cannot solve), or return a solution marked
/// too_wide (the refinement, whose moves try neighbourhoods that may not fit: that is a normal
/// outcome there, not an error, and takes no exception).
enum class WidthPolicy { kThrow, kReport };

/// \brief Exact minimum of the cut problem. `priority[v]` (may be empty) orders ties between
/// equally cheap eliminations, lower first. A problem whose elimination would build a table of
/// more than `max_states` entries throws Error naming the tensor or node (kThrow) or comes back
/// marked too_wide (kReport).
CutSolution solve_one_cut_dp(const Graph& g, const CutProblem& p, const std::vector<int64_t>& priority,
                             int64_t max_states = 1 << 26, WidthPolicy width = WidthPolicy::kThrow);

/// \brief Tie-break priority of every variable: BFS level of its group, then its id.
std::vector<int64_t> level_priority(const CutProblem& p, const std::vector<int>& level_of_group, const Coarsening& c);

}  // namespace autotile
