// A layer-wise hybrid plan for one cut: each weighted layer is data-parallel (dp) or
// model-parallel (mp) as HyPar defines them (hypar-hybrid-parallelism.txt Sec 3.1):
//  * dp layer: weights replicated, every batch tensor its nodes touch split along the batch,
//    its nodes split the batch (exactly the `data` baseline's rules, restricted to the layer;
//    a node that cannot split the batch at all, e.g. BatchNorm, is left to the search);
//  * mp layer: weights (and their gradients) split as in the `model` baseline, its nodes keep
//    them in place; activations crossing into or out of the layer are left to the search.
// Unweighted ops belong to the weighted layer before them (ops before the first one follow
// the first). Used by `owt` (dp/mp by op type) and `hypar` (dp/mp by HyPar's cost model).
#pragma once
#include <string>
#include <vector>

#include "search/baselines/layers.h"

namespace autotile {

/// \brief Constraint of one cut where layer l is model-parallel iff mp[l].
PlanConstraint layerwise_constraint(const LayerView& v, const PlanConstraint& data, const CutContext& ctx,
                                    const std::vector<char>& mp, const std::string& name);

/// \brief Whether node n's layer is model-parallel under `mp`.
bool node_is_mp(const LayerView& v, NodeId n, const std::vector<char>& mp);

}  // namespace autotile
