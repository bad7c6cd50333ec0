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
};

/// \brief Exact minimum of the cut problem. `priority[v]` (may be empty) orders ties between
/// equally cheap eliminations, lower first. Throws Error naming the tensor or node whose
/// elimination would build a table of more than `max_states` entries.
CutSolution solve_one_cut_dp(const Graph& g, const CutProblem& p, const std::vector<int64_t>& priority,
                             int64_t max_states = 1 << 26);

/// \brief Tie-break priority of every variable: BFS level of its group, then its id.
std::vector<int64_t> level_priority(const CutProblem& p, const std::vector<int>& level_of_group, const Coarsening& c);

}  // namespace autotile
