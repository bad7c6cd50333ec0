// A per-device memory term for the one-cut problem, so the search can trade communication for
// memory (issue #15, "Plans that fit"): each tensor tiling value costs `weight` times the bytes
// of the tile one device holds after the cut (a split holds 1/k, a replica or a partial sum all
// of it). The planner searches the weight (planner/memory_fit.py) until the execution graph's
// memory plan fits the budget. The term sits on the tensors' variables, so a node's cheapest
// option, and hence the plan's communication, is priced exactly as without it.
#pragma once
#include "graph/graph.h"
#include "search/cut_problem.h"
#include "search/search_state.h"

namespace autotile {

/// \brief `p` with weight * (bytes each device holds of every tensor) added to its variables.
CutProblem with_memory_term(const Graph& g, const SearchState& s, const CutProblem& p, double weight);

}  // namespace autotile
