// Entry point of the search: algorithm name -> plan.
#pragma once
#include <string>
#include <vector>

#include "graph/graph.h"
#include "search/kcuts.h"
#include "search/plan.h"

namespace autotile {

/// \brief Names plan_graph accepts (more baselines join as they are written).
const std::vector<std::string>& search_algorithms();

/// \brief Plans `g` on `devices` devices with `algorithm` ("tofu": the DP; "bruteforce": the
/// exhaustive oracle; "data": data parallelism). Throws Error on an unknown name or bad input.
Plan plan_graph(const Graph& g, int devices, const std::string& algorithm, SearchOptions options);

}  // namespace autotile
