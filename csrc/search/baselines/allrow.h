// The `allrow` baseline: Tofu's AllRow-Greedy (tofu-dataflow-graph-partitioning.txt Sec 7.3):
// every tensor is split along its first dimension (at every cut, while the first dim still
// divides by k; a tensor whose first dim does not, and a scalar, is replicated), and every
// operator takes its cheapest strategy given those tilings (the per-node minimum of the cost
// model, which the DP computes when every tensor has a single candidate).
#pragma once
#include "search/kcuts.h"
#include "search/plan.h"

namespace autotile {

/// \brief Plans `g` with AllRow-Greedy.
Plan allrow_plan(const Graph& g, int devices, const SearchOptions& options);

}  // namespace autotile
