// The `icml18` baseline: the search without output reduction, as Tofu Sec 7.3 describes the
// algorithm of Jia et al., "Exploring hidden dimensions in parallelizing convolutional neural
// networks" (ICML 2018, Tofu's [14]): no operator may split a reduction dimension (leaving its
// output as partial sums) and no tensor is kept partial. An operator whose every strategy
// reduces (e.g. a loss summed to a scalar) keeps its reduction strategies, since otherwise it
// could not be partitioned at all; its output is then reduced at once.
#pragma once
#include "search/kcuts.h"
#include "search/plan.h"

namespace autotile {

/// \brief Plans `g` with the DP restricted to strategies without output reduction.
Plan icml18_plan(const Graph& g, int devices, const SearchOptions& options);

}  // namespace autotile
