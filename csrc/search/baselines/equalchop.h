// The `equalchop` baseline: Tofu's DP restricted to chopping each tensor along one dimension
// only (tofu-dataflow-graph-partitioning.txt Sec 7.3, "EqualChop"). The first cut is the
// unrestricted DP; every later cut repeats each tensor's first-cut choice: a tensor split
// along d stays split along d (replicated once d no longer divides by k), a replicated one
// stays replicated, a partial one stays partial or is reduced (replicate). So no tensor is
// ever tiled along two dims, which is what the recursive search would otherwise do.
#pragma once
#include "search/kcuts.h"
#include "search/plan.h"

namespace autotile {

/// \brief Plans `g` with EqualChop.
Plan equalchop_plan(const Graph& g, int devices, const SearchOptions& options);

}  // namespace autotile
