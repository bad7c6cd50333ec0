// The result of the partition search: per-cut tilings and strategies with their costs.
#pragma once
#include <string>
#include <vector>

namespace autotile {

/// \brief A partition plan for a k-device training graph (one entry per cut, k = prod factors).
struct Plan {
  std::string algorithm;
  int devices = 1;
  std::vector<int> factors;        ///< k_i of each cut, k_i >= k_(i+1)
  std::vector<double> cut_costs;   ///< delta_i: bytes moved by all devices because of cut i
  double total_bytes = 0;          ///< sum of cut_costs
  double weighted_cost = 0;        ///< sum of delta_i / bandwidth_i (== total_bytes without bandwidths)
  std::vector<std::vector<std::string>> tensor_tilings;   ///< [tensor][cut] "split(d)" | "replicate" | "partial"
  std::vector<std::vector<std::string>> node_strategies;  ///< [node][cut] split variable or "replicate"
  double search_seconds = 0;
  int num_groups = 0;  ///< size of the coarsened graph (first cut)
  int num_levels = 0;  ///< BFS levels of the coarsened graph (first cut)
  /// With the time objective: the plan's seconds in its model (search/time_cost.h), -1 without
  double model_seconds = -1;
  /// With the time objective: each cut's communication seconds, then the final tiles' compute
  std::vector<double> cut_seconds;
};

}  // namespace autotile
