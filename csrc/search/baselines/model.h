// The `model` baseline: HyPar's Model Parallelism (hypar-hybrid-parallelism.txt Sec 3.1.2,
// "Uppercase" Model Parallelism = model parallelism in every layer): every weight is split
// (on its input dim, so F_l is split by features and F_(l+1) comes out as partial sums; see
// layer_view for the fallbacks), its gradient is split the same way (computed in place, no
// intra-layer traffic for it), and every node that reads a weight or writes a weight
// gradient must do so in place. Activations and their gradients follow: the DP picks their
// tilings given the pinned weights.
#pragma once
#include "search/kcuts.h"
#include "search/plan.h"

namespace autotile {

/// \brief Plans `g` with model parallelism in every weighted layer.
Plan model_parallel_plan(const Graph& g, int devices, const SearchOptions& options);

}  // namespace autotile
