// The baselines of issue 3, by algorithm name (plan_graph dispatches here).
#pragma once
#include <string>
#include <vector>

#include "graph/graph.h"
#include "search/kcuts.h"
#include "search/plan.h"

namespace autotile {

/// \brief Names of the baselines implemented in csrc/search/baselines (besides `data`).
const std::vector<std::string>& baseline_algorithms();

/// \brief Plans `g` with baseline `algorithm` (one of baseline_algorithms()); throws Error
/// on an unknown name.
Plan baseline_plan(const Graph& g, int devices, const std::string& algorithm, const SearchOptions& options);

}  // namespace autotile
