// The `owt` baseline: Krizhevsky's "one weird trick" (cited as [111] in
// hypar-hybrid-parallelism.txt Sec 3.4 and 6.5.2, and [46] in Tofu Sec 7.3): convolution
// layers data-parallel, fully-connected layers model-parallel, decided by the op type of each
// weighted layer's forward node; unweighted ops and backward/update ops join their layer
// (see layerwise.h). The remaining freedom (activations at the dp/mp boundary, how an mp
// layer's outputs are tiled) is left to the DP.
#pragma once
#include "search/kcuts.h"
#include "search/plan.h"

namespace autotile {

/// \brief Plans `g` with conv layers data-parallel and fc layers model-parallel.
Plan one_weird_trick_plan(const Graph& g, int devices, const SearchOptions& options);

}  // namespace autotile
