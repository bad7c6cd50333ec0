// The joint problem of a whole k-cut plan, for an exact solver outside the core (the integer
// program of planner/ilp_joint.py). The recursive search prices its final plan as a sum over
// edges of the bytes that convert a tensor's layout over all cuts (its sequence of tilings)
// into what its reader needs or its writer makes (the node's sequence of strategies): the
// same pairwise form as one cut, with each variable's domain the sequences of its per-cut
// choices. Solving it exactly gives the true k-cut optimum of the cost model, which the
// recursion (each cut optimal given the earlier ones) is measured against.
#pragma once
#include <string>
#include <vector>

#include "search/external_solver.h"
#include "search/kcuts.h"

namespace autotile {

/// \brief All cuts at once as plain data: one variable per class of tied tensors (the search's
/// coarsening: an updated weight is tiled like the weight, element-wise chains alike) and per
/// class of nodes sharing a strategy, one option per strategy sequence of a node, edge costs
/// the final bytes of that edge.
struct JointProblem {
  CutProblemData data;  ///< cut = number of cuts, k = devices; node_var all -1
  std::vector<int> factors;
  std::vector<int> tensor_var;  ///< tensor -> its variable
  /// [variable][value] -> tiling per cut (empty sequences for a shared strategy variable,
  /// whose value is the option sequence node_values lists)
  std::vector<std::vector<std::vector<std::string>>> tensor_values;
  std::vector<std::vector<std::vector<std::string>>> node_values;    ///< [node][option] -> strategy per cut
};

/// \brief The joint problem of planning `g` on `devices` devices (options.factors, provider
/// and replicate_fallback are honoured; pins, constraints and memory terms are not). Throws
/// Error when a tensor or node would have more than `max_values` sequences.
JointProblem joint_problem(const Graph& g, int devices, const SearchOptions& options, int max_values = 4096);

}  // namespace autotile
