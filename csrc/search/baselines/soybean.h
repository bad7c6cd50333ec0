// The `soybean` baseline: Soybean's original search (soybean-tensor-tiling.txt Sec 4.2):
// the one-cut DP over BFS levels and the recursive k-cuts, but without Tofu's graph
// coarsening (Sec 5.1): every operator and every tensor is its own DP entity, so a
// backward op is not grouped with its forward op, nor a tensor with its gradient, nor
// element-wise chains. Ties (updated weight = weight) and shared timestep strategies stay,
// since they define the problem, not the search. The DP is exact on each cut whatever the
// order, so the plan costs what Tofu's costs (up to ties). Our DP eliminates variables
// greedily by table size (one_cut_dp.h), with the BFS level only breaking ties, so the
// uncoarsened levels change the tie-breaks, not the table widths: the search-time blow-up of
// Soybean's strict level-by-level sweep (Tofu Table 1) is not reproduced here.
#pragma once
#include "search/coarsen.h"
#include "search/kcuts.h"
#include "search/plan.h"

namespace autotile {

/// \brief Coarsening `c` with every node and tensor in its own group (ties and shares kept).
Coarsening uncoarsened(const Graph& g, const Coarsening& c);

/// \brief Plans `g` with Soybean's original (uncoarsened) BFS-level DP.
Plan soybean_plan(const Graph& g, int devices, const SearchOptions& options);

}  // namespace autotile
