// The one-cut DP (Soybean eq. 4-5) over the BFS levels of the coarsened graph, run as
// variable elimination: variables enter in level order; a node's cost is added as soon as
// all its variables are in; a variable is minimised out as soon as no later node uses it.
// The table after level l is g_l(tau_l) with tau_l the variables shared with later levels,
// so the result is exact for the cut problem; states are dense mixed-radix arrays.
#pragma once
#include <cstdint>
#include <vector>

#include "search/cut_problem.h"

namespace autotile {

/// \brief Values of all variables of a cut problem and the resulting cost (bytes).
struct CutSolution {
  std::vector<int> value;
  double cost = 0;
};

/// \brief Exact minimum of the cut problem, visiting variables in `order` (a permutation).
/// Throws Error when a DP table would exceed `max_states` entries.
CutSolution solve_one_cut_dp(const CutProblem& p, const std::vector<int>& order, int64_t max_states = 1 << 26);

/// \brief Visiting order of the variables: by BFS level of their group, then group, then id.
std::vector<int> level_order(const CutProblem& p, const std::vector<int>& level_of_group, const Coarsening& c);

/// \brief Alternative visiting order: by the layer of the nodes using each variable (a
/// backward node counts at its forward node's position, other nodes after their inputs'
/// producers), which keeps weight and gradient tensors of wide graphs near their layer.
std::vector<int> layer_order(const Graph& g, const CutProblem& p);

/// \brief log2 of the largest DP table a visiting order leads to (cheap simulation).
double sweep_width(const CutProblem& p, const std::vector<int>& order);

}  // namespace autotile
